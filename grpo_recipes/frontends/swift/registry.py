"""``--model_type`` and ``--template`` against ms-swift's registries, without importing ms-swift.

ms-swift stops only once loading has begun: ``ValueError: model_type: 'x' not in [...]``
(swift/model/model_meta.py, ``get_model_info_meta``) and ``ValueError: template_type: 'x' not in [...]``
(swift/template/register.py, ``get_template_meta``). The names are read from ``swift_registry_snapshot.json``,
written from the installed ms-swift's ``MODEL_MAPPING`` and ``TEMPLATE_MAPPING`` by
``scripts/gen_swift_registry.py`` (tests/test_swift_registry.py fails when it drifts). The snapshot is ms-swift
4.6's: a launch judged against ms-swift 3.x (``--swift-version``) is not checked here, and the rule says so.

The suggestion is the right name where the snapshot knows it: a template name given as a model type
(``--model_type qwen2_5``) gets the model's type (``qwen2``, from the registered model id, else the types that use
that template), a model type given as a template gets that type's templates, anything else the closest name.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from importlib import resources

SNAPSHOT_FILE = 'swift_registry_snapshot.json'


@lru_cache(maxsize=1)
def snapshot() -> dict:
    return json.loads(resources.files('grpo_recipes').joinpath(SNAPSHOT_FILE).read_text(encoding='utf-8'))


def registered(model: str | None) -> tuple[str, str | None] | None:
    """(model_type, template) ms-swift registers for a hub id (case-insensitive), else None."""
    if not model:
        return None
    hit = snapshot()['models'].get(model.strip('/').lower())
    return (hit[0], hit[1]) if hit else None


def model_type_problem(name: str, model: str | None) -> tuple[str, str] | None:
    """(message, fix) when ms-swift has no model type ``name``; None when it has."""
    snap = snapshot()
    types = snap['model_types']
    if name in types:
        return None
    msg = (
        f'--model_type {name}: not a model type of ms-swift {snap["ms_swift_version"]}; it stops with '
        f'"model_type: \'{name}\' not in [...]" once loading starts'
    )
    known = registered(model)
    if name in snap['templates']:
        users = sorted(t for t, meta in types.items() if name in meta['templates'])
        right = known[0] if known else (users[0] if len(users) == 1 else None)
        msg += f' ({name!r} is a template name, for --template'
        if right:
            return msg + f'; the model type{" of " + model if known else ""} is {right!r})', f'model_type: {right}'
        return (
            msg + f'; model types that use it: {", ".join(users[:8])})',
            f"model_type: one of {', '.join(users[:8])} (or drop it: ms-swift matches the model's architecture)",
        )
    if known:
        return msg + f' (the model type of {model} is {known[0]!r})', f'model_type: {known[0]}'
    close = difflib.get_close_matches(name, list(types), n=1, cutoff=0.6)
    if close:
        return msg + f'; closest: {close[0]!r}', f'model_type: {close[0]}'
    return msg, "drop --model_type (ms-swift matches the model's architecture) or pick one from ms-swift's list"


def template_problem(name: str, model: str | None) -> tuple[str, str] | None:
    """(message, fix) when ms-swift has no template ``name``; None when it has."""
    snap = snapshot()
    if name in snap['templates']:
        return None
    msg = (
        f'--template {name}: not a template of ms-swift {snap["ms_swift_version"]}; it stops with '
        f'"template_type: \'{name}\' not in [...]"'
    )
    known = registered(model)
    meta = snap['model_types'].get(name)
    close = difflib.get_close_matches(name, snap['templates'], n=1, cutoff=0.75)
    of_model = ''
    if meta:  # a model type given as a template: the model's own template, else the type's only one
        msg += f' ({name!r} is a model type, for --model_type; its templates: {", ".join(meta["templates"])})'
        right = known[1] if known and known[1] else (meta['templates'][0] if len(meta['templates']) == 1 else None)
        of_model = f' (the template of {model})' if known and known[1] else ''
    elif close:  # a misspelling
        right = close[0]
    else:
        right = known[1] if known else None
        of_model = f' (the template of {model})' if known else ''
    if right:
        return msg + f'; use {right!r}' + of_model, f'template: {right}'
    return msg, "drop --template (ms-swift takes the model type's default template)"
