"""``grpo-data``: measure and filter GRPO datasets by token length, as the model sees them."""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='grpo-data', description='Token-length stats and filtering for ms-swift '
                                'GRPO datasets, measured with the model\'s own tokenizer and chat template.')
    sub = p.add_subparsers(dest='cmd', metavar='COMMAND')
    f = sub.add_parser('filter', help='keep rows whose prompt fits --max-length; rejects go to a side file')
    f.add_argument('input')
    f.add_argument('-o', '--output', required=True)
    f.add_argument('--tokenizer', required=True)
    f.add_argument('--max-length', type=int, required=True)
    s = sub.add_parser('stats', help='length distribution, coverage and the max_length/vllm_max_model_len to use')
    s.add_argument('input')
    s.add_argument('--tokenizer', required=True)
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.cmd is None:
        p.print_help()
        return 2
    print(f'grpo-data {args.cmd}: not implemented yet', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
