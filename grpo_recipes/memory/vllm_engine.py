"""Which vLLM engine starts, and the start-up terms around it that the published cases showed missing
(tests/data/vllm_published_cases.jsonl). Pure: no torch, no vLLM import. Sizes in bytes.

Versions read (PyPI wheels): vLLM 0.9.0.1 (engine/arg_utils.py, model_executor/models/qwen2_vl.py,
model_executor/layers/rotary_embedding.py) and 0.6.4.post1 (worker/worker.py); the file is named at each term.

- ``uses_v0``: from 0.8 the V1 engine is the default, but ``EngineArgs._is_v1_supported_oracle`` (engine/arg_utils.py,
  0.9.0.1) falls back to V0 on a CUDA card of compute capability below 8.0 (V100, T4, RTX 20xx), for a
  ``kv_cache_dtype`` other than ``auto`` unless FlashAttention supports fp8 there (FA3, Hopper), and for a dtype other
  than float16/bfloat16.
- ``rope_cache_bytes``: ``RotaryEmbedding.__init__`` (model_executor/layers/rotary_embedding.py, 0.9.0.1) registers a
  ``cos_sin_cache`` buffer of max_position x rotary_dim values in the model dtype; ``get_rope`` shares one instance
  per shape, so a model holds one. It is allocated while the model loads (in vLLM's "Model loading took" figure) and
  is replicated on every TP rank.
- ``kv_accounting``: how the engine counts what else holds the GPU at start (V0 worker.py 0.6.3.post1 / 0.7.3 /
  0.8.5; V1 gpu_worker.py 0.8.5 / 0.9.0 / 0.9.1 / 0.10.1.1 / 0.11.0), the table above it.
- ``processor_bounds``: ``Qwen2VLProcessingInfo._get_image_processor_kwargs`` (qwen2_vl.py, 0.9.0.1) merges the
  engine's ``mm_processor_kwargs`` into the image processor, so a ``max_pixels``/``min_pixels`` there bounds the
  largest image the profiler builds (``get_image_size_with_most_features``).
"""

from __future__ import annotations

import json
import re

from ..versions import version_tuple
from .arch import DTYPE_ALIASES, Arch

# NVIDIA's compute-capability table (developer.nvidia.com/cuda-gpus): the card families the guard meets.
COMPUTE_CAPABILITY = (
    (r'V100', (7, 0)),
    (r'T4\b|TESLAT4', (7, 5)),
    (r'20[0-9]0|TITANRTX|QUADRORTX', (7, 5)),
    (r'H100|H800|H20|H200|GH200', (9, 0)),
    (r'4090|4080|4070|4060|L40|L4\b|L20|ADA', (8, 9)),
    (r'A100|A800|A30\b', (8, 0)),
    (r'30[5-9]0|A6000|A5000|A4000|A10|A40\b|A16|A2\b', (8, 6)),
)
# V1 became the default engine in 0.8.0; the fallback oracle above is read in 0.9.0.1. From 0.10 it is not modelled
# (V0 was being removed), so a case from 0.10 on is taken to run V1 whatever the card.
V1_DEFAULT_FROM = (0, 8, 0)
V0_FALLBACK_UNTIL = (0, 10, 0)


# How an engine sizes its KV cache against what else holds the GPU when it starts (a colocated trainer's weights,
# another process, the CUDA context), per engine and first version, as read in the PyPI wheels named:
# - 'own' (V0, every version): vllm/worker/worker.py ``determine_num_available_blocks`` counts only what this instance
#   added since the worker started (0.6.3.post1: free memory at init minus free memory after the profile; 0.7.3 and
#   0.8.5: ``memory_profiling`` from ``baseline_snapshot``): KV = total x util - that. Nothing checks the free memory
#   at start; the cache is allocated afterwards (``initialize_cache`` -> ``CacheEngine._allocate_kv_cache``), which
#   runs out of CUDA memory when other processes hold more than (1 - util) x total.
# - 'device' (V1 before 0.9.1): vllm/v1/worker/gpu_worker.py ``determine_available_memory`` (0.7.3, 0.8.5, 0.9.0):
#   KV = total x util - torch's allocated peak - (total - free - torch allocated), i.e. every byte of the device that
#   torch did not allocate in this process counts against the cache, other processes' included (vllm PR #14419's test:
#   another process at 70%, util 0.2 -> "No available memory for the cache blocks"). No check at start.
# - 'snapshot' (V1 from 0.9.1, vllm PR #19312): ``init_device`` raises when free memory < util x total ("Free memory on
#   device ... is less than desired GPU memory utilization"); KV = util x total - weights - the profile's peak
#   increase - the non-torch increase since the start snapshot (0.9.1, 0.10.1.1, 0.11.0).
KV_ACCOUNTING_SNAPSHOT_FROM = (0, 9, 1)


def tp_heads_refusal(heads, tp: int) -> str | None:
    """vLLM's error when a TP size does not divide the attention heads (vllm/config/model.py
    ``verify_with_parallel_config``), else None (also for heads not known or a TP below 1)."""
    if not isinstance(heads, int) or tp < 1 or heads % tp == 0:
        return None
    return f'Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp}).'


def max_len_refusal(asked: int | None, derived: int | None, why: str | None = None) -> str | None:
    """vLLM's error when max_model_len is over the model's (vllm/config/model.py ``_get_and_verify_max_len``, without
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``), else None; ``why`` words where the derived length comes from."""
    if not asked or not derived or asked <= derived:
        return None
    return f'User-specified max_model_len ({asked}) is greater than the derived max_model_len ({why or derived})'


# vLLM's default gpu_memory_utilization: 0.9 until 0.19.1, 0.92 from 0.20.0 (vllm/config/cache.py
# ``CacheConfig.gpu_memory_utilization``, which ``EngineArgs`` takes, and vllm/entrypoints/llm.py ``LLM.__init__``, read
# in the 0.19.1 and 0.20.0 sdists).
DEFAULT_UTIL_092_FROM = (0, 20, 0)


def default_gpu_memory_utilization(vllm_version: str | None) -> float:
    """vLLM's own default for ``--gpu-memory-utilization`` at a release; a version not known is taken to be older
    than 0.20 (0.9, the default of every release before it)."""
    v = version_tuple(vllm_version)
    return 0.92 if v is not None and v >= DEFAULT_UTIL_092_FROM else 0.9


# vLLM's ``dtype`` "auto" on a card below compute capability 8.0 (V100, T4, RTX 20xx): from 0.9.0 a bfloat16
# checkpoint falls back to float16 with a warning (vllm PR #17265; vllm/config.py ``_get_and_verify_dtype``, 0.9.0:
# "Falling back to ... for compatibility"); before it the engine took bfloat16 and the worker stopped
# (vllm/v1/worker/gpu_worker.py and vllm/worker/worker.py ``_check_if_gpu_supports_dtype``, 0.8.5). An explicit
# bfloat16 stops there in every release. A float32 checkpoint runs in a 16-bit dtype under "auto" in every release.
AUTO_DTYPE_FALLBACK_FROM = (0, 9, 0)
BF16_REFUSAL = (
    'Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {card} GPU has compute '
    'capability {cc}. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: '
    '--dtype=half.'
)


def vllm_dtype(
    dtype_arg: str | None, config_dtype: str | None, gpu_name: str | None, vllm_version: str | None
) -> tuple[str, str | None, str | None]:
    """(the dtype vLLM runs the model in, vLLM's error when its engine refuses that dtype on the card, a note when
    the outcome hangs on a vLLM version not known) for ``--dtype dtype_arg`` (None: vLLM's default "auto") on a
    checkpoint of ``config_dtype`` (None: float32, as vLLM reads a config without one), by
    ``AUTO_DTYPE_FALLBACK_FROM``. An unknown card is taken to support bfloat16; an unknown version to fall back."""

    def name(d: str | None) -> str:
        d = str(d or '').lower().replace('torch.', '')
        return DTYPE_ALIASES.get(d, d)

    arg = name(dtype_arg) or 'auto'
    ckpt = name(config_dtype) or 'float32'
    cc = compute_capability(gpu_name)
    no_bf16 = cc is not None and cc < (8, 0)
    refusal = BF16_REFUSAL.format(card=gpu_name, cc=f'{cc[0]}.{cc[1]}') if no_bf16 else None
    if arg != 'auto':
        return arg, (refusal if arg == 'bfloat16' else None), None
    dtype = 'float16' if ckpt == 'float32' else ckpt
    if dtype != 'bfloat16' or not no_bf16:
        return dtype, None, None
    v = version_tuple(vllm_version)
    if v is None:
        return (
            'float16',
            None,
            (
                f'vLLM 0.9.0 and later run this bfloat16 checkpoint in float16 on the {gpu_name} (compute capability '
                f'{cc[0]}.{cc[1]}); earlier releases stop at engine start ("Bfloat16 is only supported on GPUs with '
                f'compute capability of at least 8.0")'
            ),
        )
    if v >= AUTO_DTYPE_FALLBACK_FROM:
        return 'float16', None, None
    return 'bfloat16', refusal, None


# The least compute capability each quantization method's kernels need (``QuantizationConfig.get_min_capability`` in
# vllm/model_executor/layers/quantization/, read in the 0.9.0, 0.11.0, 0.13.0, 0.14.0 and 0.20.0 sdists); vLLM checks
# it when the engine is configured (vllm/config/vllm.py ``_get_quantization_config``, 0.20.0) and stops below it. The
# Marlin FP8, AWQ and GPTQ kernels run on Turing (7.5) from 0.14.0; before it they needed Ampere (8.0).
QUANT_MIN_CAPABILITY = {
    'awq': 75,
    'gptq': 60,
    'bitsandbytes': 70,
    'compressed-tensors': 70,
    'gguf': 60,
    'mxfp4': 80,
}
MARLIN_ON_TURING_FROM = (0, 14, 0)
MARLIN_METHODS = ('fp8', 'awq_marlin', 'gptq_marlin')


def quantization_refusal(method: str | None, gpu_name: str | None, vllm_version: str | None) -> str | None:
    """vLLM's error when the card is below the quantization method's least compute capability, else None (also for
    a card or method not known; an unknown release takes the newer, lower figure)."""
    cc = compute_capability(gpu_name)
    m = str(method or '').lower()
    if cc is None or not m:
        return None
    if m in MARLIN_METHODS:
        v = version_tuple(vllm_version)
        least = 80 if v is not None and v < MARLIN_ON_TURING_FROM else 75
    else:
        least = QUANT_MIN_CAPABILITY.get(m)
    have = cc[0] * 10 + cc[1]
    if least is None or have >= least:
        return None
    return (
        f'The quantization method {m} is not supported for the current GPU. Minimum capability: {least}. Current '
        f'capability: {have}.'
    )


def kv_accounting(vllm_version: str | None, v0: bool) -> str:
    """'own', 'device' or 'snapshot' (``KV_ACCOUNTING_SNAPSHOT_FROM`` above); an unknown version is today's V1."""
    if v0:
        return 'own'
    v = version_tuple(vllm_version)
    return 'device' if v is not None and v < KV_ACCOUNTING_SNAPSHOT_FROM else 'snapshot'


def compute_capability(gpu_name: str | None) -> tuple[int, int] | None:
    """(major, minor) of a card named loosely ("NVIDIA V100 32GB", "Tesla T4"), None when unknown."""
    if not gpu_name:
        return None
    key = re.sub(r'[\s_-]', '', str(gpu_name).upper()).replace('NVIDIA', '').replace('GEFORCE', '').replace('RTX', '')
    for pattern, cc in COMPUTE_CAPABILITY:
        if re.search(pattern, key):
            return cc
    return None


def uses_v0(
    vllm_version: str | None,
    gpu_name: str | None = None,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    use_v1_env: str | None = None,
) -> bool:
    """Whether this launch runs vLLM's V0 engine: every version before 0.8, and on 0.8-0.9 what
    ``_is_v1_supported_oracle`` sends back to V0 (compute capability < 8.0; an fp8 KV cache off Hopper; float32),
    or ``VLLM_USE_V1=0`` (vllm/envs.py, 0.9.0.1: ``bool(int(os.getenv("VLLM_USE_V1", "1")))``; an explicit 1 skips the
    fallback). An unknown version is V1 (today's engine)."""
    v = version_tuple(vllm_version)
    if v is None:
        return False
    if v < V1_DEFAULT_FROM:
        return True
    if v >= V0_FALLBACK_UNTIL:
        return False
    env = str(use_v1_env).strip() if use_v1_env is not None else ''
    if env.isdigit():
        return int(env) == 0
    cc = compute_capability(gpu_name)
    if cc is not None and cc[0] < 8:
        return True
    kv = str(kv_cache_dtype or 'auto').lower()
    if kv != 'auto' and not (kv.startswith('fp8') and cc is not None and cc[0] == 9):
        return True
    return str(dtype or '').lower() in ('float32', 'float', 'fp32')


def rope_cache_bytes(a: Arch) -> float:
    """The rotary embedding's cos/sin cache: max_position_embeddings x rotary_dim values in the model dtype
    (rotary_dim = head_dim x ``partial_rotary_factor``); one per rank."""
    return a.context_len * int(a.head_dim * a.rotary_fraction) * a.dtype_bytes


def processor_bounds(pp: dict, mm_processor_kwargs) -> dict:
    """The preprocessor facts with ``mm_processor_kwargs``' ``min_pixels``/``max_pixels`` applied (a dict or its JSON
    text; anything else leaves them as released)."""
    kw = mm_processor_kwargs
    if isinstance(kw, str):
        try:
            kw = json.loads(kw)
        except ValueError:
            kw = None
    if not isinstance(kw, dict):
        return pp
    out = dict(pp)
    for key in ('min_pixels', 'max_pixels'):
        v = kw.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            out[key] = v
    return out
