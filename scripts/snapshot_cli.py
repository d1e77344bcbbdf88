"""The command line the snapshot generators share: write the snapshot, or with ``--check`` compare it with the
checked-in file and exit 1 on drift (the tests run ``--check`` against the installed packages)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def run(
    description: str, build, render, default: Path, what: str, script: str, argv=None, packages: str = 'ms-swift'
) -> int:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument('--check', action='store_true', help='compare with the checked-in snapshot; exit 1 on drift')
    ap.add_argument('--output', type=Path, default=default)
    opts = ap.parse_args(argv)
    text = render(build())
    if opts.check:
        old = opts.output.read_text(encoding='utf-8') if opts.output.exists() else ''
        if old != text:
            print(
                f'{opts.output}: {what} drifted from the installed {packages}; '
                f'run `python {script}` and review the diff',
                file=sys.stderr,
            )
            return 1
        print(f'{opts.output}: up to date')
        return 0
    opts.output.write_text(text, encoding='utf-8')
    print(f'wrote {opts.output}')
    return 0
