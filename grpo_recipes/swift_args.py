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
        f'Truthy value expected: got {v} but expected one of yes/no, true/false, t/f, y/n, 1/0 (case insensitive).'
    )


def _choice_type(choices):
    by_text = {str(c): c for c in choices}
    return lambda arg: by_text.get(arg, arg)


_TYPES = {'str': str, 'int': int, 'float': float, 'bool': string_to_bool}


RELEASE_PREFIX = 'ms-swift=='
"""A snapshot name ``ms-swift==3.3.1``: that release's arguments from frontends/swift/releases.json."""


@lru_cache(maxsize=32)
def snapshot(name: str = SNAPSHOT_FILE) -> dict:
    """``name``: the snapshot file, or ``ms-swift==X`` for release X's entry in releases.json (versions.py picks
    it)."""
    if name.startswith(RELEASE_PREFIX):
        return release_snapshot(name[len(RELEASE_PREFIX) :])
    text = resources.files('grpo_recipes').joinpath(name).read_text(encoding='utf-8')
    return json.loads(text)


@lru_cache(maxsize=1)
def releases() -> dict[str, dict[str, dict]]:
    """{ms-swift version: {field: spec}} for every release in releases.json (scripts/gen_swift_release_snapshots.py:
    the first release in full, each later one as what it changes), in release order; ``transformers`` per release in
    ``release_transformers``."""
    text = resources.files('grpo_recipes').joinpath('frontends/swift/releases.json').read_text(encoding='utf-8')
    out: dict[str, dict[str, dict]] = {}
    cur: dict[str, dict] = {}
    for rel in json.loads(text)['releases']:
        if 'fields' in rel:
            cur = dict(rel['fields'])
        else:
            cur = {k: v for k, v in cur.items() if k not in set(rel['dropped'])}
            cur.update(rel['changed'])
        out[rel['ms_swift']] = {'transformers': rel['transformers'], 'fields': cur}
    return out


def release_arguments(fields: dict[str, dict]) -> list[dict]:
    """A release's fields as the argparse entries swift_args_snapshot.json holds (what HfArgumentParser adds per
    field: ``--name``, ``--name-with-dashes``, aliases; the ``--no_name`` complement of a bool defaulting to True)."""
    out = []
    for name, s in fields.items():
        flags = [f'--{name}'] + ([f'--{name.replace("_", "-")}'] if '_' in name else []) + s.get('aliases', [])
        e = {
            'dest': name,
            'flags': flags,
            'action': 'store',
            'type': s.get('type', 'str'),
            'nargs': s.get('nargs'),
            'default': s.get('default'),
        }
        if 'choices' in s:
            e['choices'] = s['choices']
        if e['type'] == 'bool' and e['nargs'] == '?':
            e['const'] = True
        elif 'const' in s:
            e['const'] = s['const']
        if s.get('required'):
            e['required'] = True
        out.append(e)
        if s.get('neg'):
            out.append(
                {
                    'dest': name,
                    'flags': [f'--no_{name}', f'--no-{name.replace("_", "-")}'],
                    'action': 'store_false',
                    'type': 'str',
                    'nargs': 0,
                    'default': False,
                    'const': False,
                }
            )
    return out


def release_snapshot(version: str) -> dict:
    rel = releases()[version]
    return {
        'ms_swift_version': version,
        'transformers_version': rel['transformers'],
        'arguments': release_arguments(rel['fields']),
    }


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and sys.exit(2)
        raise ArgumentError(message)


class ArgumentError(ValueError):
    """A value ms-swift's parser would reject (bad type or choice, missing value)."""


@lru_cache(maxsize=8)
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
    """Split ``argv`` as ms-swift would: (values by dest, remaining unknown strings). An ambiguous abbreviation
    (``ambiguous``) and its values go to the remaining instead of stopping the parse."""
    if name != SNAPSHOT_FILE:  # another release's snapshot (swift_versions): one plain parse
        argv, held = split_ambiguous(argv, name)
        ns, remaining = build_parser(name).parse_known_args(list(argv))
        return vars(ns), remaining + held
    values, remaining, _ = parse_explicit(argv)
    return values, remaining


def ambiguous(flag: str, name: str = SNAPSHOT_FILE) -> list[str]:
    """The options ``flag`` abbreviates when it abbreviates more than one (argparse's allow_abbrev, which
    HfArgumentParser keeps: ms-swift stops with "ambiguous option: --x could match --a, --b"); else []."""
    if not flag.startswith('--') or flag == '--':
        return []
    opt = flag.split('=', 1)[0]
    options = build_parser(name)._option_string_actions
    if opt in options:
        return []
    found = [o for o in options if o.startswith(opt)]
    return found if len(found) > 1 else []


def expand_abbreviations(argv: list[str], name: str = SNAPSHOT_FILE) -> list[str]:
    """``argv`` with each unique abbreviation written out (``--num_gen 4`` -> ``--num_generations 4``), as the
    release ``name``'s parser reads them; what another release's parser then makes of the full names is its own."""
    options = build_parser(name)._option_string_actions
    out = []
    for tok in argv:
        if tok.startswith('--') and tok != '--':
            opt, eq, val = tok.partition('=')
            if opt not in options:
                found = [o for o in options if o.startswith(opt)]
                if len(found) == 1:
                    tok = found[0] + eq + val
        out.append(tok)
    return out


def split_ambiguous(argv: list[str], name: str = SNAPSHOT_FILE) -> tuple[list[str], list[str]]:
    """(``argv`` without its ambiguous abbreviations, those flags with the values that follow them): so one
    ambiguous key is one finding and the rest of the launch is still read."""
    keep, held = [], []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if ambiguous(tok, name):
            held.append(tok)
            i += 1
            while '=' not in tok and i < len(argv) and not argv[i].startswith('--'):
                held.append(argv[i])
                i += 1
            continue
        keep.append(tok)
        i += 1
    return keep, held


def parse_explicit(argv: list[str]) -> tuple[dict[str, Any], list[str], set[str]]:
    """One parse of ``argv``: (values by dest, remaining unknown strings, the dests the user set). Unset dests
    get their defaults as argparse gives them (a string default goes through the argument's type)."""
    parser = build_parser()
    argv, held = split_ambiguous(argv)
    sentinel_ns = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions if a.dest != argparse.SUPPRESS})
    ns, remaining = parser.parse_known_args(list(argv), namespace=sentinel_ns)
    remaining = remaining + held
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
# spelling to (new spelling, why); when a release dropped it is read from releases.json (``dropped_in``).
RENAMED = {
    'train_type': ('tuner_type', 'renamed --tuner_type in ms-swift 4.0, which still read --train_type'),
    'gpu_memory_utilization': ('vllm_gpu_memory_utilization', 'the unprefixed alias'),
    'tensor_parallel_size': ('vllm_tensor_parallel_size', 'the unprefixed alias'),
    'data_parallel_size': ('vllm_data_parallel_size', 'the unprefixed alias'),
    'pipeline_parallel_size': ('vllm_pipeline_parallel_size', 'the vLLM engine argument'),
    'enforce_eager': ('vllm_enforce_eager', 'the vLLM engine argument'),
    'max_num_seqs': ('vllm_max_num_seqs', 'the vLLM engine argument'),
    'vllm_device': (
        'vllm_mode',
        'use --vllm_mode colocate, or --vllm_mode server with `swift rollout` on its own GPUs',
    ),
    'num_infer_workers': ('vllm_mode', 'use --vllm_mode colocate or server'),
    'max_prompt_length': ('max_length', 'in ms-swift GRPO, --max_length is the prompt limit'),
    'vllm_gpu_memory_ratio': ('vllm_gpu_memory_utilization', 'not an ms-swift argument'),
}


def dropped_in(name: str) -> str | None:
    """``removed in ms-swift 3.10`` for a name the 3.x/4.x releases once had (releases.json), else None."""
    rels = list(releases())
    having = [i for i, r in enumerate(rels) if name in releases()[r]['fields']]
    if not having or having[-1] + 1 >= len(rels):
        return None
    gone = rels[having[-1] + 1]
    return f'removed in ms-swift {".".join(gone.split(".")[:2])}'


@dataclass(frozen=True)
class UnknownArgument:
    """A flag ms-swift's parser would leave in ``remaining_argv``; ``stops`` is how ms-swift stops on it where that
    is not the ``remaining_argv`` ValueError (an ambiguous abbreviation: argparse's own error, which
    ``--ignore_args_error`` does not turn off)."""

    flag: str
    suggestion: str | None
    reason: str
    stops: str | None = None

    def describe(self) -> str:
        if self.stops:
            return f'{self.flag}: ambiguous to ms-swift 4.6; use {self.suggestion} ({self.reason})'
        if self.suggestion:
            return f'{self.flag}: unknown to ms-swift 4.6; use {self.suggestion} ({self.reason})'
        return f'{self.flag}: unknown to ms-swift 4.6 ({self.reason})'


def ambiguity(token: str, name: str = SNAPSHOT_FILE) -> tuple[str, str, str] | None:
    """(suggestion, reason, how ms-swift stops) for an ambiguous abbreviation, else None."""
    found = ambiguous(token, name)
    if not found:
        return None
    flag = token.split('=', 1)[0]
    shown = [o for o in found if '-' not in o[2:]] or found  # --a_b and --a-b are one argument: name it once
    best = difflib.get_close_matches(flag, shown, n=1, cutoff=0) or shown[:1]
    return (
        best[0],
        f'it abbreviates {" and ".join(sorted(shown))}',
        f'ms-swift stops with `swift rlhf: error: ambiguous option: {flag} could match {", ".join(found)}`',
    )


def explain_remaining(remaining: list[str]) -> list[UnknownArgument]:
    """Turn ms-swift's leftover strings into one finding per unknown flag, with a suggestion."""
    out = []
    names = sorted({f[2:].replace('-', '_') for f in all_flags()})
    for token in remaining:
        if not token.startswith('--'):
            continue  # the value of an unknown flag
        flag = token.split('=', 1)[0]
        amb = ambiguity(token)
        if amb is not None:
            out.append(UnknownArgument(flag, *amb))
            continue
        key = flag[2:].replace('-', '_')
        if key in RENAMED:
            new, why = RENAMED[key]
            out.append(UnknownArgument(flag, f'--{new}', '; '.join(filter(None, [why, dropped_in(key)]))))
            continue
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
        if close:
            out.append(UnknownArgument(flag, f'--{close[0]}', 'closest known argument'))
        else:
            out.append(UnknownArgument(flag, None, 'no similar argument; see `swift rlhf --help`'))
    return out
