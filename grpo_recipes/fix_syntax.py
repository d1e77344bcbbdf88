"""Every fix in the launch's own syntax, and the fixed launch that ``--verify`` puts through the real parser.

A fix is written for where the user sets the value: ``key: value`` lines for a YAML config (``swift rlhf
config.yaml``, ``trl grpo --config f.yaml`` / ``TrlParser``'s ``--config``), ``--key value`` flags for a command line
(``swift rlhf --key value ...``, ``accelerate launch train.py --flag ...``). The rules and the fix search write in
one neutral form (ms-swift's YAML names; TRL launches are turned into TRL's flags by ``frontends.trl.trl_terms``);
this module turns that into the launch's syntax after the check, in one place.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from .launch import CONFIG_SUFFIXES


def syntax_of(launch) -> tuple[str, str | None]:
    """('yaml', the file) when the launch's settings come from a YAML/JSON config file, else ('flags', None)."""
    if launch.framework == 'trl':
        f = launch.trl.trl_config
        return ('yaml', f) if f else ('flags', None)
    f = launch.config_file or ''
    return ('yaml', f) if f.endswith(CONFIG_SUFFIXES) else ('flags', None)


def _swift_names() -> set[str]:
    from .swift_args import all_flags
    return {f.lstrip('-') for f in all_flags()}


def swift_flags(text: str | None) -> str | None:
    """ms-swift YAML wording -> command-line wording: ``key: value`` -> ``--key value`` for ms-swift's arguments,
    ``ENV: {A: x, B: y}`` -> ``A=x B=y`` (the variables go before ``swift rlhf``)."""
    if not text:
        return text

    def env_block(m: re.Match) -> str:
        pairs = re.findall(r'(\w+):\s*("[^"]*"|[^,}]+)', m.group(1))
        return ' '.join(f'{k}={v.strip().strip(chr(34))}' for k, v in pairs) + ' before swift rlhf'

    text = re.sub(r'ENV:\s*\{([^}]*)\}', env_block, text)
    text = re.sub(r'\bCUDA_VISIBLE_DEVICES: "([^"]*)"', r'CUDA_VISIBLE_DEVICES=\1', text)
    names = _swift_names()
    text = re.sub(r'(?m)^([-+]) (\w+): ', lambda m: f'{m.group(1)} --{m.group(2)} ' if m.group(2) in names
                  else m.group(0), text)  # a diff's lines
    return re.sub(r'(?<![\w-])(\w+): (?=\S)', lambda m: f'--{m.group(1)} ' if m.group(1) in names else m.group(0),
                  text)


def swift_cli_fix(fix, launch) -> str:
    """A memory fix for a ``swift rlhf`` command line: the environment line (envfix.render), then the flags to set
    and what they were."""
    from .memory.envfix import render
    from .memory.search import _yaml
    parts = [render({k: v for k, (_, v) in fix.env.items()}, launch)] if fix.env else []
    if fix.changes:
        new = ' '.join(f'--{k} {_yaml(v)}' for k, (_, v) in fix.changes.items())
        old = ', '.join(f'--{k} {_yaml(o)}' for k, (o, _) in fix.changes.items())
        parts.append(f'set {new} on the command line (was {old})')
    return '\n'.join(parts)


def _trl_script_flags() -> set[str]:
    from .frontends.trl.arguments import CLASSES, snapshot
    return {f['name'] for cls in CLASSES for f in snapshot()[cls]}


def trl_yaml(text: str | None, config: str) -> str | None:
    """TRL flag wording -> ``key: value`` for the keys TrlParser reads from ``--config`` (accelerate's options stay
    as they are: they are not config-file keys)."""
    if not text:
        return text
    names = _trl_script_flags()
    out = re.sub(r'(?<![\w-])--(\w+)(?:[ =]((?!--)\S+))?',
                 lambda m: f'{m.group(1)}: {m.group(2) or "true"}' if m.group(1) in names else m.group(0), text)
    return re.sub(r'^add ', f'in {Path(config).name}: ', out) if out != text else out


def render_fixes(report) -> None:
    """Rewrite every finding's fix (and the memory fix) in the syntax of the launch (see the module docstring)."""
    if report.launch.kind != 'train':
        return
    own_argparse = (report.launch.trl.script_parse or {}).get('argparse') or {}
    if report.launch.framework == 'trl' and (report.launch.trl.ignores_cli or 'lines' in own_argparse):
        from .frontends.trl.script_cli import apply_to_report
        apply_to_report(report)  # the script's file and line (or its own argparse options), not flags it ignores
        return
    syntax, config = syntax_of(report.launch)
    trl = report.launch.framework == 'trl'
    if syntax == 'flags' and not trl:
        report.findings = [replace(f, fix=swift_cli_fix(report.fixes[0], report.launch) if f.rule == 'memory.fix' and report.fixes
                                   else swift_flags(f.fix)) for f in report.findings]
    elif syntax == 'yaml' and trl:
        report.findings = [replace(f, fix=trl_yaml(f.fix, config)) for f in report.findings]


def fixed_launch(launch, fix):
    """The launch with ``fix`` applied as the user would apply it, for the real parser (``--verify``); and the
    parts of the fix the parser cannot see (accelerate's own options)."""
    if launch.framework != 'trl':
        return replace(launch, argv=launch.argv + fix.argv(), notes=list(launch.notes)), []
    from .memory.search import _yaml
    from .frontends.trl.arguments import trl_terms
    flags: list[str] = []
    outside: list[str] = []
    env = dict(launch.env)
    for key, (_, new) in fix.changes.items():
        text = trl_terms(f'{key}: {_yaml(new)}')
        m = re.fullmatch(r'accelerate launch --num_processes (\d+)', text)
        if m:
            env['NPROC_PER_NODE'] = m.group(1)  # the world size the parser is given
        elif text.startswith('--'):
            flags += text.split()
        else:
            outside.append(text)
    args = launch.trl.script_args
    trl = replace(launch.trl, script_args=list(launch.argv if args is None else args) + flags)
    return replace(launch, argv=launch.argv + flags, env=env, trl=trl, notes=list(launch.notes)), outside
