"""The launchers' own parsers rebuilt from ``launcher_args_snapshot.json``, so a launch is read without importing
torch, accelerate or DeepSpeed (importing torch alone takes about a second).

The snapshot is written by ``scripts/gen_launcher_snapshot.py`` from the real parser objects (torch's
``torch.distributed.run.get_args_parser``, the parser ``torch.distributed.launch.parse_args`` builds, DeepSpeed's
``deepspeed.launcher.runner.parse_args``, accelerate's ``launch_command_parser``): every action's class, option
strings, dest, nargs, const, default, type, choices and required, and the parser's own settings. Python's argparse
parses with the rebuilt parser, so abbreviations, ``--opt=value``, REMAINDER and errors behave as the real ones;
``tests/test_launcher_args.py`` holds both to the same namespaces on generated argvs.

The custom types and actions the real parsers use are named in the snapshot by their qualified name and implemented
here with the same semantics (the versions are the snapshot's ``versions``):

- ``torch.distributed.argparse_util.env`` (torch/distributed/argparse_util.py): the default is ``PET_<DEST>`` from
  the environment when set, else the declared one; a non-empty default makes the option not required.
- ``torch.distributed.argparse_util.check_env``: a flag whose default is ``bool(int(PET_<DEST>))`` (``"1"``/``"0"``
  from the declared default when unset; a non-integer value is a ValueError while the parser is built).
- ``torch.distributed.run.get_args_parser.<locals>.comma_separated_list`` (torch/distributed/run.py): split at
  ``,``, where ``,,`` stands for a literal comma.
- ``accelerate.commands.utils._StoreAction`` / ``_StoreConstAction`` / ``_StoreTrueAction``
  (accelerate/commands/utils.py): store the value (or const) and add the dest to the namespace's ``nondefault`` set.
- ``accelerate.utils.environment.str_to_bool``: y/yes/t/true/on/1 -> 1, n/no/f/false/off/0 -> 0, else ValueError;
  ``--fp8_override_linear_precision``'s lambda (accelerate/commands/launch.py): a tuple of ``str_to_bool`` over the
  comma-separated words.
"""

from __future__ import annotations

import argparse
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

SNAPSHOT = Path(__file__).with_name('launcher_args_snapshot.json')

# the launches' names for each parser in the snapshot
TORCHRUN = 'torchrun'
TORCH_LAUNCH = 'torch.distributed.launch'
DEEPSPEED = 'deepspeed'
ACCELERATE = 'accelerate launch'


@lru_cache(maxsize=1)
def snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text(encoding='utf-8'))


def decode(value: Any) -> Any:
    """A JSON value back to Python: ``{"tuple": [...]}`` is a tuple (the encoding the generator writes); argparse's
    SUPPRESS marker is argparse's own object."""
    if isinstance(value, dict) and set(value) == {'tuple'}:
        return tuple(decode(v) for v in value['tuple'])
    if isinstance(value, list):
        return [decode(v) for v in value]
    if value == argparse.SUPPRESS:
        return argparse.SUPPRESS  # argparse tests it by identity
    return value


# ---- custom types ----------------------------------------------------------------------------------------------


def comma_separated_list(value: str) -> list[str]:
    parts = []
    for piece in value.split(',,'):  # `,,` is an escaped comma: it joins the pieces on each side
        words = piece.split(',')
        if parts:
            parts[-1] += ',' + words[0]
            words = words[1:]
        parts.extend(words)
    return parts


def str_to_bool(value: str) -> int:
    low = value.lower()
    if low in ('y', 'yes', 't', 'true', 'on', '1'):
        return 1
    if low in ('n', 'no', 'f', 'false', 'off', '0'):
        return 0
    raise ValueError(f'invalid truth value {low}')


def _bool_tuple(value: str) -> tuple:
    return tuple(str_to_bool(w) for w in value.split(','))


_bool_tuple.__name__ = '<lambda>'  # argparse names the type in its "invalid <lambda> value" message

TYPES = {
    'str': str,
    'int': int,
    'float': float,
    'bool': bool,
    'torch.distributed.run.get_args_parser.<locals>.comma_separated_list': comma_separated_list,
    'accelerate.utils.environment.str_to_bool': str_to_bool,
    'accelerate.commands.launch.launch_command_parser.<locals>.<lambda>:fp8_override_linear_precision': _bool_tuple,
}


# ---- custom actions --------------------------------------------------------------------------------------------


class _AccelerateStore(argparse.Action):
    """accelerate's ``_StoreAction`` (and its const/true forms when nargs is 0): the value, or the const, and the
    dest recorded in ``namespace.nondefault``."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        if not hasattr(namespace, 'nondefault'):
            namespace.nondefault = set()
        namespace.nondefault.add(self.dest)


class _EnvStore(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class _EnvFlag(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


ACCELERATE_STORE = (
    'accelerate.commands.utils._StoreAction',
    'accelerate.commands.utils._StoreConstAction',
    'accelerate.commands.utils._StoreTrueAction',
)
BUILTIN = {
    'store': 'store',
    'store_const': 'store_const',
    'store_true': 'store_true',
    'store_false': 'store_false',
    'append': 'append',
    'append_const': 'append_const',
    'extend': 'extend',
    'count': 'count',
    'help': 'help',
    'version': 'version',
}
# parser classes whose parsing is argparse's own (accelerate's CustomArgumentParser only changes which action
# add_argument picks and the help groups: accelerate/commands/utils.py)
PARSERS = ('argparse.ArgumentParser', 'accelerate.commands.utils.CustomArgumentParser')


class SnapshotError(ValueError):
    """The snapshot names something this module does not implement (regenerate it, or implement the new kind)."""


def _kwargs(a: dict, env: Mapping[str, str]) -> dict[str, Any]:
    kind = a['class']
    kw: dict[str, Any] = {'dest': a['dest']} if a['option_strings'] else {}
    default = decode(a['default'])
    if a.get('type') is not None:
        if a['type'] not in TYPES:
            raise SnapshotError(f'{SNAPSHOT.name}: type {a["type"]} of {a["dest"]} is not implemented here')
        kw['type'] = TYPES[a['type']]
    if a.get('choices') is not None:
        kw['choices'] = decode(a['choices'])
    if a.get('metavar') is not None:
        kw['metavar'] = decode(a['metavar'])
    if kind == 'torch.distributed.argparse_util.env':
        default = env.get(f'PET_{a["dest"].upper()}', default)
        kw.update(action=_EnvStore, nargs=a['nargs'], default=default, required=a['required'] and not default)
    elif kind == 'torch.distributed.argparse_util.check_env':
        flag = bool(int(env.get(f'PET_{a["dest"].upper()}', '1' if default else '0')))
        kw.update(action=_EnvFlag, nargs=0, const=True, default=flag, required=a['required'])
    elif kind in ACCELERATE_STORE:
        kw.update(action=_AccelerateStore, nargs=a['nargs'], const=decode(a['const']), default=default)
        kw['required'] = a['required']
    elif kind in BUILTIN:
        kw['action'] = BUILTIN[kind]
        if kind in ('store', 'append', 'extend'):
            kw.update(nargs=a['nargs'], const=decode(a['const']))
        if kind in ('store_const', 'append_const'):
            kw['const'] = decode(a['const'])
        if kind == 'version':
            kw['version'] = a.get('version')
        if kind not in ('help', 'version'):
            kw['default'] = default
            if a['option_strings']:
                kw['required'] = a['required']
        else:
            kw['default'] = default
    else:
        raise SnapshotError(f'{SNAPSHOT.name}: action class {kind} of {a["dest"]} is not implemented here')
    if not a['option_strings']:
        kw.pop('dest', None)
        kw.pop('required', None)  # a positional's requiredness follows from its nargs
    return kw


def build_parser(name: str, env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The parser ``name`` (torchrun, torch.distributed.launch, deepspeed, accelerate launch) rebuilt from the
    snapshot; ``env`` holds the launch's variables (torch's options take their defaults from ``PET_*``)."""
    spec = snapshot()['parsers'][name]
    if spec['parser_class'] not in PARSERS:
        raise SnapshotError(f'{SNAPSHOT.name}: parser class {spec["parser_class"]} is not implemented here')
    parser = argparse.ArgumentParser(
        prog=spec['prog'] or name,
        allow_abbrev=spec['allow_abbrev'],
        prefix_chars=spec['prefix_chars'],
        fromfile_prefix_chars=spec['fromfile_prefix_chars'],
        argument_default=decode(spec['argument_default']),
        conflict_handler=spec['conflict_handler'],
        exit_on_error=spec['exit_on_error'],
        add_help=False,  # the help action is one of the recorded actions
    )
    for a in spec['actions']:
        flags = a['option_strings'] or [a['dest']]
        parser.add_argument(*flags, **_kwargs(a, env or {}))
    return parser


def flag_variables(name: str) -> list[str]:
    """The ``PET_*`` variables torch reads with int() while building parser ``name`` (its check_env flags)."""
    actions = snapshot()['parsers'][name]['actions']
    return [f'PET_{a["dest"].upper()}' for a in actions if a['class'] == 'torch.distributed.argparse_util.check_env']


def parse_min_max_nnodes(nnodes: str) -> tuple[int, int]:
    """torchrun's ``--nnodes`` as ``torch.distributed.run.parse_min_max_nnodes`` reads it: ``N`` or ``MIN:MAX``
    (int() of each; more parts: a RuntimeError with torch's message). Tests hold it to torch's function."""
    parts = nnodes.split(':')
    if len(parts) > 2:
        raise RuntimeError(f'nnodes={nnodes} is not in "MIN:MAX" format')
    return int(parts[0]), int(parts[-1])
