"""``megatron rlhf --rlhf_type grpo ...`` -> :class:`MegatronLaunch`, parsed as ms-swift parses it: the
``megatron`` CLI (swift/cli/_megatron/main.py -> swift/cli/main.py ``cli_main``) expands a leading YAML/JSON config
into flags (``parse_yaml_args``: its ``ENV:`` block sets variables not already set) and starts torchrun when
NPROC_PER_NODE or NNODES is set; the pipeline (swift/megatron/pipelines/train/rlhf.py) parses
``MegatronRLHFArguments`` with ``HfArgumentParser(...).parse_args_into_dataclasses(return_remaining_strings=True)``
(swift/utils/utils.py ``parse_args``) and stops on anything left over (swift/pipelines/base.py ``_parse_args``:
``ValueError(f'remaining_argv: {remaining_argv}')``) unless ``ignore_args_error``.

The argument names, kinds and defaults come from the release's snapshot (snapshot.py); how a flag takes its value
follows transformers' ``HfArgumentParser._parse_dataclass_field``: ``--a_b`` and ``--a-b``; a bool takes an optional
value (``--x`` alone is true) and a default-true bool also gets ``--no_x``; lists take one or more values; a Literal
takes one of its choices; argparse accepts a unique prefix of a long option.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...bounded_load import loads_json, safe_load_yaml
from ...errors import GuardError, InvalidLaunch
from . import snapshot as snap

TRUE = ('yes', 'true', 't', 'y', '1')
FALSE = ('no', 'false', 'f', 'n', '0')


@dataclass
class MegatronLaunch:
    """A ``megatron rlhf`` launch as ms-swift would parse it."""

    args: dict[str, Any]
    """Every field of MegatronRLHFArguments: the launch's values over the snapshot's defaults (before ms-swift's
    __post_init__; plan.py derives what it derives)."""
    explicit: dict[str, str]
    """Names the launch sets -> the flag as written (``--micro_batch_size``, or ``config.yaml: micro_batch_size``)."""
    env: dict[str, str]
    """The environment the launch runs with (the caller's, the command's prefixes, then the config's ENV block)."""
    nproc_per_node: int
    nnodes: int
    release: str | None
    """The ms-swift release that runs it (None: not known; the newest snapshot judges)."""
    snapshot: str
    """The snapshot version the arguments were read with."""
    snapshot_note: str | None = None
    source: str = 'command line'
    config_file: str | None = None
    unknown: list[str] = field(default_factory=list)
    """Strings ms-swift's parser leaves over (its remaining_argv)."""
    renamed: list[dict] = field(default_factory=list)
    """3.x names a 4.x release does not know: {old, new, value, fix}."""
    abbreviated: list[tuple[str, str]] = field(default_factory=list)
    """(as written, the option argparse took it for): unique prefixes argparse accepts."""
    framework: str = 'megatron'
    kind: str = 'train'
    # what frontends/__init__.py's dispatcher sets or reads on every train launch (read_launch, _from_script)
    argv: list[str] = field(default_factory=list)
    """The arguments after ``megatron rlhf`` as written (a config file first, if any)."""
    read_argv: list[str] = field(default_factory=list)
    """The arguments as ms-swift reads them: the config file's keys as flags, then the command line's (what the
    recipe header's digest covers, so it does not depend on where the file lies)."""
    file_env: dict[str, str] = field(default_factory=dict)
    """The config file's ``ENV:`` block (allocconf.read_setting reads PYTORCH_CUDA_ALLOC_CONF from it)."""
    notes: list[str] = field(default_factory=list)
    alloc: Any = None
    rollout: Any = None

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def fw(self):
        """The Framework (framework.py's MEGATRON: ms-swift's facts and hooks), as a Launch's ``fw``: what
        --write-fix and fix_syntax read (a YAML config edited as text, flags after the launch's own)."""
        from .framework import MEGATRON

        return MEGATRON


def _env_int(env: Mapping[str, str], key: str, default: int) -> int:
    raw = env.get(key)
    if raw is None or str(raw).strip() == '':
        return default
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise GuardError(
            f'{key}={raw!r}: expected a whole number of processes/nodes (torchrun --{key.lower()})'
        ) from None
    if v < 1:
        raise GuardError(f'{key}={raw}: must be at least 1 (torchrun --{key.lower()})')
    return v


def _config_argv(path: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """swift/cli/main.py parse_yaml_args: the config's keys as flags, its ENV block under the environment."""
    p = Path(path)
    try:
        text = p.read_text(encoding='utf-8')
    except FileNotFoundError:
        raise GuardError(f'{p}: no such config file') from None
    except (OSError, UnicodeDecodeError) as e:
        raise GuardError(f'{p}: cannot read ({e})') from None
    try:
        config = loads_json(text) if path.endswith('.json') else safe_load_yaml(text)  # bounded (bounded_load.py)
    except (ValueError, yaml.YAMLError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GuardError(f'{p}: not valid {"JSON" if path.endswith(".json") else "YAML"} ({first})') from None
    if config is None:
        return [], {}
    if not isinstance(config, dict):
        raise GuardError(f'{p}: expected a mapping of argument names to values at the top level')
    config = dict(config)
    block = config.pop('ENV', None)
    file_env: dict[str, str] = {}
    if block is not None:
        if not isinstance(block, dict):
            raise GuardError(f'{p}: ENV must be a mapping of variable names to values')
        for k, v in block.items():
            file_env[str(k)] = str(v)
    out = []
    for k, v in config.items():
        out.append(f'--{k}')
        if isinstance(v, list):
            out += [str(i) for i in v]
        else:
            out.append(json.dumps(v, ensure_ascii=False) if isinstance(v, dict) else str(v))
    return out, file_env


class _Options:
    """The option strings of one snapshot, as HfArgumentParser registers them."""

    def __init__(self, fields: dict[str, dict]):
        self.fields = fields
        self.opts: dict[str, tuple[str, bool]] = {}  # option -> (dest, negated)
        for name, f in fields.items():
            self.opts[f'--{name}'] = (name, False)
            if '_' in name:
                self.opts[f'--{name.replace("_", "-")}'] = (name, False)
            if f['kind'] == 'bool' and f.get('default') is True:
                self.opts[f'--no_{name}'] = (name, True)
                self.opts[f'--no-{name.replace("_", "-")}'] = (name, True)

    def lookup(self, opt: str) -> tuple[str, bool, str] | None:
        """(dest, negated, the option matched): exact, else a unique prefix (argparse's allow_abbrev)."""
        if opt in self.opts:
            return (*self.opts[opt], opt)
        hits = {o: d for o, d in self.opts.items() if o.startswith(opt)}
        if len(hits) == 1:
            o = next(iter(hits))
            return (*hits[o], o)
        if len(hits) > 1:  # argparse _parse_optional: several options start with it
            raise InvalidLaunch(
                f'megatron rlhf: error: ambiguous option: {opt} could match '
                f'{", ".join(sorted(hits))} [argparse allow_abbrev]'
            )
        return None


def _convert(name: str, f: dict, raw: str, release: str):
    kind = f['kind']
    where = f'argument --{name}'
    if f.get('choices'):
        for c in f['choices']:
            if str(c) == raw:
                return c
        choices = ', '.join(repr(c) for c in f['choices'])
        raise InvalidLaunch(
            f'megatron rlhf: error: {where}: invalid choice: {raw!r} (choose from {choices}) '
            f'[ms-swift {release}, {f["defined_in"]}]'
        )
    if kind == 'bool':
        if raw.lower() in TRUE:
            return True
        if raw.lower() in FALSE:
            return False
        raise InvalidLaunch(
            f'megatron rlhf: error: {where}: Truthy value expected: got {raw} but expected one of '
            f'yes/no, true/false, t/f, y/n, 1/0 (case insensitive). [transformers hf_argparser]'
        )
    if kind in ('int', 'float'):
        try:
            return int(raw) if kind == 'int' else float(raw)
        except ValueError:
            raise InvalidLaunch(
                f'megatron rlhf: error: {where}: invalid {kind} value: {raw!r} [ms-swift {release}, {f["type"]}]'
            ) from None
    return raw


def _element_kind(f: dict) -> dict:
    t = f['type']
    inner = t[t.find('[') + 1 : t.rfind(']')] if '[' in t else 'str'
    inner = inner.split('[')[-1] if inner.startswith(('List', 'Optional')) else inner
    kind = 'int' if inner.startswith('int') else 'float' if inner.startswith('float') else 'str'
    return {**f, 'kind': kind, 'choices': None}


def parse_args(argv: list[str], fields: dict[str, dict], release: str) -> tuple[dict, dict, list, list]:
    """(values, explicit, remaining, abbreviated) as HfArgumentParser.parse_args_into_dataclasses would."""
    opts = _Options(fields)
    values: dict[str, Any] = {}
    explicit: dict[str, str] = {}
    remaining: list[str] = []
    abbreviated: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith('--') or tok == '--':
            remaining.append(tok)
            i += 1
            continue
        opt, eq, inline = tok.partition('=')
        found = opts.lookup(opt)
        if found is None:
            remaining.append(tok)
            i += 1
            # argparse leaves the unknown option's values over too
            while i < len(argv) and not argv[i].startswith('--'):
                remaining.append(argv[i])
                i += 1
            continue
        name, negated, matched = found
        if matched != opt:
            abbreviated.append((opt, matched))
        f = fields[name]
        i += 1
        follow: list[str] = []
        if not eq:
            while i < len(argv) and not (argv[i].startswith('--') and len(argv[i]) > 2):
                follow.append(argv[i])
                i += 1
        given = [inline] if eq else follow
        explicit[name] = matched
        if negated:
            if given:
                raise InvalidLaunch(f'megatron rlhf: error: argument {matched}: ignored explicit argument {given[0]!r}')
            values[name] = False
            continue
        if f['kind'] == 'list':
            if not given:
                raise InvalidLaunch(f'megatron rlhf: error: argument --{name}: expected at least one argument')
            values[name] = [_convert(name, _element_kind(f), g, release) for g in given]
            continue
        optional_value = f['kind'] == 'bool' and (f['type'] == 'bool' or f.get('default') is not None)
        if not given:
            if optional_value:
                values[name] = True
                continue
            raise InvalidLaunch(f'megatron rlhf: error: argument --{name}: expected one argument')
        values[name] = _convert(name, f, given[0], release)
        remaining += given[1:]  # argparse leaves extra positional strings over
    return values, explicit, remaining, abbreviated


def read(
    argv: list[str], env: Mapping[str, str] | None = None, source: str = 'command line', release: str | None = None
) -> MegatronLaunch:
    """A ``megatron rlhf`` launch: ``argv`` is the command (``['megatron', 'rlhf', ...]``) or what follows
    ``megatron rlhf`` (a config file first, then flags); ``env`` the environment it runs with; ``release`` the
    ms-swift that runs it (default: the newest snapshot)."""
    argv = [str(a) for a in argv]
    if argv and os.path.basename(argv[0]) == 'megatron':
        if argv[1:2] != ['rlhf']:
            raise GuardError(
                f'{source}: `megatron {" ".join(argv[1:2])}` is not `megatron rlhf`; this guard reads '
                f'Megatron GRPO launches (megatron rlhf --rlhf_type grpo ...)'
            )
        argv = argv[2:]
    env = {str(k): str(v) for k, v in (env or {}).items()}
    config_file = None
    written = list(argv)
    file_env: dict[str, str] = {}
    if argv and argv[0].endswith(('.yaml', '.yml', '.json')):
        config_file = argv[0]
        cfg_argv, file_env = _config_argv(argv[0], env)
        for k, v in file_env.items():
            env.setdefault(k, v)  # parse_yaml_args: the environment wins over the file's ENV block
        argv = cfg_argv + argv[1:]
    read_argv = list(argv)
    version, note = snap.snapshot_for(release)
    fields = snap.load(version)['fields']
    rel = release or version
    renamed = []
    rest = []
    # 3.x names a 4.x release dropped: read as their 4.x replacement and reported with the fix
    major4 = (snap.version_tuple(version) or (0,)) >= (4,)
    known = _Options(fields).opts
    i = 0
    while i < len(argv):
        tok = argv[i]
        head, eq, inline = tok.partition('=')
        old = head[2:].replace('-', '_') if head.startswith('--') else None
        if major4 and old in snap.RENAMED_4 and head not in known:  # `--no_x` of a default-true bool still parses
            new, how = snap.RENAMED_4[old]
            j = i + 1
            vals = [inline] if eq else []
            while not eq and j < len(argv) and not argv[j].startswith('--'):
                vals.append(argv[j])
                j += 1
            if how == 'same':
                fix = f'--{new} {" ".join(vals)}'.strip()
                rest += [f'--{new}', *vals]
            elif how == 'negate':
                on = not vals or vals[0].lower() in TRUE
                fix = f'--{new} {"false" if on else "true"}'
                rest += [f'--{new}', 'false' if on else 'true']
            else:
                fix = f'remove {head} (ms-swift 4.x reads the weights from --model)'
            renamed.append({'old': head, 'new': new, 'value': vals, 'fix': fix})
            i = j
            continue
        rest.append(tok)
        i += 1
    values, explicit, remaining, abbreviated = parse_args(rest, fields, rel)
    args = {k: (list(f['default']) if isinstance(f['default'], list) else f['default']) for k, f in fields.items()}
    args.update(values)
    nproc = _env_int(env, 'NPROC_PER_NODE', 1)
    nnodes = _env_int(env, 'NNODES', 1)
    return MegatronLaunch(
        args=args,
        explicit=explicit,
        env=env,
        nproc_per_node=nproc,
        nnodes=nnodes,
        release=release,
        snapshot=version,
        snapshot_note=note,
        source=source,
        config_file=config_file,
        unknown=remaining,
        renamed=renamed,
        abbreviated=abbreviated,
        argv=written,
        read_argv=read_argv,
        file_env=file_env,
    )
