"""Shared CLI plumbing: split ``[options] CONFIG [-- extra swift args]`` and print errors as one line."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """(our own args, args after the first ``--`` that belong to ``swift rlhf``)."""
    if '--' in argv:
        i = argv.index('--')
        return argv[:i], argv[i + 1:]
    return argv, []


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write('\n')


def fail(message: str, code: int = 2) -> int:
    print(f'error: {message}', file=sys.stderr)
    return code


def parse_command(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | int:
    """Parse a ``COMMAND [options]`` line. An int is the exit status to return at once: 0 after
    ``--help``, 2 after a usage error or when no command was given (the help is printed)."""
    try:
        opts = parser.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code in (0, None) else 2
    if opts.cmd is None:
        parser.print_help()
        return 2
    return opts
