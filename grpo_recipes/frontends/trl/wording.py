"""TRL's wording of a finished check: a finding's names in TRL's and accelerate's terms (``arguments.trl_terms``),
a fix in TrlParser's ``--config`` YAML, a fix applied to the launch for ``--verify``."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

# Findings the TRL front end writes itself, on the words of the launch as written (verdicts.argument_findings): already
# in TRL's names, and a key quoted from the user's config stays as written (`torch_dtype` is not reworded `dtype`)
WRITTEN_IN_TRL_TERMS = ('args.unknown', 'args.config-key', 'args.value')


def reword(report) -> None:
    """Every finding and assumption of a TRL launch in TRL's names."""
    from .arguments import in_trl_terms, trl_terms

    report.findings = [f if f.rule in WRITTEN_IN_TRL_TERMS else in_trl_terms(f) for f in report.findings]
    report.assumptions = [trl_terms(a) for a in report.assumptions]


def _trl_script_flags() -> set[str]:
    from .arguments import CLASSES, snapshot

    return {f['name'] for cls in CLASSES for f in snapshot()[cls]}


def trl_yaml(text: str | None, config: str) -> str | None:
    """TRL flag wording -> ``key: value`` for the keys TrlParser reads from ``--config`` (accelerate's options stay
    as they are: they are not config-file keys)."""
    if not text:
        return text
    names = _trl_script_flags()
    m = re.fullmatch(r'add ((?:--\w+(?: (?!--)[^\s;]+)? ?)+)((?:; .*)?)', text, flags=re.S)
    pairs = re.findall(r'--(\w+)(?: ((?!--)[^\s;]+))?', m.group(1)) if m else []
    if pairs and all(k in names for k, _ in pairs):  # a memory fix: the lines to paste into the file
        lines = [f'{k}: {v or "true"}' for k, v in pairs]
        rest = '; '.join(p.strip() for p in m.group(2).split(';') if p.strip())  # accelerate's: not config keys
        also = f' (and on the command line: {rest})' if rest else ''
        return f'in {Path(config).name}, set{also}:\n' + '\n'.join(lines)
    out = re.sub(
        r'(?<![\w-])--(\w+)(?:[ =]((?!--)\S+))?',
        lambda m: f'{m.group(1)}: {m.group(2) or "true"}' if m.group(1) in names else m.group(0),
        text,
    )
    return re.sub(r'^add ', f'in {Path(config).name}: ', out) if out != text else out


def render_fixes(report) -> None:
    """A script that ignores its command line (or parses it with its own argparse): fixes at its lines; a launch
    with TrlParser's ``--config``: fixes as that file's keys; else TRL's flags as ``reword`` wrote them."""
    from ...fix_syntax import placeholder_named, syntax_of

    own_argparse = (report.launch.trl.script_parse or {}).get('argparse') or {}
    if report.launch.trl.ignores_cli or 'lines' in own_argparse:
        from .script_cli import apply_to_report

        apply_to_report(report)  # the script's file and line (or its own argparse options), not flags it ignores
        return
    syntax, config = syntax_of(report.launch)
    if syntax == 'yaml':
        report.findings = [replace(f, fix=trl_yaml(f.fix, config)) for f in report.findings]
    report.findings = [replace(f, fix=placeholder_named(f.fix)) for f in report.findings]


def fixed_launch(launch, fix):
    """The launch with ``fix`` applied as the user would apply it (TRL's flags after the script's, accelerate's
    process count in the environment), and the parts of the fix the parser cannot see (accelerate's options)."""
    from ...memory.search import _yaml
    from .arguments import trl_terms

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


def fix_arguments(fix) -> str:
    """A memory fix's changes as TRL/accelerate flags: the script's flags, then accelerate's."""
    from ...memory.search import _yaml
    from .arguments import trl_terms

    parts = [trl_terms(f'{k}: {_yaml(new)}') for k, (_, new) in fix.changes.items()]
    return (
        'add '
        + ' '.join(p for p in parts if not p.startswith('accelerate'))
        + ''.join(f'; {p}' for p in parts if p.startswith('accelerate'))
    )


def fix_text(fix, launch, syntax: str, config: str | None, env: dict) -> list[str]:
    """A fix in TRL's flags (or its ``--config`` keys), the processes and GPUs as accelerate's options."""
    text = fix.text(launch)
    text = trl_yaml(text, config) if syntax == 'yaml' else text
    lines = [text] if text else []
    if env:
        lines.insert(
            0,
            f'CUDA_VISIBLE_DEVICES={env["CUDA_VISIBLE_DEVICES"]} accelerate launch --num_processes '
            f'{env["NPROC_PER_NODE"]} ... (the training command)',
        )
    return lines
