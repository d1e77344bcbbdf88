"""Read a launch exactly as ``swift rlhf`` 4.6 reads it (``swift/cli/main.py``).

``swift rlhf cfg.yaml --extra v`` does three things before anything is imported:

1. ``parse_yaml_args``: a ``.yaml``/``.yml``/``.json`` first argument is loaded; each top-level key
   becomes ``--key value``; a list becomes several values; a dict becomes a JSON string; anything
   else becomes ``str(value)``. The file's ``ENV:`` mapping sets environment variables, but a
   variable already in the environment wins (ms-swift logs a warning). Extra CLI arguments follow.
2. ``get_torchrun_args``: ``NPROC_PER_NODE``, ``MASTER_PORT``, ``NNODES``, ``NODE_RANK`` and
   ``MASTER_ADDR`` become torchrun flags; torchrun is used only if ``NPROC_PER_NODE`` or ``NNODES``
   is set.
3. The trainer process sees ``CUDA_VISIBLE_DEVICES``.

:func:`load_launch` reproduces that and returns one :class:`Launch`. File reading is the only I/O;
:func:`launch_from_mapping` is the pure core.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import GuardError

CONFIG_SUFFIXES = ('.yaml', '.yml', '.json')
# The launch environment that decides processes and devices (ms-swift.md §1.10).
LAUNCH_ENV_KEYS = ('CUDA_VISIBLE_DEVICES', 'NPROC_PER_NODE', 'NNODES', 'NODE_RANK', 'MASTER_ADDR', 'MASTER_PORT')
TORCHRUN_ENV_KEYS = ('NPROC_PER_NODE', 'MASTER_PORT', 'NNODES', 'NODE_RANK', 'MASTER_ADDR')


@dataclass
class Launch:
    """One ``swift rlhf`` launch, as ms-swift would see it."""
    argv: list[str]
    """The final argv handed to ``swift/cli/rlhf.py`` (file keys first, then extra CLI args)."""
    env: dict[str, str]
    """The launch environment (``LAUNCH_ENV_KEYS`` that are set), after the file's ``ENV:`` block."""
    file_env: dict[str, str] = field(default_factory=dict)
    """Variables the file's ``ENV:`` block sets (as strings), whether or not they took effect."""
    config_file: str | None = None
    """The YAML/JSON file, if the launch came from one."""
    notes: list[str] = field(default_factory=list)
    """Things ms-swift would log while reading the launch (e.g. an ENV value overridden)."""

    @property
    def uses_torchrun(self) -> bool:
        return 'NPROC_PER_NODE' in self.env or 'NNODES' in self.env

    def torchrun_args(self) -> list[str]:
        out: list[str] = []
        for key in TORCHRUN_ENV_KEYS:
            if key in self.env:
                out += [f'--{key.lower()}', self.env[key]]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {'config_file': self.config_file, 'argv': self.argv, 'env': self.env,
                'file_env': self.file_env, 'uses_torchrun': self.uses_torchrun, 'notes': self.notes}


def _value_to_argv(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [json.dumps(value, ensure_ascii=False)]
    return [str(value)]


def launch_from_mapping(config: Mapping[str, Any], extra_argv: list[str], environ: Mapping[str, str],
                        source: str = '<config>') -> Launch:
    """Pure core of ``parse_yaml_args``: config mapping + extra argv + process environment → Launch."""
    if not isinstance(config, Mapping):
        raise GuardError(f'{source}: the top level must be a mapping of argument: value '
                         f'(got {type(config).__name__}); write e.g. `rlhf_type: grpo`')
    config = dict(config)
    env_block = config.pop('ENV', None)
    file_env: dict[str, str] = {}
    notes: list[str] = []
    merged = dict(environ)
    if env_block:
        if not isinstance(env_block, Mapping):
            raise GuardError(f'{source}: `ENV:` must be a mapping of VARIABLE: value '
                             f'(got {type(env_block).__name__}); write e.g. `ENV: {{NPROC_PER_NODE: 2}}`')
        for k, v in env_block.items():
            file_env[str(k)] = str(v)
            if k not in environ:
                merged[str(k)] = str(v)
            elif str(v) != environ[k]:
                notes.append(f'{k} is already set in environment, using `{environ[k]}` instead of `{v}` '
                             f'(from {source} ENV)')
    argv: list[str] = []
    for k, v in config.items():
        argv.append(f'--{k}')
        argv += _value_to_argv(v)
    argv += list(extra_argv)
    env = {k: merged[k] for k in LAUNCH_ENV_KEYS if k in merged}
    return Launch(argv=argv, env=env, file_env=file_env, config_file=source, notes=notes)


def read_config_file(path: str | os.PathLike) -> Any:
    """Load a YAML or JSON config the way ms-swift does, with one-line errors."""
    p = Path(path)
    if not p.exists():
        raise GuardError(f'{p}: no such file; pass the path of a swift rlhf YAML/JSON config')
    if p.is_dir():
        raise GuardError(f'{p}: is a directory; pass the path of a swift rlhf YAML/JSON config')
    try:
        text = p.read_text(encoding='utf-8')
    except UnicodeDecodeError as e:
        raise GuardError(f'{p}: not valid UTF-8 at byte {e.start}; save the file as UTF-8') from None
    except OSError as e:
        raise GuardError(f'{p}: cannot read ({e.strerror})') from None
    if p.suffix == '.json':
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise GuardError(f'{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}') from None
    import yaml
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        where = f'{p}:{mark.line + 1}:{mark.column + 1}' if mark is not None else str(p)
        problem = getattr(e, 'problem', None) or str(e).splitlines()[0]
        raise GuardError(f'{where}: invalid YAML: {problem}') from None


def load_launch(args: list[str], environ: Mapping[str, str] | None = None) -> Launch:
    """``args`` is what follows ``swift rlhf``: a config file and extra flags, or flags only.

    A leading ``swift rlhf`` (or ``swift rlhf`` after ``--``) is accepted and dropped, so a user can
    paste their command line as is.
    """
    environ = dict(os.environ if environ is None else environ)
    args = list(args)
    if args[:1] == ['--']:
        args = args[1:]
    if args[:2] == ['swift', 'rlhf']:
        args = args[2:]
    if args and args[0].endswith(CONFIG_SUFFIXES):
        config = read_config_file(args[0])
        if config is None:  # ms-swift would pass the path on as an unknown argument
            raise GuardError(f'{args[0]}: the file is empty; put `rlhf_type: grpo` and the other arguments in it')
        return launch_from_mapping(config, args[1:], environ, source=args[0])
    if args and not args[0].startswith('-'):
        raise GuardError(f'{args[0]}: not a config file (expected .yaml, .yml or .json) nor a --flag')
    return launch_from_mapping({}, args, environ, source='<command line>')
