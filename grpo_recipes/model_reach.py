"""Can ``swift rlhf`` get the model's weights here? Checked before a launcher starts, so an offline machine gets one
line instead of ms-swift's download traceback (about 200 lines: ``safe_snapshot_download`` retrying the hub).

ms-swift loads ``--model`` from a local directory when it is one, else downloads it from ModelScope, or from the
Hugging Face hub with ``USE_HF=1`` (``swift/utils/hub.py``); a copy already in the hub's local cache is used
without the network. So the model is reachable when it is a local directory, when its weights are in the HF or
ModelScope cache (``models.cached_snapshot``), or when the hub answers (a 3 s TCP probe, as ``grpo-data`` does;
``HF_HUB_OFFLINE=1`` counts as unreachable for the Hugging Face hub). Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .model_source import looks_local
from .models import cached_snapshot

WEIGHT_FILES = (
    'model.safetensors',
    'model.safetensors.index.json',
    'pytorch_model.bin',
    'pytorch_model.bin.index.json',
)
"""transformers' weight file names (transformers/utils/__init__.py: SAFE_WEIGHTS_NAME, WEIGHTS_NAME and their
index files)."""


def _truthy(v: str | None) -> bool:
    return (v or '').strip().lower() in ('1', 'true', 'yes', 'on')


def unreachable(model: str, environ: Mapping[str, str] | None = None, probe=None) -> str | None:
    """None when ``swift rlhf`` can load ``model`` here; else one line saying why not and what to do."""
    from data_tools.swift_datasets import HUB_HOSTS, _reachable

    env = os.environ if environ is None else environ
    probe = probe or (lambda host_port: _reachable(*host_port))
    p = Path(model).expanduser()
    if p.is_dir():
        return None
    if looks_local(model) or '/' not in model:  # a hub id is org/name
        return f'MODEL {model}: no such directory (and not a hub id org/name); set MODEL=/path/to/local/model'
    if cached_snapshot(model, WEIGHT_FILES) is not None:
        return None
    hf = _truthy(env.get('USE_HF'))
    hub = 'the Hugging Face hub' if hf else 'ModelScope'
    host = HUB_HOSTS['hf' if hf else 'ms']
    if hf and _truthy(env.get('HF_HUB_OFFLINE')):
        why = 'HF_HUB_OFFLINE is set'
    elif not probe(host):
        why = f'{host[0]} cannot be reached'
    else:
        return None
    return (
        f'model {model} is not a local directory and its weights are not in the local cache, and {why}: '
        f'swift rlhf would fail downloading it from {hub}; set MODEL=/path/to/local/model (or run where {hub} '
        f'is reachable)'
    )
