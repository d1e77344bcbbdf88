"""Shared CLI plumbing: split ``[options] CONFIG [-- extra swift args]`` and print errors as one line."""
from __future__ import annotations

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
