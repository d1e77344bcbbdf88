"""A TRL training script that never reads its command line.

``accelerate launch train.py --per_device_train_batch_size 2`` passes the flag to the script, but only a script
that parses ``sys.argv`` sees it: TRL's own ``trl/scripts/grpo.py`` does (``TrlParser``), many users' scripts build
``GRPOConfig(...)`` in code and never look. For such a script the flags change nothing, so the guard plans with the
settings the script writes, says which flags are ignored, and points every fix at the script's file and line
(:func:`point_fix`), not at a flag that would be ignored again. Pure: the script's text in; nothing is run.
"""

from __future__ import annotations

import ast
import re

from ...findings import declare
from ...fix_syntax import PLACEHOLDER

# What reads a command line: TRL's and transformers' parsers, argparse and the usual CLI libraries, sys.argv itself.
PARSER_NAMES = frozenset(
    {
        'TrlParser',
        'HfArgumentParser',
        'ArgumentParser',
        'parse_args',
        'parse_args_and_config',
        'parse_args_into_dataclasses',
        'parse_known_args',
        'argv',
        'from_cli',
    }
)
PARSER_MODULES = frozenset(
    {'argparse', 'click', 'typer', 'fire', 'hydra', 'jsonargparse', 'absl', 'tyro', 'simple_parsing', 'docopt'}
)


def parses_command_line(text: str) -> bool:
    """True when the script may read its command line (or cannot be read: then it is given the benefit of it)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in PARSER_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in PARSER_NAMES:
            return True
        if isinstance(node, ast.Import) and any(a.name.split('.')[0] in PARSER_MODULES for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (
            (node.module or '').split('.')[0] in PARSER_MODULES or any(a.name in PARSER_NAMES for a in node.names)
        ):
            return True
    return False


def ignored_note(script: str, flags: list[str]) -> str:
    shown = [f for f in flags if f.startswith('--')]
    return (
        f'{script} never reads its command line (no TrlParser, HfArgumentParser, argparse or sys.argv): the '
        f'flags after it ({" ".join(shown[:8])}{" ..." if len(shown) > 8 else ""}) are ignored and were not '
        f'checked; the settings are those the script writes'
    )


def point_fix(text: str | None, script: str, lines: dict, config_line: int | None) -> str | None:
    """A fix written as TRL flags -> where to change it in the script: ``train.py:12: per_device_train_batch_size=2``
    for a setting the script writes, ``train.py:9: add vllm_enable_sleep_mode=True to GRPOConfig(...)`` for one it
    does not. accelerate's own options (``accelerate launch --num_processes 3``) are left as they are: they apply."""
    if not text:
        return text

    from .arguments import CLASSES, snapshot

    fields = {f['name'] for cls in CLASSES for f in snapshot()[cls]}

    def one(m: re.Match) -> str:
        flag, value = m.group(1).replace('-', '_'), m.group(2)
        if flag not in fields or flag in ACCELERATE_OPTIONS:
            return m.group(0)  # another tool's option (accelerate's, grpo-data's): it applies as written
        if value and (value.startswith('<') or re.fullmatch(CHOICE, value)):
            # a placeholder (`<your longest prompt> + 2048`) or a choice (`one of [2, 4]`): as written
            py = value
        else:
            py = {'true': 'True', 'false': 'False', None: 'True'}.get(value, value if _number(value) else repr(value))
        if flag in lines:
            return f'{script}:{lines[flag]}: {flag}={py}'
        where = f'{script}:{config_line}' if config_line else script
        return f'{where}: add {flag}={py} to GRPOConfig(...)'

    out = re.sub(rf'(?<![\w-])--([\w-]+)(?:[ =]({CHOICE}|(?!--){PLACEHOLDER}|(?!--)[^\s;,]+))?', one, text)
    out = re.sub(rf'^add (?={re.escape(script)}:\d+: )', 'change ', out)
    out = re.sub(rf' with (?={re.escape(script)}:\d+: )', '; ', out)  # `--use_vllm true with --vllm_mode colocate`
    return re.sub(rf'(?<!^change)(?<! or)(?<!;) (?={re.escape(script)}:\d+: )', '; ', out)  # one place per setting


CHOICE = r'one of \[[^\]]*\]'
"""A fix's list of values to pick from (``--num_generations one of [2, 4]``), kept whole."""


ACCELERATE_OPTIONS = frozenset(
    {
        'num_processes',
        'num_machines',
        'machine_rank',
        'main_process_ip',
        'main_process_port',
        'use_deepspeed',
        'zero_stage',
        'offload_optimizer_device',
        'offload_param_device',
        'gpu_ids',
        'config_file',
        'mixed_precision',
    }
)


def _number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def argparse_fix(text: str | None, script: str, info: dict) -> str | None:
    """A fix written as TRL flags, for a script with its own argparse and no TRL parser: a setting the script takes
    from one of its options (``per_device_train_batch_size=args.batch_size``) is that option on the command line
    (``--batch_size 2``); any other is a change at the script's line (:func:`point_fix`)."""
    if not text:
        return text
    options = info.get('options') or {}
    masked = re.sub(
        r'(?<![\w-])--([\w-]+)(?=[ =]|$)',
        lambda m: (
            ('; ' if m.start() else '') + '\0' + options[m.group(1)].lstrip('-')
            if m.group(1) in options
            else m.group(0)
        ),
        text,
    )
    pointed = point_fix(masked, script, info.get('lines') or {}, info.get('config_line'))
    return pointed.replace('\0', '--').replace(' ; ', '; ') if pointed else pointed


def apply_to_report(report) -> None:
    """A check of a launch whose script ignores its command line: one warning naming the ignored flags, and every
    fix pointed at the script's lines. A script with its own argparse: fixes in its options or at its lines."""
    if report.launch.framework != 'trl':
        return
    from dataclasses import replace

    parsed = (report.launch.trl.script_parse or {}).get('argparse')
    if parsed and 'lines' in parsed:
        report.findings = [
            replace(f, fix=argparse_fix(f.fix, report.launch.trl.script, parsed)) for f in report.findings
        ]
        return
    info = report.launch.trl.ignores_cli
    if not info:
        return
    from ...findings import WARNING, Finding

    script = info['script']
    report.findings = [
        replace(f, fix=point_fix(f.fix, script, info['lines'], info['config_line'])) for f in report.findings
    ]
    if info['ignored']:
        report.findings.append(
            Finding(
                WARNING,
                'trl.script-ignores-command-line',
                [script],
                ignored_note(script, info['ignored']),
                f'set them in {script} (GRPOConfig(...), GRPOTrainer(...)), or parse the '
                f'command line there as trl/scripts/grpo.py does (TrlParser)',
                'trl/scripts/grpo.py (TrlParser((ScriptArguments, GRPOConfig, ModelConfig)))',
            )
        )
    else:
        report.assumptions.append(ignored_note(script, []).split(':')[0] + ': the settings are those it writes')


declare(f'{__name__}.apply_to_report', ('trl.script-ignores-command-line',))
