#!/usr/bin/env python3
"""Regenerate grpo_recipes/frontends/launcher_args_snapshot.json from the installed torch, accelerate and DeepSpeed.

The snapshot records each launcher's real parser object (torchrun's, ``torch.distributed.launch``'s, DeepSpeed's
runner's, ``accelerate launch``'s): every argparse action's class, option strings, dest, nargs, const, default, type,
choices and required, and the parser's settings. ``grpo_recipes/frontends/launcher_args.py`` rebuilds the parsers
from it, so reading a launch imports none of these packages.

    python scripts/gen_launcher_snapshot.py            # rewrite the snapshot
    python scripts/gen_launcher_snapshot.py --check    # exit 1 if it drifted

tests/test_launcher_args.py runs the --check path and compares the rebuilt parsers with these real ones.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / 'grpo_recipes' / 'frontends' / 'launcher_args_snapshot.json'

BUILTIN = {
    argparse._StoreAction: 'store',
    argparse._StoreConstAction: 'store_const',
    argparse._StoreTrueAction: 'store_true',
    argparse._StoreFalseAction: 'store_false',
    argparse._AppendAction: 'append',
    argparse._AppendConstAction: 'append_const',
    argparse._ExtendAction: 'extend',
    argparse._CountAction: 'count',
    argparse._HelpAction: 'help',
    argparse._VersionAction: 'version',
}


@contextlib.contextmanager
def pet_environ(env: dict[str, str] | None = None):
    """This process's ``PET_*`` variables replaced by ``env``'s while a torch parser is built (its ``env`` and
    ``check_env`` actions read them in their constructors)."""
    saved = {k: v for k, v in os.environ.items() if k.startswith('PET_')}
    for k in saved:
        del os.environ[k]
    os.environ.update({k: v for k, v in (env or {}).items() if k.startswith('PET_')})
    try:
        yield
    finally:
        for k in [k for k in os.environ if k.startswith('PET_')]:
            del os.environ[k]
        os.environ.update(saved)


def torchrun_parser() -> argparse.ArgumentParser:
    from torch.distributed import run

    return run.get_args_parser()


def torch_launch_parser() -> argparse.ArgumentParser:
    """The parser ``torch.distributed.launch.parse_args`` builds (torchrun's plus ``--use-env``) and parses with at
    once: taken from that call."""
    from torch.distributed import launch, run

    captured = {}

    def grab():
        p = run.get_args_parser()
        captured['parser'] = p
        p.parse_args = lambda args=None, namespace=None: argparse.Namespace(no_python=False, use_env=True)
        return p

    try:
        launch.get_args_parser = grab
        launch.parse_args([])
    finally:
        launch.get_args_parser = run.get_args_parser
    parser = captured['parser']
    del parser.parse_args
    return parser


def deepspeed_parser() -> argparse.ArgumentParser:
    """The parser ``deepspeed.launcher.runner.parse_args`` builds and parses with at once: taken from that call
    (runner.py's ``argparse`` is swapped for one whose ArgumentParser records itself)."""
    with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed logs its accelerator choice to stdout on import
        from deepspeed.launcher import runner

    captured = {}

    class Recording(argparse.ArgumentParser):
        def parse_args(self, args=None, namespace=None):
            captured['parser'] = self

    shim = types.SimpleNamespace(**{k: getattr(argparse, k) for k in dir(argparse) if not k.startswith('__')})
    shim.ArgumentParser = Recording
    real = runner.argparse
    try:
        runner.argparse = shim
        runner.parse_args([])
    finally:
        runner.argparse = real
    parser = captured['parser']
    parser.__class__ = argparse.ArgumentParser
    return parser


def accelerate_parser() -> argparse.ArgumentParser:
    from accelerate.commands.launch import launch_command_parser

    return launch_command_parser()


REAL = {
    'torchrun': ('torch.distributed.run.get_args_parser', torchrun_parser),
    'torch.distributed.launch': ('torch.distributed.launch.parse_args', torch_launch_parser),
    'deepspeed': ('deepspeed.launcher.runner.parse_args', deepspeed_parser),
    'accelerate launch': ('accelerate.commands.launch.launch_command_parser', accelerate_parser),
}


def real_parser(name: str, env: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """The installed package's own parser ``name``, built with ``env``'s ``PET_*`` variables."""
    with pet_environ(env):
        return REAL[name][1]()


def encode(value):
    if isinstance(value, tuple):
        return {'tuple': [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f'cannot record {value!r} ({type(value).__name__}) in the snapshot')


def qualname(obj) -> str:
    return f'{obj.__module__}.{obj.__qualname__}'


def type_name(action: argparse.Action) -> str | None:
    t = action.type
    if t is None:
        return None
    if t in (str, int, float, bool):
        return t.__name__
    name = qualname(t)
    return f'{name}:{action.dest}' if '<lambda>' in name else name


def action_entry(action: argparse.Action) -> dict:
    cls = type(action)
    entry = {
        'class': BUILTIN.get(cls) or qualname(cls),
        'option_strings': list(action.option_strings),
        'dest': action.dest,
        'nargs': action.nargs,
        'const': encode(action.const),
        'default': encode(action.default),
        'type': type_name(action),
        'choices': encode(list(action.choices)) if action.choices is not None else None,
        'required': action.required,
        'metavar': encode(action.metavar),
    }
    if cls is argparse._VersionAction:
        entry['version'] = action.version
    return entry


def parser_entry(name: str, parser: argparse.ArgumentParser) -> dict:
    derived = parser.prog == os.path.basename(sys.argv[0])  # argparse's default prog: this script's name
    return {
        'source': REAL[name][0],
        'parser_class': qualname(type(parser)),
        'prog': None if derived else parser.prog,
        'allow_abbrev': parser.allow_abbrev,
        'prefix_chars': parser.prefix_chars,
        'fromfile_prefix_chars': parser.fromfile_prefix_chars,
        'argument_default': encode(parser.argument_default),
        'conflict_handler': parser.conflict_handler,
        'exit_on_error': parser.exit_on_error,
        'actions': [action_entry(a) for a in parser._actions],
    }


def build_snapshot() -> dict:
    import importlib.metadata as md

    return {
        'generated_by': 'scripts/gen_launcher_snapshot.py',
        'versions': {p: md.version(p) for p in ('torch', 'accelerate', 'deepspeed')},
        'parsers': {name: parser_entry(name, real_parser(name)) for name in REAL},
    }


def render(snapshot: dict) -> str:
    return json.dumps(snapshot, indent=1) + '\n'


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from snapshot_cli import run  # scripts/snapshot_cli.py, beside this file

    return run(
        __doc__.splitlines()[0],
        build_snapshot,
        render,
        SNAPSHOT,
        'launcher snapshot',
        'scripts/gen_launcher_snapshot.py',
        argv,
        packages='torch, accelerate and DeepSpeed',
    )


if __name__ == '__main__':
    sys.exit(main())
