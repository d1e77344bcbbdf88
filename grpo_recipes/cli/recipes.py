"""``grpo-recipes``: list, copy and validate the shipped recipes (torchtune's ``tune ls/cp/validate``)."""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='grpo-recipes', description='List, copy and validate the GRPO recipes '
                                'shipped with grpo-recipes (not implemented yet: see issue 6).')
    sub = p.add_subparsers(dest='cmd', metavar='COMMAND')
    ls = sub.add_parser('ls', help='table of recipes: model, GPUs, mode, tuner, predicted peak, validation level')
    ls.add_argument('--json', action='store_true', help='machine-readable output')
    cp = sub.add_parser('cp', help='copy a recipe pair (YAML + launcher) out for editing')
    cp.add_argument('name')
    cp.add_argument('dest')
    va = sub.add_parser('validate', help='run the real ms-swift parser and the guard on a recipe')
    va.add_argument('name', nargs='?')
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.cmd is None:
        p.print_help()
        return 2
    print(f'grpo-recipes {args.cmd}: not implemented yet (the recipes land with issue 6)', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
