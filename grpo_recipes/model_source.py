"""Local paths versus hub ids, for ``--model`` and ``--dataset``, as ms-swift 4.6 tells them apart, and which
``config.json`` the memory plan used.

ms-swift 4.6, ``swift/utils/hub_utils.py::safe_snapshot_download``: ``~`` is expanded; a path that exists is the
model dir; one that does not and starts with ``/`` stops with "path: '...' not found"; anything else is a hub id.
``swift/dataset/dataset_syntax.py`` and ``swift/dataset/loader.py::_load_repo_dataset``: an existing file is read as
a local file, an existing dir as a local dataset dir, a missing path starting with ``/`` stops with "The local path
does not exist"; anything else is looked up on the hub. A hub id is ``org/name`` (one ``/``, no leading ``.``), so
a name written ``./x``, ``../x``, ``~/x`` or with more than one ``/``, or (for a dataset) a file name with a data
file's extension, can only be a local path: missing here, it fails there too, unless the launch is meant for
another machine.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import GuardError

DATA_SUFFIXES = ('.jsonl', '.json', '.csv', '.parquet', '.txt', '.arrow')


class MissingLocalPath(GuardError):
    """A local model path that does not exist (exit 2): never matched to a bundled config by its name."""


def looks_local(name: str) -> bool:
    """True when ``name`` can only be a local path (never a hub id)."""
    return name.startswith(('/', './', '../', '~')) or name in ('.', '..') or name.count('/') > 1 or '\\' in name


def _strip_dataset(spec: str) -> str:
    """``hf::org/name:subset#500`` / ``data.jsonl#100`` -> the path or id part (DatasetSyntax.parse's order)."""
    if os.path.exists(spec):
        return spec
    spec = spec.split('::', 1)[1] if '::' in spec.split('/', 1)[0] else spec
    if '#' in spec and not os.path.exists(spec):
        spec = spec.rsplit('#', 1)[0]
    if ':' in spec and not os.path.exists(spec):
        spec = spec.split(':', 1)[0]
    return spec


def require_local_model(model: str) -> None:
    """``--model`` written as a local path that does not exist: one line, exit 2."""
    if not looks_local(model) or '$' in model:  # an unresolved $VAR is said as such by model_config_for
        return
    p = Path(model).expanduser()
    if p.exists():
        return
    raise MissingLocalPath(
        f'--model {model}: no such directory ({p.absolute()}); a path can only be local, and ms-swift stops on it '
        f'("path: \'{model}\' not found", swift/utils/hub_utils.py), TRL and transformers alike. Pass the model '
        f'dir that exists here, or --model-config DIR (or the hub id it is a copy of) to plan a launch meant for '
        f'another machine'
    )


def missing_datasets(datasets: list[str], base: Path | None = None) -> list[str]:
    """Each ``--dataset`` entry that can only be a local file or dir and is not there (relative to the working
    dir, or to ``base``, the config file's dir, as the guard's column check reads it)."""
    out = []
    for spec in datasets:
        path = _strip_dataset(str(spec))
        local = looks_local(path) or path.lower().endswith(DATA_SUFFIXES)
        if not local or '$' in path:  # an unresolved $VAR: its value is not known here
            continue
        p = Path(path).expanduser()
        if p.exists() or (base is not None and not p.is_absolute() and (base / p).exists()):
            continue
        out.append(path)
    return out


def dataset_message(path: str) -> str:
    """The finding's text. An absolute path is a warning (ms-swift raises "The local path does not exist"); a
    relative one is information, since a launcher may write it before the launch (the recipes' launchers do)."""
    if path.startswith(('/', '~')):
        return (
            f'dataset {path}: no such file or dir here; ms-swift stops on it ("The local path does not exist", '
            f'swift/dataset/loader.py); fix the path, or ignore this if the launch runs on another machine'
        )
    return (
        f'dataset {path}: not there yet; ms-swift reads it as a local path (a name like this is no hub id) and '
        f'cannot load it unless something writes it before the launch (grpo-data prepare-gsm8k / filter do)'
    )
