"""Calibration cases (``../shared/calibration/README.md`` gives the schema): read a JSONL file, check each case's
shape, and normalise the spellings sources use, naming every field that is off."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import GuardError
from ..hardware import MAX_GPUS_PER_NODE
from .arch import DTYPE_ALIASES


class CannotPredict(Exception):
    pass


def load_cases(path: str | Path) -> list[dict]:
    p = Path(path)
    if not p.is_file():
        raise GuardError(f'{p}: no such file; pass a JSON-lines file of cases (see ../shared/calibration/README.md)')
    cases = []
    for i, line in enumerate(p.read_text(encoding='utf-8').splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError as e:
            raise GuardError(f'{p}:{i}: invalid JSON ({e.msg})') from None
        if not isinstance(case, dict) or 'kind' not in case or 'id' not in case:
            raise GuardError(f'{p}:{i}: each line must be an object with at least "id" and "kind"')
        cases.append(case)
    return cases


# Numeric fields the scorer reads; a case that gives one in another form cannot be scored on it.
NUMERIC_TOP = ('gpu_total_gib', 'num_gpus')
NUMERIC_OUTCOME = (
    'peak_gib_per_gpu',
    'model_load_gib_per_gpu',
    'model_load_gib',
    'kv_cache_gib_per_gpu',
    'kv_cache_gib',
    'kv_cache_tokens',
    'kv_cache_capacity_tokens',
)
ARCH_POSITIVE = (
    'hidden_size',
    'num_hidden_layers',
    'num_attention_heads',
    'vocab_size',
    'intermediate_size',
    'num_key_value_heads',
    'head_dim',
    'max_position_embeddings',
)
ARCH_COUNTS = (
    'moe_intermediate_size',
    'num_experts',
    'num_local_experts',
    'num_experts_per_tok',
    'shared_expert_intermediate_size',
)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def normalise(case: dict) -> tuple[dict, list[str]]:
    """What a source states in another form, read as the scorer needs it (a copy; notes say what was read):
    - a list of per-GPU figures: the peak is the largest (the guard predicts the fullest GPU), the KV cache the
      smallest (vLLM sizes the cache by its smallest worker), the weights the largest;
    - a negative KV figure is vLLM's failing start-up log ("No available memory for the cache blocks"): the
      start-up failed, and there is no KV size to compare;
    - ``torch_dtype`` ``auto`` is the checkpoint's dtype (model_config), but for vLLM, which resolves it by
      release and card; ``bf16``/``fp16``/``fp32`` their names;
    - no ``model_config`` for a model the guard bundles (``models.bundled_config``, that exact hub id): its config."""
    case = json.loads(json.dumps(case))
    notes: list[str] = []
    out = case.get('outcome')
    if isinstance(out, dict):
        for key, pick in (
            ('peak_gib_per_gpu', max),
            ('kv_cache_gib_per_gpu', min),
            ('kv_cache_gib', min),
            ('model_load_gib_per_gpu', max),
            ('kv_cache_tokens', min),
        ):
            v = out.get(key)
            if isinstance(v, list) and v and all(_is_num(x) for x in v):
                out[key] = pick(v)
                notes.append(f'outcome.{key}: {pick.__name__} of {len(v)} per-GPU figures')
        for key in ('kv_cache_gib_per_gpu', 'kv_cache_gib'):
            v = out.get(key)
            if _is_num(v) and v < 0:
                out.pop(key)
                out['startup_failed'] = True
                notes.append(f'outcome.{key} {v} < 0: vLLM had no memory for the KV cache (a failed start-up)')
    if not case.get('model_config') and isinstance(case.get('model'), str):
        from ..models import bundled_config

        got = bundled_config(case['model'])
        if got is not None:  # the case names a model the guard bundles: its config.json, as `check` would take it
            case['model_config'] = got[0]
            notes.append(f'model_config: the bundled {got[1]} (the case gives none)')
    cfg = case.get('config')
    mc = case.get('model_config') if isinstance(case.get('model_config'), dict) else {}
    if isinstance(cfg, dict) and case.get('kind') == 'vllm_startup':  # vLLM's CLI spellings: --max-model-len, --dtype
        for k in [k for k in cfg if '-' in k]:
            cfg.setdefault(k.replace('-', '_'), cfg.pop(k))
        if 'dtype' in cfg and 'torch_dtype' not in cfg:
            cfg['torch_dtype'] = cfg.pop('dtype')
    if isinstance(cfg, dict) and isinstance(cfg.get('torch_dtype'), str):
        d = cfg['torch_dtype'].lower()
        if d == 'auto' and case.get('kind') == 'vllm_startup':
            cfg['torch_dtype'] = 'auto'  # vLLM's own rules resolve it, by release and card (vllm_engine.vllm_dtype)
        elif d == 'auto':
            if mc.get('torch_dtype', mc.get('dtype')):
                cfg['torch_dtype'] = str(mc.get('torch_dtype', mc.get('dtype')))
                notes.append(f"config.torch_dtype auto: the checkpoint's {cfg['torch_dtype']}")
            else:
                cfg.pop('torch_dtype')
        else:
            cfg['torch_dtype'] = DTYPE_ALIASES.get(d, d)
    return case, notes


def _check_shape(case: dict) -> None:
    """Refuse, naming the field, the values the scorer cannot use (rather than failing on them later)."""
    for key in ('config', 'model_config', 'outcome'):
        v = case.get(key)
        if v is not None and not isinstance(v, dict):
            raise CannotPredict(f'{key} (an object, got {v!r:.40})')
    for key in NUMERIC_TOP:
        v = case.get(key)
        if v is not None and not (_is_num(v) and v > 0):
            raise CannotPredict(f'{key} (a positive number, got {v!r:.40})')
    for where, v in (
        ('num_gpus', case.get('num_gpus')),
        ('config.NPROC_PER_NODE', (case.get('config') or {}).get('NPROC_PER_NODE')),
    ):
        n = int(v) if isinstance(v, str) and v.isdigit() else v
        if _is_num(n) and n > MAX_GPUS_PER_NODE:
            raise CannotPredict(f'{where} (at most {MAX_GPUS_PER_NODE}, got {v!r:.40})')
    out = case.get('outcome') or {}
    for key in NUMERIC_OUTCOME:
        v = out.get(key)
        if v is not None and not (_is_num(v) and v >= 0):
            raise CannotPredict(f'outcome.{key} (a number, got {v!r:.40})')
