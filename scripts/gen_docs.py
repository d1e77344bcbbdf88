"""Write the generated pages of the documentation site: docs/reference.md (every command's flags, from the argparse
parsers the console commands use) and docs/gpus.md (the GPU catalogue, grpo_recipes/gpus.py).

    python scripts/gen_docs.py          # rewrite both
    python scripts/gen_docs.py --check  # exit 1 when either differs from what the code gives

tests/test_docs.py holds both pages to the code (every flag listed under its command; the same cards and capacities).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    from data_tools.cli import build_parser as data_parser
    from grpo_recipes.cli.guard import build_parser as guard_parser
    from grpo_recipes.cli.recipes import build_parser as recipes_parser

    return [('grpo-guard', guard_parser()), ('grpo-recipes', recipes_parser()), ('grpo-data', data_parser())]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(sub.choices) if sub is not None else {}


def _cell(text: str | None) -> str:
    return ' '.join((text or '').split()).replace('|', '\\|')


def _flag(a: argparse.Action) -> str:
    names = ', '.join(f'`{o}`' for o in a.option_strings)
    if a.nargs == 0:
        return names
    metavar = a.metavar or (a.dest.upper() if a.option_strings else a.dest)
    if isinstance(metavar, tuple):
        metavar = ' '.join(metavar)
    return f'{names} `{metavar}`'


def _options_table(p: argparse.ArgumentParser) -> list[str]:
    rows = ['| argument | what it does |', '|---|---|']
    for a in p._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if a.help == argparse.SUPPRESS:
            continue
        name = _flag(a) if a.option_strings else f'`{a.metavar or a.dest}` (positional)'
        helptext = a.help % {'default': a.default, 'prog': p.prog} if a.help and '%(' in a.help else a.help
        default = (
            ''
            if a.default in (None, False, argparse.SUPPRESS)
            or not a.option_strings
            or a.nargs == 0
            or 'default' in (helptext or '')
            else f' (default: `{a.default}`)'
        )
        rows.append(f'| {name} | {_cell(helptext)}{default} |')
    return rows


def reference() -> str:
    out = [
        '# CLI reference',
        '',
        "Every command and every flag, as each command's `--help` prints them (written by `python "
        'scripts/gen_docs.py` from the parsers the console commands use; a test fails when a flag is missing '
        'here). Exit status everywhere: 0 clean, 1 the launch or data has errors, 2 usage or unreadable input.',
        '',
    ]
    for prog, parser in parsers():
        out += [f'## {prog}', '', _cell(parser.description), '']
        out += _options_table(parser) + ['']
        for name, sp in subcommands(parser).items():
            out += [f'### {prog} {name}', '']
            if sp.description:
                out += [_cell(sp.description), '']
            out += _options_table(sp) + ['']
    return '\n'.join(out).rstrip('\n') + '\n'


def gpus() -> str:
    from grpo_recipes.gpus import CATALOGUE, NOMINAL_GB

    out = [
        '# GPU cards',
        '',
        '`--gpu-type` takes one of these names (or the name `nvidia-smi` prints, such as `NVIDIA A100-SXM4-40GB`, '
        "`NVIDIA H100 80GB HBM3` or `NVIDIA GeForce RTX 4090`); `--gpu-mem GIB` takes any other card's capacity as "
        'torch reports it. Names are matched whole, word by word (`grpo_recipes/gpu_names.py`): `H200` is not the '
        'H20, `A10G` is not the A10, and a name that could be two cards (`A100`: 40 or 80 GB) is refused with '
        'both listed. The capacity is what `torch.cuda.get_device_properties(i).total_memory` reports, in GiB, '
        'each with its source (`grpo_recipes/gpus.py`; "cal" marks a capacity stated by a case of the calibration '
        'set, see [Calibration](calibration.md)); the plan prints the card and its capacity.',
        '',
        'This table is written from the catalogue by `python scripts/gen_docs.py`; a test holds it to the code.',
        '',
        '| card | capacity (GiB, as torch reports it) | memory as sold (GB) | source |',
        '|---|---:|---:|---|',
    ]
    for card, (cap, source) in CATALOGUE.items():
        out.append(f'| {card} | {cap:.2f} | {NOMINAL_GB[card]} | {_cell(source)} |')
    return '\n'.join(out) + '\n'


PAGES = {'docs/reference.md': reference, 'docs/gpus.md': gpus}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--check', action='store_true', help='exit 1 when a page differs from what the code gives')
    opts = p.parse_args(argv)
    stale = []
    for rel, make in PAGES.items():
        text, path = make(), ROOT / rel
        if opts.check:
            if not path.exists() or path.read_text(encoding='utf-8') != text:
                stale.append(rel)
        else:
            path.write_text(text, encoding='utf-8')
            print(f'wrote {rel}')
    if stale:
        print(f'stale: {", ".join(stale)} (run python scripts/gen_docs.py)', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
