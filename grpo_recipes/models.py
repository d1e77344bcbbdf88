"""Model ``config.json`` lookup: a local dir, a hub id in the local HF/ModelScope cache, a built-in copy (the
recipes' models and the catalogue of popular GRPO models in ``model_configs/``, which work offline), else
``config.json`` alone fetched from the hub the launch's framework downloads from (``model_fetch``)."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import GuardError
from .model_fetch import FetchError, Hub, fetch_config, fetched_from
from .model_source import MissingLocalPath, looks_local, require_local_model

# Hub id → file in model_configs/ (the file name is the id's last part): whole config.json copies.
BUILTIN_MODELS = {
    'Qwen/Qwen2.5-7B-Instruct': 'Qwen2.5-7B-Instruct.json',
    'Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4': 'Qwen2.5-32B-Instruct-GPTQ-Int4.json',
    'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B': 'DeepSeek-R1-Distill-Qwen-32B.json',
}
CATALOGUE = 'catalogue.json'
"""model_configs/catalogue.json: popular GRPO models, only the fields the memory model reads, each with its source
repo, licence and where its numbers were confirmed. A built-in name ``catalogue.json#<hub id>`` is one entry."""


def catalogue() -> dict[str, dict]:
    text = resources.files('grpo_recipes').joinpath('model_configs', CATALOGUE).read_text(encoding='utf-8')
    return json.loads(text)['models']


def _known() -> list[tuple[str, str]]:
    """(hub id, built-in name) of every config the guard bundles: the files, then the catalogue's entries."""
    return list(BUILTIN_MODELS.items()) + [(hub_id, f'{CATALOGUE}#{hub_id}') for hub_id in catalogue()]


def _builtin_for(model: str) -> str | None:
    """The built-in name for ``model``: that exact hub id, else the bundled model it is named like."""
    known: dict[str, str] = {}
    for hub_id, fname in _known():
        known.setdefault(hub_id, fname)
    like = model if model in known else named_like(model)
    return known[like] if like else None


def named_like(model: str) -> str | None:
    """The bundled hub id whose name is ``model``'s last path part (a local copy's usual dir name), or None."""
    base = model.rstrip('/').split('/')[-1].lower()
    return next((hub_id for hub_id, _ in _known() if base == hub_id.split('/')[-1].lower()), None)


def require_here(model: str) -> None:
    """model_source.require_local_model, whose one line also names the bundled model a missing dir is named like."""
    try:
        require_local_model(model)
    except MissingLocalPath as e:
        like = named_like(model)
        if like is None:
            raise
        raise MissingLocalPath(
            f'{e}; its name is that of {like}: --model-config {like} plans it as that model'
        ) from None


def builtin_stem(name: str) -> str:
    """The model's dir name for a built-in copy (what ms-swift matches model_type and template on)."""
    return name.split('#', 1)[1].split('/')[-1] if '#' in name else Path(name).stem


def cached_snapshot(model: str, needed: tuple[str, ...] = ('config.json',)) -> Path | None:
    """A hub id already in the local Hugging Face or ModelScope cache (no network): the dir holding
    any of the ``needed`` files."""
    if '/' not in model or os.path.isabs(model) or Path(model).exists():
        return None
    hf_home = Path(os.environ.get('HF_HOME', Path.home() / '.cache' / 'huggingface'))
    hf_repo = hf_home / 'hub' / ('models--' + model.replace('/', '--')) / 'snapshots'
    candidates = sorted(hf_repo.iterdir(), reverse=True) if hf_repo.is_dir() else []
    # ModelScope (ms-swift's default hub): modelscope >= 1.40 keeps an HF-like layout
    # (<cache>/models/<org>--<name>/snapshots/<rev>/); older releases keep <cache>/hub/models/<org>/<name>
    # with every '.' in the name written as '___' (modelscope/hub/file_download.py), and some
    # <cache>/models/<org>/<name> or <cache>/hub/<org>/<name>.
    ms_cache = Path(os.environ.get('MODELSCOPE_CACHE', Path.home() / '.cache' / 'modelscope'))
    org, _, name = model.partition('/')
    ms_snap = ms_cache / 'models' / f'{org}--{name}' / 'snapshots'
    candidates += sorted(ms_snap.iterdir(), reverse=True) if ms_snap.is_dir() else []
    candidates += [
        ms_cache / 'hub' / 'models' / org / name.replace('.', '___'),
        ms_cache / 'models' / model,
        ms_cache / 'hub' / 'models' / model,
        ms_cache / 'hub' / model,
        ms_cache / 'hub' / org / name.replace('.', '___'),
    ]
    for cand in candidates:
        if any((cand / f).is_file() for f in needed):
            return cand
    return None


def resolve_model_dir(model: str | None, hub: Hub | None = None) -> tuple[Path | None, str | None]:
    """(local dir holding config.json, built-in file name): exactly one is set. With ``hub`` (where the launch
    downloads its model) a model found nowhere here has its config.json fetched from that hub; a launch that pins
    ``--model_revision`` fetches it before taking a bundled copy (which is the hub's main branch)."""
    if not model:
        raise GuardError('--model is not set; add `model: Qwen/Qwen2.5-7B-Instruct` (or a local dir) to the config')
    require_here(model)  # a local path that is not there: an error, never a bundled config by its name
    p = Path(model).expanduser()
    if (p / 'config.json').is_file():
        return p, None
    cached = cached_snapshot(model)
    if cached is not None:
        return cached, None
    builtin = _builtin_for(model)
    if builtin is not None and (hub is None or not hub.revision):
        return None, builtin
    if p.exists():
        raise GuardError(f'--model {model}: the directory has no config.json')
    if hub is not None and '/' in model and not looks_local(model):
        try:
            return fetch_config(model, hub).parent, None
        except FetchError:
            if builtin is not None:
                return None, builtin
            raise
    raise GuardError(
        f'--model {model}: no local dir, no cached copy and no built-in config; pass --model-config DIR '
        f'(its config.json), a local model dir (config.json is enough) or one of: '
        f'{", ".join(list(BUILTIN_MODELS) + list(catalogue()))}'
    )


def builtin_config(fname: str) -> dict[str, Any]:
    if '#' in fname:
        return dict(catalogue()[fname.split('#', 1)[1]]['config'])
    return json.loads(resources.files('grpo_recipes').joinpath('model_configs', fname).read_text(encoding='utf-8'))


def bundled_config(hub_id: str) -> tuple[dict[str, Any], str] | None:
    """(the bundled config.json of exactly this hub id, its built-in name), or None: no fine-tune or other
    organisation's upload is taken for it (a published case names its model; memory/cases.py)."""
    key = hub_id.strip().rstrip('/').lower()
    for h, fname in _known():
        if h.lower() == key:
            return builtin_config(fname), fname
    return None


def load_model_config(model: str | None, hub: Hub | None = None) -> dict[str, Any]:
    local, builtin = resolve_model_dir(model, hub)
    if local is not None:
        try:
            return json.loads((local / 'config.json').read_text(encoding='utf-8'))
        except (OSError, json.JSONDecodeError) as e:
            raise GuardError(f'{local / "config.json"}: cannot read model config ({e})') from None
    return builtin_config(builtin)


def config_only_dir(model: str | None, workdir: Path, given: dict | None = None) -> Path:
    """A dir ms-swift can parse against: the user's own dir, or ``workdir/<name>/config.json`` (``given``: the
    config.json of ``--model-config``, for a model that is neither local nor cached nor bundled).

    The dir is named after the model (e.g. ``Qwen2.5-7B-Instruct``) so ms-swift matches its
    model_type and template the same way it would for the real checkpoint.
    """
    if given is not None:
        if not model:
            raise GuardError('--model is not set; add `model: Qwen/Qwen2.5-7B-Instruct` (or a local dir) to the config')
        d = workdir / (Path(model.rstrip('/')).name or 'model')
        d.mkdir(parents=True, exist_ok=True)
        (d / 'config.json').write_text(json.dumps(given, indent=2), encoding='utf-8')
        return d
    local, builtin = resolve_model_dir(model)
    if local is not None:
        return local
    d = workdir / builtin_stem(builtin)
    d.mkdir(parents=True, exist_ok=True)
    (d / 'config.json').write_text(json.dumps(builtin_config(builtin), indent=2), encoding='utf-8')
    return d


def config_source(model: str | None, given: bool, hub: Hub | None = None) -> str:
    """Where the plan's config.json came from, for the assumptions: the file, or the bundled copy's name."""
    if given:
        return 'model config: the config.json given with --model-config'
    try:
        local, builtin = resolve_model_dir(model, hub)
    except GuardError:
        return ''
    if local is not None:
        src = fetched_from(local / 'config.json')
        if src:
            return f'model config: {local / "config.json"}, fetched from {src} (only that file)'
        return f'model config: {local / "config.json"}'
    where = f'grpo_recipes/model_configs/{builtin}'
    if '#' in builtin:
        hub_id = builtin.split('#', 1)[1]
        where = (
            f'grpo_recipes/model_configs/{CATALOGUE} entry {hub_id} (the fields the memory model reads, from '
            f'{catalogue()[hub_id]["source"]})'
        )
    return (
        f'model config: the bundled copy {where} (the model {model} is neither a local dir nor in the Hugging '
        f'Face / ModelScope cache here)'
    )
