#!/usr/bin/env python3
"""Regenerate grpo_recipes/swift_args_snapshot.json from the installed ms-swift.

The snapshot lists every option that ``swift rlhf`` accepts (ms-swift's own
``HfArgumentParser([RLHFArguments])``): flags, destination, value type, nargs,
default and choices. The guard's fast path rebuilds an argparse parser from it, so
it can read a launch in a fraction of a second without importing torch or ms-swift.

    python scripts/gen_swift_snapshot.py            # rewrite the snapshot
    python scripts/gen_swift_snapshot.py --check    # exit 1 if it drifted

tests/test_snapshot.py runs the --check path against the installed ms-swift.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grpo_recipes.frontends.swift.worker import jsonable  # noqa: E402  (light: the standard library only)

SNAPSHOT = ROOT / 'grpo_recipes' / 'swift_args_snapshot.json'


def _type_name(action) -> str:
    t = action.type
    if t is None:
        return 'str'
    name = getattr(t, '__name__', '')
    if name == 'string_to_bool':
        return 'bool'
    if name == '<lambda>' and action.choices is not None:
        return 'choice'
    if t in (str, int, float):
        return name
    return 'str'  # Path, dict, ParallelismConfig, DebugOption...: read as text by our parser


def build_snapshot() -> dict:
    import contextlib
    import importlib.metadata as md

    from transformers import HfArgumentParser

    try:  # ms-swift 4.x
        from swift.arguments import RLHFArguments
        from swift.utils.utils import _patch_get_type_hints
    except ImportError:  # ms-swift 3.x: swift.llm.argument, a plain HfArgumentParser (swift/utils/utils.py parse_args)
        from swift.llm.argument import RLHFArguments

        _patch_get_type_hints = contextlib.nullcontext

    with _patch_get_type_hints():
        parser = HfArgumentParser([RLHFArguments])
    arguments = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        entry = {
            'dest': action.dest,
            'flags': list(action.option_strings),
            'action': 'store_false' if isinstance(action, argparse._StoreFalseAction) else 'store',
            'type': _type_name(action),
            'nargs': action.nargs,
            'default': jsonable(action.default),
        }
        if action.choices is not None:
            entry['choices'] = jsonable(list(action.choices))
        if action.const is not None:
            entry['const'] = jsonable(action.const)
        if action.required:
            entry['required'] = True
        arguments.append(entry)
    try:
        from swift.rewards import orms
    except ImportError:  # ms-swift 3.x
        from swift.plugin.orm import orms
    return {
        'generated_by': 'scripts/gen_swift_snapshot.py',
        'ms_swift_version': md.version('ms-swift'),
        'transformers_version': md.version('transformers'),
        'trl_version': md.version('trl'),
        'builtin_reward_funcs': sorted(orms),
        'arguments': arguments,
    }


def render(snapshot: dict) -> str:
    return json.dumps(snapshot, indent=1, sort_keys=False) + '\n'


def main(argv=None) -> int:
    from snapshot_cli import run  # scripts/snapshot_cli.py, beside this file

    return run(
        __doc__.splitlines()[0], build_snapshot, render, SNAPSHOT, 'snapshot', 'scripts/gen_swift_snapshot.py', argv
    )


if __name__ == '__main__':
    sys.exit(main())
