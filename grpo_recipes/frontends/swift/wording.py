"""ms-swift's command-line wording of a fix: the rules and the fix search write ``key: value`` (ms-swift's YAML
names); a launch given as a command line gets ``--key value`` flags."""

from __future__ import annotations

import re


def _swift_names() -> set[str]:
    from ...swift_args import all_flags

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
    text = re.sub(
        r'(?m)^([-+]) (\w+): ', lambda m: f'{m.group(1)} --{m.group(2)} ' if m.group(2) in names else m.group(0), text
    )  # a diff's lines
    return re.sub(r'(?<![\w-])(\w+): (?=\S)', lambda m: f'--{m.group(1)} ' if m.group(1) in names else m.group(0), text)


def swift_cli_fix(fix, launch) -> str:
    """A memory fix for a ``swift rlhf`` command line: the environment line (envfix.render), then the flags to set
    and what they were."""
    from ...memory.envfix import render
    from ...memory.search import _yaml

    parts = [render({k: v for k, (_, v) in fix.env.items()}, launch)] if fix.env else []
    if fix.changes:
        new = ' '.join(f'--{k} {_yaml(v)}' for k, (_, v) in fix.changes.items())
        # what the user wrote: a value left unset is not quoted back as 'null'
        old = ', '.join(f'--{k} {_yaml(o)}' for k, (o, _) in fix.changes.items() if o is not None)
        parts.append(f'set {new} on the command line' + (f' (was {old})' if old else ''))
    return '\n'.join(parts)
