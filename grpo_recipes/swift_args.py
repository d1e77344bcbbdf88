"""The fast path: ms-swift 4.6's `swift rlhf` options, read without importing ms-swift.

`swift_args_snapshot.json` is generated from ms-swift's own ``HfArgumentParser([RLHFArguments])``
by ``scripts/gen_swift_snapshot.py`` (and a test fails if it drifts from the installed
ms-swift). Here we rebuild an ``argparse`` parser with the same flags, types, nargs, defaults and
choices, so a command line is split exactly as ms-swift splits it (abbreviations, ``--k=v``,
``nargs='+'`` lists, bare boolean flags, ``--no_*`` flags) in well under a second.
"""
from __future__ import annotations

import argparse
import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

SNAPSHOT_FILE = 'swift_args_snapshot.json'


def string_to_bool(v):
    """The same truth table as transformers' HfArgumentParser."""
    if isinstance(v, bool):
        return v
    if v.lower() in ('yes', 'true', 't', 'y', '1'):
        return True
    if v.lower() in ('no', 'false', 'f', 'n', '0'):
        return False
    raise argparse.ArgumentTypeError(
        f'Truthy value expected: got {v} but expected one of yes/no, true/false, t/f, y/n, 1/0 (case insensitive).')


def _choice_type(choices):
    by_text = {str(c): c for c in choices}
    return lambda arg: by_text.get(arg, arg)


_TYPES = {'str': str, 'int': int, 'float': float, 'bool': string_to_bool}


@lru_cache(maxsize=4)
def snapshot(name: str = SNAPSHOT_FILE) -> dict:
    """``name``: the snapshot file (another ms-swift release's: swift_versions.py picks it)."""
    text = resources.files('grpo_recipes').joinpath(name).read_text(encoding='utf-8')
    return json.loads(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and sys.exit(2)
        raise ArgumentError(message)


class ArgumentError(ValueError):
    """A value ms-swift's parser would reject (bad type or choice, missing value)."""


@lru_cache(maxsize=4)
def build_parser(name: str = SNAPSHOT_FILE) -> argparse.ArgumentParser:
    parser = _Parser(prog='swift rlhf', add_help=False, allow_abbrev=True)
    for a in snapshot(name)['arguments']:
        if a['action'] == 'store_false':
            parser.add_argument(*a['flags'], dest=a['dest'], action='store_false', default=a['default'])
            continue
        kwargs: dict[str, Any] = {'dest': a['dest'], 'default': a['default']}
        if a['type'] == 'choice':
            kwargs['type'] = _choice_type(a['choices'])
            kwargs['choices'] = a['choices']
        else:
            kwargs['type'] = _TYPES[a['type']]
            if 'choices' in a:
                kwargs['choices'] = a['choices']
        if a['nargs'] is not None:
            kwargs['nargs'] = a['nargs']
        if 'const' in a:
            kwargs['const'] = a['const']
        parser.add_argument(*a['flags'], **kwargs)
    return parser


def parse(argv: list[str], name: str = SNAPSHOT_FILE) -> tuple[dict[str, Any], list[str]]:
    """Split ``argv`` as ms-swift would: (values by dest, remaining unknown strings)."""
    if name != SNAPSHOT_FILE:  # another release's snapshot (swift_versions): one plain parse
        ns, remaining = build_parser(name).parse_known_args(list(argv))
        return vars(ns), remaining
    values, remaining, _ = parse_explicit(argv)
    return values, remaining


def parse_explicit(argv: list[str]) -> tuple[dict[str, Any], list[str], set[str]]:
    """One parse of ``argv``: (values by dest, remaining unknown strings, the dests the user set). Unset dests
    get their defaults as argparse gives them (a string default goes through the argument's type)."""
    parser = build_parser()
    sentinel_ns = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions if a.dest != argparse.SUPPRESS})
    ns, remaining = parser.parse_known_args(list(argv), namespace=sentinel_ns)
    values: dict[str, Any] = {}
    explicit: set[str] = set()
    for a in parser._actions:
        if a.dest == argparse.SUPPRESS or a.dest in values:
            continue
        v = getattr(ns, a.dest)
        if v is not _UNSET:
            values[a.dest] = v
            explicit.add(a.dest)
        elif a.default is not argparse.SUPPRESS:
            values[a.dest] = parser._get_value(a, a.default) if isinstance(a.default, str) else a.default
    return values, remaining, explicit


class _Unset:
    def __repr__(self):
        return '<unset>'


_UNSET = _Unset()


def all_flags() -> list[str]:
    return [f for a in snapshot()['arguments'] for f in a['flags']]


# Arguments that existed in ms-swift 3.x (or in trl/vLLM) under another name. Each maps the old
# spelling to (new spelling, why). Sources: ms-swift.md §1.11 (3.x → 4.x renames and removals).
RENAMED = {
    'train_type': ('tuner_type', 'renamed in ms-swift 4.0; there is no alias'),
    'gpu_memory_utilization': ('vllm_gpu_memory_utilization', 'the unprefixed alias was removed in ms-swift 3.8'),
    'tensor_parallel_size': ('vllm_tensor_parallel_size', 'the unprefixed alias was removed in ms-swift 3.8'),
    'data_parallel_size': ('vllm_data_parallel_size', 'the unprefixed alias was removed in ms-swift 3.8'),
    'pipeline_parallel_size': ('vllm_pipeline_parallel_size', 'the unprefixed alias was removed in ms-swift 3.8'),
    'enforce_eager': ('vllm_enforce_eager', 'the unprefixed alias was removed in ms-swift 3.8'),
    'max_num_seqs': ('vllm_max_num_seqs', 'the unprefixed alias was removed in ms-swift 3.8'),
    'vllm_device': ('vllm_mode', 'removed in ms-swift 3.6: use --vllm_mode colocate, or --vllm_mode server '
                                 'with `swift rollout` on its own GPUs'),
    'num_infer_workers': ('vllm_mode', 'removed in ms-swift 3.6: use --vllm_mode colocate or server'),
    'max_prompt_length': ('max_length', 'in ms-swift GRPO, --max_length is the prompt limit'),
    'vllm_gpu_memory_ratio': ('vllm_gpu_memory_utilization', 'not an ms-swift argument'),
}


@dataclass(frozen=True)
class UnknownArgument:
    """A flag ms-swift's parser would leave in ``remaining_argv``."""
    flag: str
    suggestion: str | None
    reason: str

    def describe(self) -> str:
        if self.suggestion:
            return f'{self.flag}: unknown to ms-swift 4.6; use {self.suggestion} ({self.reason})'
        return f'{self.flag}: unknown to ms-swift 4.6 ({self.reason})'


def explain_remaining(remaining: list[str]) -> list[UnknownArgument]:
    """Turn ms-swift's leftover strings into one finding per unknown flag, with a suggestion."""
    out = []
    names = sorted({f[2:].replace('-', '_') for f in all_flags()})
    for token in remaining:
        if not token.startswith('--'):
            continue  # the value of an unknown flag
        flag = token.split('=', 1)[0]
        key = flag[2:].replace('-', '_')
        if key in RENAMED:
            new, why = RENAMED[key]
            out.append(UnknownArgument(flag, f'--{new}', why))
            continue
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
        if close:
            out.append(UnknownArgument(flag, f'--{close[0]}', 'closest known argument'))
        else:
            out.append(UnknownArgument(flag, None, 'no similar argument; see `swift rlhf --help`'))
    return out
