"""vLLM start-up terms read from vLLM's code, per card: what ``memory.vllm_terms`` and ``memory._vllm_checks`` add
for multimodal models, quantized loading, CUDA-graph capture and hybrid (linear-attention) models.

Versions read (the wheels from PyPI, file and line named at each term): vLLM 0.10.1.1 (V1, the version of the
published A100 log) and vLLM 0.23.0 (the version ms-swift 4.6 recommends). Where the two differ, the term says which
applies. Pure: no torch, no vLLM import. Sizes in bytes.

- Multimodal profiling (``mm_profile``): V1's ``GPUModelRunner.profile_run`` (v1/worker/gpu_model_runner.py) first
  runs the vision encoder on ``max_items_per_batch`` dummy items of the modality with the most tokens per item, keeps
  their outputs in the encoder cache while the dummy LLM forward and the sampler run, then frees them. The items and
  their size come from ``MultiModalBudget`` (v1/worker/utils.py) and ``compute_encoder_budget``
  (v1/core/encoder_cache_manager.py); the largest image is what the processor's ``max_pixels`` allows
  (model_executor/models/qwen2_vl.py ``Qwen2VLProcessingInfo``), bundled in vllm_mm_facts.json.
- Quantized loading (``vllm_weight_bytes``): ``--quantization bitsandbytes`` quantizes every ``LinearBase`` in flight
  to NF4 with double quantization and leaves embeddings, lm_head and norms in 16 bits
  (model_executor/layers/quantization/bitsandbytes.py ``get_quant_method``; model_loader/bitsandbytes_loader.py
  ``quantize_4bit(..., compress_statistics=True, quant_type="nf4")``); ``--quantization fp8`` stores linear weights
  in one byte (model_executor/layers/quantization/fp8.py, dynamic per-tensor scales).
- CUDA graphs (``capture_sizes``, ``cuda_graph_bytes``): the sizes vLLM captures and 0 with ``enforce_eager``.
- Hybrid models (``linear_state_bytes``): the Gated DeltaNet conv and recurrent state per sequence and layer
  (model_executor/layers/mamba/mamba_utils.py, v1/kv_cache_interface.py ``MambaSpec``).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

from ..versions import version_tuple
from .arch import TOWER_FAMILY, Arch, vision_params
from .vllm_engine import processor_bounds

FACTS_FILE = Path(__file__).with_name('vllm_mm_facts.json')
# vLLM V1 default per-modality limit when limit_mm_per_prompt leaves a modality out (vllm/config/__init__.py
# MultiModalConfig.get_limit_per_prompt: 999 under V1, 1 under V0; vLLM 0.10.1.1)
MM_LIMIT_DEFAULT_V1 = 999
# Qwen2-VL's dummy video has at most this many frames (model_executor/models/qwen2_vl.py _MAX_FRAMES_PER_VIDEO,
# vLLM 0.10.1.1)
MAX_FRAMES_PER_VIDEO = 16
# ... and 14 from vLLM 0.11 (qwen2_vl.py _MAX_FRAMES_PER_VIDEO in 0.11.0 and 0.23.0)
MAX_FRAMES_PER_VIDEO_NEW = 14
# Channels x temporal patch x patch^2 values per patch row in the processor's pixel_values (Qwen2VLImageProcessor:
# 3 x 2 x 14 x 14); the dummy batch reaches the GPU in fp32 and the encoder casts it to the model dtype
PIXEL_INPUT_BYTES = 4 + 2
# the float32 rows alone (the processor's output as the V0 runner moves it to the GPU)
PIXEL_FP32_BYTES = 4
# V1's profiling batch of encoder items: 0.8.4 and 0.9.0.1 (v1/worker/gpu_model_runner.py profile_run) take
# cdiv(encoder budget, tokens per item); 0.10.1.1 (v1/worker/utils.py MultiModalBudget.get_max_items) floors it and cuts
# items per prompt by max_model_len. 0.9.1-0.10.0 were not read: the newer form is assumed from 0.10.
ENCODER_ITEMS_FLOOR_FROM = (0, 10, 0)
# vLLM's own graph estimator (v1/worker/gpu_model_runner.py profile_cudagraph_memory, vLLM 0.23.0) measures one shared
# pool (the first, largest capture) plus a cost per further graph, at least 1 MiB each; the cost per graph is measured
# on the card, not derivable from the code, so the logged allowance (memory.VLLM_CUDA_GRAPHS) stays the figure.
MIN_PER_GRAPH = 2**20


@lru_cache(maxsize=1)
def mm_facts() -> dict:
    return json.loads(FACTS_FILE.read_text(encoding='utf-8'))


def vision_facts(model_type: str) -> dict | None:
    """The bundled processor and vision-tower facts for a Qwen2-VL / Qwen2.5-VL model type (or one with the same tower,
    ``arch.TOWER_FAMILY``: Qwen2.5-Omni, whose processor is Qwen2-VL's image processor too), else None."""
    mt = model_type.lower()
    return mm_facts().get(TOWER_FAMILY.get(mt, mt))


def tower_params(a: Arch) -> int:
    """The vision tower's parameters: from the config's vision_config (``Arch.vision``), else, for a Qwen2-VL /
    Qwen2.5-VL config saved without one, from the bundled vision_config with the LLM's width as its output."""
    if a.vision:
        return a.vision
    facts = vision_facts(a.model_type)
    if not facts:
        return 0
    return vision_params(a.model_type, {**facts['vision'], 'out_hidden_size': a.hidden}, a.hidden)


# ---- multimodal profiling ----


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's resize rule (transformers models/qwen2_vl/image_processing_qwen2_vl.py ``smart_resize``, which vLLM
    0.10.1.1 calls in ``Qwen2VLProcessingInfo._get_vision_info``): both sides to multiples of ``factor`` (patch x
    merge), the area scaled into [min_pixels, max_pixels] keeping the aspect ratio."""
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def max_image_grid(pp: dict) -> tuple[int, int]:
    """(grid_h, grid_w) in patches of the largest image: vLLM 0.10.1.1 resizes a 9999999 x 9999999 image
    (``get_image_size_with_most_features``); vLLM 0.23.0 factorizes max_pixels / patch^2 into a grid directly. For a
    square bound (12845056 = 3584^2) both give 256 x 256 patches."""
    patch, merge = pp['patch_size'], pp['merge_size']
    h, w = smart_resize(9999999, 9999999, patch * merge, pp['min_pixels'], pp['max_pixels'])
    return h // patch, w // patch


def tokens_for(pp: dict, frames: int) -> int:
    """LLM tokens of one item of ``frames`` frames at the largest size (``_get_vision_info``: frames padded to the
    temporal patch, patches / merge^2)."""
    gh, gw = max_image_grid(pp)
    t = pp['temporal_patch_size']
    grid_t = max((frames + frames % t) // t, 1)
    return grid_t * gh * gw // pp['merge_size'] ** 2


def max_tokens_per_item(
    pp: dict, max_model_len: int, limits: dict[str, int], vllm_version: str | None = None, v0: bool = False
) -> dict[str, int]:
    """Tokens of the largest item per modality, modalities at limit 0 left out.
    - V1 (multimodal/registry.py ``get_max_tokens_per_item_by_nonzero_modality``, 0.10.1.1 and 0.11.0) sizes each
      item with one of each enabled modality in the prompt (``{modality: 1 for ... if limit > 0}``), at
      ``max_model_len``. A video's frames (qwen2_vl.py ``get_num_frames_with_most_features``): up to 0.10 what the
      context leaves after one largest image, from 0 frames, at most 16 (``_MAX_FRAMES_PER_VIDEO``); from 0.11 the
      whole context, from 1 frame, at most 14 (0.11.0 and 0.23.0).
    - V0 (``v0``; vLLM 0.7.3 qwen2_vl.py) subtracts the images at their limit (1 by default) and caps at 16."""
    image_limit, video_limit = (
        limits.get('image', 1 if v0 else MM_LIMIT_DEFAULT_V1),
        limits.get('video', 1 if v0 else MM_LIMIT_DEFAULT_V1),
    )
    ver = version_tuple(vllm_version)
    new_rule = not v0 and (ver is None or ver >= (0, 11, 0))
    images = image_limit if v0 else min(image_limit, 1)  # V1 counts one of each enabled modality
    videos = video_limit if v0 else min(video_limit, 1)
    one_image = tokens_for(pp, 1)
    out = {}
    if image_limit:
        out['image'] = one_image
    if video_limit:
        room = max_model_len if new_rule else max_model_len - one_image * images
        frames = 1 if new_rule else 0
        while tokens_for(pp, frames + 1) <= room:
            frames += 1
        cap = MAX_FRAMES_PER_VIDEO_NEW if new_rule else MAX_FRAMES_PER_VIDEO
        out['video'] = tokens_for(pp, max(min(frames // max(videos, 1), cap), 1))
    return out


def encoder_peak_per_patch(
    model_type: str, vision: dict, tp: int, dtype_bytes: int, gather_qkv: bool = True, gather_list: bool = False
) -> float:
    """Live bytes per patch at the vision tower's peak (vLLM 0.10.1.1 model_executor/models/qwen2_5_vl.py
    ``Qwen2_5_VisionBlock.forward``; qwen2_vl.py ``Qwen2VisionBlock``): the pixel rows (fp32 and the cast copy)
    stay referenced by the caller, and inside a block the larger of
    - the MLP: block input x, attention output, the fused-add residual and the normed input (4e), the gate_up output
      (2i/tp, MergedColumnParallelLinear) and SiluAndMul's output (i/tp); Qwen2-VL's fc1/QuickGELU: 2e + 2m/tp;
    - attention: x and the normed input (2e), qkv (3e/tp), the contiguous q, k, v (3e/tp) and the rotated q, k
      (2e/tp); with ``gather_qkv`` (vLLM 0.10.1.1 and 0.11.0 ``split_qkv``; gone in 0.14.0, whose QKVParallelLinear
      keeps each rank's heads) qkv is also all-gathered to 3e when tp > 1;
    - with ``gather_list`` (where ``split_qkv`` gathers, V0 and V1 alike): the moment of the gather itself,
      ``all_gather_interleave``
      (qwen2_5_vl.py, 0.9.0.1 and 0.10.1.1) fills a list of tp zeros_like copies (3e) and then concatenates them
      into a new 3e tensor beside the block input, the normed input and the rank's own qkv: 2e + 3e/tp + 6e."""
    patch_row = vision.get('in_chans', 3) * vision['temporal_patch_size'] * vision['patch_size'] ** 2
    if model_type == 'qwen2_vl':
        e = vision['embed_dim']
        mlp = 2 * e + 2 * e * vision['mlp_ratio'] / tp
    else:
        e, i = vision['hidden_size'], vision['intermediate_size']
        mlp = 4 * e + 3 * i / tp
    attn = 2 * e + 8 * e / tp + (3 * e if tp > 1 and gather_qkv else 0)
    if tp > 1 and gather_qkv and gather_list:
        attn = max(attn, 2 * e + 3 * e / tp + 6 * e)
    return patch_row * PIXEL_INPUT_BYTES + max(mlp, attn) * dtype_bytes


def parse_limits(value) -> dict[str, int]:
    """``limit_mm_per_prompt`` as vLLM takes it: a dict or its JSON text ({} when unset or unreadable)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:  # vLLM's older CLI form, image=1,video=0
            pairs = [p.split('=', 1) for p in value.split(',') if '=' in p]
            value = {k.strip(): int(v) for k, v in pairs if v.strip().isdigit()}
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


def mm_profile(
    a: Arch,
    tp: int,
    batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    limits: dict,
    chunked_prefill: bool = True,
    model_type: str | None = None,
    vllm_version: str | None = None,
    processor_kwargs=None,
) -> dict | None:
    """The multimodal part of V1's profiling run, or None for a text-only model (or every modality at limit 0):
    ``encoder_peak`` (the tower on the dummy batch), ``cached`` (its outputs, held in the encoder cache through the
    dummy forward and sampler), ``items``, ``tokens_per_item``, ``modality``."""
    mt = (model_type or a.model_type).lower()
    facts = vision_facts(mt) if tower_params(a) else None
    if not facts:
        return None
    pp, vision = processor_bounds(facts['preprocessor'], processor_kwargs), facts['vision']
    per_item = max_tokens_per_item(pp, max_model_len, limits, vllm_version)
    if not per_item:
        return None  # every modality disabled: no encoder cache and no encoder profiling (encoder_cache_manager.py)
    modality, tokens = max(per_item.items(), key=lambda kv: kv[1])
    # compute_encoder_budget: both budgets default to max_num_batched_tokens (vllm/config/scheduler.py), at least one
    # item; MultiModalBudget.get_max_items
    budget = max(batched_tokens, tokens)
    limit = limits.get(modality, MM_LIMIT_DEFAULT_V1)
    ver = version_tuple(vllm_version)
    if ver is not None and ver < ENCODER_ITEMS_FLOOR_FROM:
        # v1/worker/gpu_model_runner.py profile_run (vLLM 0.8.4, 0.9.0.1): cdiv(encoder_budget, tokens per item) items,
        # at most max_num_reqs x the modality's limit (no per-prompt cut by max_model_len, no chunked-prefill term)
        items = max(1, min(-(-budget // tokens), max_num_seqs * limit))
    else:
        per_prompt = max(1, min(limit, max_model_len // tokens))
        reqs = max_num_seqs if chunked_prefill else min(max_num_seqs, batched_tokens // tokens)
        items = max(1, min(budget // tokens, reqs * per_prompt))
    patches = items * tokens * pp['merge_size'] ** 2
    gather = ver is not None and ver < (0, 14, 0)
    # split_qkv's all_gather_interleave (qwen2_5_vl.py 0.10.1.1, 0.11.0) holds the gathered list and its concatenation
    peak = patches * encoder_peak_per_patch(mt, vision, tp, a.dtype_bytes, gather, gather_list=gather)
    cached = items * tokens * a.hidden * a.dtype_bytes
    return {'encoder_peak': peak, 'cached': cached, 'items': items, 'tokens_per_item': tokens, 'modality': modality}


def mm_profile_v0(
    a: Arch,
    tp: int,
    batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    limits: dict,
    model_type: str | None = None,
    processor_kwargs=None,
) -> dict | None:
    """The V0 engine's multimodal profiling (vLLM 0.7.3 worker/model_runner.py ``_dummy_run``): every dummy sequence
    carries each modality at its limit (1 by default under V0), so the sequences are cut to
    max(1, min(max_num_seqs, max_num_batched_tokens // max_mm_tokens)) with max_mm_tokens the sum over modalities of
    limit x tokens per item (multimodal/registry.py ``get_max_multimodal_tokens``); the sampler then runs on that many
    rows (``rows``). The encoder runs per modality over all sequences (qwen2_5_vl.py ``_process_image_input`` /
    ``_process_video_input``), the first pass's outputs held while the second runs."""
    mt = (model_type or a.model_type).lower()
    facts = vision_facts(mt) if tower_params(a) else None
    if not facts:
        return None
    pp, vision = processor_bounds(facts['preprocessor'], processor_kwargs), facts['vision']
    v0_limits = {'image': limits.get('image', 1), 'video': limits.get('video', 1)}
    per_item = max_tokens_per_item(pp, max_model_len, v0_limits, v0=True)
    max_mm = sum(v0_limits[m] * t for m, t in per_item.items())
    if not max_mm:
        return None
    rows = max(1, min(max_num_seqs, batched_tokens // max_mm))
    seq_len = batched_tokens // rows
    passes = {m: rows * v0_limits[m] * t for m, t in max_tokens_per_item(pp, seq_len, v0_limits, v0=True).items()}
    per_patch = encoder_peak_per_patch(mt, vision, tp, a.dtype_bytes, gather_list=True)
    merged = pp['merge_size'] ** 2
    biggest = max(passes.values())
    held = pixels_held_v0(vision, passes, merged)
    # the other modalities' fp32 pixel rows are on the GPU through the encoder pass too (pixels_held_v0)
    peak = (
        biggest * merged * per_patch
        + (sum(passes.values()) - biggest) * a.hidden * a.dtype_bytes
        + held
        - biggest * merged * patch_row_values(vision) * PIXEL_FP32_BYTES
    )
    # the dummy prompt is never cut to seq_len (multimodal/profiling.py get_decoder_dummy_data, 0.8.4/0.9.0.1: V0 only
    # warns when the placeholders exceed it), so each row's LLM forward runs over all its placeholder tokens
    llm_tokens = rows * max(seq_len, sum(passes.values()) // rows)
    return {
        'encoder_peak': peak,
        # no encoder output outlives the encoder passes: qwen2_5_vl.py get_input_embeddings_v0 (vLLM 0.8.4) merges
        # image_embeds / video_embeds into inputs_embeds and they are freed on its return, before the language model
        # runs; what stays beside the LLM pass is the pixel rows (pixels_held)
        'cached': 0.0,
        'items': rows,
        'tokens_per_item': max(per_item.values()),
        'modality': max(passes, key=passes.get),
        'rows': rows,
        'llm_tokens': llm_tokens,
        'pixels_held': held,
    }


def patch_row_values(vision: dict) -> int:
    """Values per patch row of the processor's pixel_values: channels x temporal patch x patch^2 (1176 for
    Qwen2-VL / Qwen2.5-VL)."""
    return vision.get('in_chans', 3) * vision['temporal_patch_size'] * vision['patch_size'] ** 2


def pixels_held_v0(vision: dict, passes: dict[str, int], merged: int) -> float:
    """Bytes of the dummy batch's pixel rows that the V0 engine keeps on the GPU through the whole profiling forward,
    LLM included: ``ModelRunner.execute_model`` (vLLM 0.7.3 and 0.8.4 worker/model_runner.py) moves every modality's
    tensors to the device with ``MultiModalKwargs.as_kwargs(multi_modal_kwargs, device=self.device)`` and passes them
    as the model's ``**kwargs``; Qwen2.5-VL's V0 path (model_executor/models/qwen2_5_vl.py ``forward`` ->
    ``get_input_embeddings_v0``) encodes them and then runs the language model inside the same call, so the
    kwargs (``pixel_values`` and ``pixel_values_videos``, float32 from the HF processor) stay referenced until it
    returns. ``passes``: LLM tokens per modality; each token is ``merged`` patches."""
    return sum(passes.values()) * merged * patch_row_values(vision) * PIXEL_FP32_BYTES


def profile_with_encoder(text_peak: float, dummy_forward_tokens: int, a: Arch, mm: dict | None) -> float:
    """The profiling run's peak: the encoder pass, or the text peak (dummy forward / sampler) with the cached encoder
    outputs beside it; for a multimodal model the dummy forward also takes ``inputs_embeds`` of max_num_tokens x hidden
    (gpu_model_runner.py ``_dummy_run``, ``self.inputs_embeds``)."""
    if not mm:
        return text_peak
    embeds = dummy_forward_tokens * a.hidden * a.dtype_bytes
    # V0 only: the pixel rows ride in the forward's kwargs beside the LLM pass (pixels_held_v0); V1 runs the encoder
    # in profile_run before _dummy_run and keeps only its outputs (gpu_model_runner.py, 0.8.4)
    return max(mm['encoder_peak'], text_peak + mm['cached'] + embeds + mm.get('pixels_held', 0.0))


# ---- quantized loading ----


def linear_weight_shapes(a: Arch) -> list[tuple[int, int, int]]:
    """(d_in, d_out, count) of every quantizable linear in a dense decoder (q, k, v, o, gate, up, down)."""
    h, q, kv, i = a.hidden, a.q_dim, a.kv_dim, a.intermediate
    return [(h, q, a.layers), (h, kv, 2 * a.layers), (q, h, a.layers), (h, i, 2 * a.layers), (i, h, a.layers)]


def bnb_linear_bytes(a: Arch, bits: int) -> float:
    """Bytes of the linear weights as vLLM's bitsandbytes loader holds them.
    - 4 bits: two NF4 codes per uint8, an 8-bit absmax per block of 64 with an fp32 absmax per 256 of those
      (``compress_statistics=True``; bitsandbytes/functional.py quantize_4bit, blocksize 64): 4 + 8/64 + 32/(64 x 256)
      bits per weight.
    - 8 bits (pre-quantized checkpoints only; vLLM has no in-flight 8-bit): int8 weights and one fp32 ``SCB`` per
      output row (bitsandbytes_loader.py ``_quantized_8bit_generator``)."""
    if bits == 8 and not a.experts and not a.linear_layers:
        return sum(n * (d_in * d_out + 4 * d_out) for d_in, d_out, n in linear_weight_shapes(a))
    per_weight = (4 + 8 / 64 + 32 / (64 * 256)) / 8 if bits == 4 else 1 + 4 / a.hidden
    return a.linear_params() * per_weight


def vllm_quantization(cfg, a: Arch, engine: dict) -> str | None:
    """vLLM's ``quantization`` for this launch: ``engine['quantization']`` (a vLLM command line's --quantization, or
    ms-swift's rollout ``--vllm_quantization``), else what ms-swift's colocated engine sets itself: 'bitsandbytes' for a
    bnb 4-bit model and nothing for bnb 8-bit (swift/rlhf_trainers/rollout_mixin.py, ms-swift 4.6)."""
    q = engine.get('quantization') or getattr(cfg, 'vllm_quantization', None)
    if q:
        return str(q).lower()
    if cfg.quant_method == 'bnb' and cfg.quant_bits == 4:
        return 'bitsandbytes'
    return None


MXFP4_BLOCK = 32  # one uint8 E8M0 scale per 32 FP4 values (model_executor/layers/quantization/mxfp4.py)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def mxfp4_expert_bytes(a: Arch, tp: int) -> float:
    """Bytes of an MXFP4 checkpoint's experts as vLLM holds them (all ranks together): per expert, the fused gate/up
    (2 x I x h) and the down projection (h x I) as packed FP4 pairs (uint8, half a byte per value), a uint8 scale
    per 32 values and bf16 biases (2I + h), at the Marlin backend's padded sizes (Mxfp4MoEMethod.create_weights,
    vLLM 0.17.1: I per TP rank rounded up to 128, h to 256). Marlin is the MXFP4 backend below compute capability 9.0
    (get_mxfp4_backend: Triton kernels need SM90+) and the one vLLM 0.10.1 logged on an H100; later releases may pick
    Triton or FlashInfer there, with less padding (gpt-oss-120b: 65.97 GiB logged under 0.10.1, 64.38 under 0.14.1,
    on one H100), so this is the larger figure."""
    ip = _round_up(-(-a.moe_intermediate // tp), 128)
    hp = _round_up(a.hidden, 256)
    per_rank = 2 * ip * hp + hp * ip
    per_expert = per_rank / 2 + per_rank / MXFP4_BLOCK + 2 * (2 * ip + hp)
    return a.layers * a.experts * per_expert * tp


def _group_elements(weights: dict, in_features: int) -> int:
    """Weights sharing one scale under a compressed-tensors ``QuantizationArgs.strategy``: ``group``/``tensor_group``
    its ``group_size``, ``block`` its ``block_structure``, ``channel`` a whole input row, ``tensor`` the layer (counted
    as a row: one scale either way is noise)."""
    strategy = str(weights.get('strategy') or 'tensor').lower()
    if strategy in ('group', 'tensor_group') and int(weights.get('group_size') or 0) > 0:
        return int(weights['group_size'])
    if strategy == 'block' and weights.get('block_structure'):
        b = weights['block_structure']
        return int(b[0]) * int(b[1])
    return in_features


# llm-compressor's preset schemes (compressed_tensors/quantization/quant_scheme.py PRESET_SCHEMES, compressed-tensors
# 0.20.0): the weights' QuantizationArgs each name stands for. A quantization_config that names its preset (``scheme``,
# as a model card or a summary of a config does) instead of listing its config_groups is planned as that preset;
# tests/test_quantized_checkpoints.py holds this table to the installed package.
PRESET_WEIGHTS = {
    **{
        f'W{b}A{a}': {'num_bits': b, 'type': 'int', 'strategy': 'group', 'group_size': 128}
        for b in (2, 3, 4, 5, 6, 7, 8)
        for a in (4, 8, 16)
        if b <= a
    },
    'W4A16_ASYM': {'num_bits': 4, 'type': 'int', 'strategy': 'group', 'group_size': 128, 'symmetric': False},
    'W4AFP8': {'num_bits': 4, 'type': 'int', 'strategy': 'group', 'group_size': 128},
    'W8A8': {'num_bits': 8, 'type': 'int', 'strategy': 'channel'},
    'INT8': {'num_bits': 8, 'type': 'int', 'strategy': 'channel'},
    'FP8': {'num_bits': 8, 'type': 'float', 'strategy': 'tensor'},
    'FP8_DYNAMIC': {'num_bits': 8, 'type': 'float', 'strategy': 'channel'},
    'FP8_BLOCK': {'num_bits': 8, 'type': 'float', 'strategy': 'block', 'block_structure': [128, 128]},
    'NVFP4A16': {'num_bits': 4, 'type': 'float', 'strategy': 'tensor_group', 'group_size': 16},
    'NVFP4': {'num_bits': 4, 'type': 'float', 'strategy': 'tensor_group', 'group_size': 16},
    'MXFP4A16': {'num_bits': 4, 'type': 'float', 'strategy': 'group', 'group_size': 32},
    'MXFP4': {'num_bits': 4, 'type': 'float', 'strategy': 'group', 'group_size': 32},
}


def _preset_groups(quant: dict) -> dict:
    """config_groups for a quantization_config that names an llm-compressor preset (``scheme: 'W4A16'``, also
    ``'W4A16 (...)'``) instead of listing them; {} when it names none."""
    m = re.match(r'\s*([A-Za-z0-9_]+)', str(quant.get('scheme') or ''))
    weights = PRESET_WEIGHTS.get(m.group(1).upper()) if m else None
    return {'preset': {'targets': ['Linear'], 'weights': weights}} if weights else {}


def compressed_tensors_bytes_per_weight(quant: dict, in_features: int) -> float | None:
    """Bytes per linear weight of a compressed-tensors checkpoint (``quantization_config.quant_method
    'compressed-tensors'``, llm-compressor's format) as vLLM creates its parameters (vLLM 0.17.1
    model_executor/layers/quantization/compressed_tensors/schemes/): the group that targets ``Linear`` (else the first
    group) decides, lm_head and other ``ignore`` entries stay 16-bit (counted with the embeddings).

    - integer weights below 8 bits (``CompressedTensorsWNA16``, W4A16/W8A16 ``pack-quantized``): packed int32, a
      ``params_dtype`` (16-bit) scale per group, and an int32-packed zero point per group unless ``symmetric``;
    - 8-bit weights (``W8A8Fp8``, ``W8A8Int8``, ``W8A16Fp8``): one byte, an fp32 scale per channel, block or tensor;
    - 4-bit floats (``W4A4Nvfp4``/``W4A16Nvfp4``: uint8 pairs and an fp8 scale per 16; ``W4A16Mxfp4``: a uint8 scale
      per 32).

    A config without ``config_groups`` that names a preset (``scheme``) is planned as that preset
    (``PRESET_WEIGHTS``). None when no group states ``num_bits`` (then the caller plans 16 bits)."""
    groups = [
        g
        for g in (quant.get('config_groups') or _preset_groups(quant)).values()
        if isinstance(g, dict) and g.get('weights')
    ]
    if not groups:
        return None
    group = next((g for g in groups if 'Linear' in (g.get('targets') or [])), groups[0])
    w = group['weights']
    bits = int(w.get('num_bits') or 16)
    per_scale = _group_elements(w, in_features)
    if bits >= 16:
        return None
    if str(w.get('type') or 'int').lower() == 'float' and bits == 4:
        return bits / 8 + 1 / per_scale  # fp8 (NVFP4) or E8M0 (MXFP4) scales
    if bits == 8:
        return 1.0 + 4 / per_scale
    zero_point = 0.0 if w.get('symmetric', True) else bits / 8
    return bits / 8 + (2 + zero_point) / per_scale


# ModelOpt checkpoints (quant_method 'modelopt', quant_algo in vLLM 0.17.1 modelopt.py QUANT_ALGOS): FP8 weights in one
# byte with per-tensor/channel/block fp32 scales; NVFP4 as packed uint8 pairs with an fp8 scale per 16 (ModelOptNvFp4
# create_weights, group_size 16); MXFP8 one byte with an E8M0 scale per 32.
MODELOPT_BYTES_PER_WEIGHT = {
    'FP8': 1.0,
    'FP8_PER_CHANNEL_PER_TOKEN': 1.0,
    'FP8_PB_WO': 1.0,
    'MXFP8': 1 + 1 / 32,
    'NVFP4': 0.5 + 1 / 16,
}


def packed_bytes_per_weight(a: Arch) -> float | None:
    """Bytes per linear weight vLLM holds for a checkpoint format it loads packed and transformers does not keep packed
    for training (compressed-tensors, ModelOpt); None for any other checkpoint."""
    method = a.quant_method()
    if method == 'compressed-tensors':
        return compressed_tensors_bytes_per_weight(a.quant, a.hidden)
    if method == 'modelopt':
        algo = str(a.quant.get('quant_algo') or (a.quant.get('quantization') or {}).get('quant_algo') or '').upper()
        return MODELOPT_BYTES_PER_WEIGHT.get(algo)
    return None


def routed_expert_bytes(a: Arch, total: float) -> float:
    """Bytes of a MoE's routed experts among ``total``, the ``vllm_weight_bytes`` of all ranks together: MXFP4 experts
    as vLLM packs them, else the routed experts' share of the linear weights at the bytes per weight the checkpoint
    loads with (the 16-bit embeddings, norms and routers left out); 0 for a dense model."""
    if not a.experts:
        return 0.0
    if a.quant_method() == 'mxfp4':
        return mxfp4_expert_bytes(a, 1)
    routed = a.layers * a.experts * 3 * a.hidden * a.moe_intermediate
    small = (a.small_params() + a.embedding_params() + a.hidden) * 2
    return routed * max(0.0, total - small) / max(1, a.linear_params())


def per_rank_weight_bytes(cfg, a: Arch, engine: dict) -> float:
    """Bytes of the weights one vLLM rank holds: everything split by TP, except, with expert parallelism on
    (``vllm_enable_expert_parallel``), the routed experts, spread over TP x DP ranks."""
    tp = max(1, cfg.vllm_tensor_parallel_size)
    total = vllm_weight_bytes(cfg, a, engine)
    ep = tp * max(1, cfg.vllm_data_parallel_size) if cfg.vllm_enable_expert_parallel and a.experts else tp
    if ep == tp:
        return total / tp
    experts = routed_expert_bytes(a, total)
    return (total - experts) / tp + experts / ep


def vllm_weight_bytes(cfg, a: Arch, engine: dict) -> float:
    """Bytes of the weights vLLM loads (all ranks together)."""
    q = vllm_quantization(cfg, a, engine)
    method = a.quant_method()
    missing = tower_params(a) - a.vision  # a VL config saved without its vision_config
    small = a.small_params() + a.embedding_params() + a.hidden + a.vision + missing
    if method == 'mxfp4' and a.experts:
        # gpt-oss: only the experts are MXFP4; attention, router, embeddings and lm_head stay bf16
        # (quantization_config.modules_to_not_convert)
        tp = max(1, cfg.vllm_tensor_parallel_size)
        return mxfp4_expert_bytes(a, tp) + (a.linear_params() - a.layers * a.mlp_linear_params() + small) * 2
    if q == 'bitsandbytes' or method == 'bitsandbytes':
        bits = 8 if (a.bnb_bits() == 8 or a.quant.get('bits') == 8) else 4
        lin, kept = a.linear_params(), a.skipped_linear_params('vllm')  # llm_int8_skip_modules stay 16-bit
        return bnb_linear_bytes(a, bits) * (lin - kept) / max(1, lin) + (kept + small) * 2
    if q == 'fp8' and method is None:
        return a.linear_params() * 1.0 + small * 2
    if method in ('gptq', 'awq', 'fp8'):
        return a.weight_bytes() + missing * 2
    packed = packed_bytes_per_weight(a)
    if packed is not None:
        return a.linear_params() * packed + small * 2
    # unquantized (and ms-swift's bnb 8-bit colocate, which vLLM loads at 16 bits)
    return a.weight_bytes(dtype_bytes=a.dtype_bytes) + missing * a.dtype_bytes


# ---- CUDA graphs ----


def capture_sizes(vllm_version: str | None, max_num_seqs: int, batched_tokens: int, enforce_eager: bool) -> list[int]:
    """Batch sizes vLLM V1 captures by default; [] with enforce_eager.
    - 0.8.x: see below (max_num_seqs does not bound them);
    - 0.9 to 0.10.x (vllm/config/__init__.py ``_set_cudagraph_sizes``, 0.10.1.1): [1, 2, 4] + range(8, n + 1, 8) with
      n = min(2 x max_num_seqs, 512) (SchedulerConfig cuda_graph_sizes), sizes above max_num_batched_tokens dropped;
    - from 0.11 (vllm/config/vllm.py ``_set_cudagraph_sizes``, 0.23.0): [1, 2, 4] + range(8, 256, 8) +
      range(256, n + 1, 16), n = min(2 x max_num_seqs, 512, max_num_batched_tokens), plus max_num_batched_tokens
      when it is within n."""
    if enforce_eager:
        return []
    v = version_tuple(vllm_version)
    if v is not None and v < (0, 9, 0):
        # 0.8.x V1 (vllm/config.py VllmConfig._set_cudagraph_sizes, 0.8.4): [1, 2, 4] + range(8, 513, 8) whatever
        # max_num_seqs, only the sizes above max_num_batched_tokens dropped (67 sizes from 512 batched tokens up)
        return [s for s in [1, 2, 4] + list(range(8, 513, 8)) if s <= batched_tokens]
    n = min(2 * max(1, max_num_seqs), 512)
    if v is not None and v < (0, 11, 0):
        sizes = [1, 2, 4] + list(range(8, n + 1, 8))
        return [s for s in sizes if s <= batched_tokens]
    n = min(n, batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= n]
    if n >= 8:
        sizes += list(range(8, min(n + 1, 256), 8))
    if n >= 256:
        sizes += list(range(256, n + 1, 16))
    if batched_tokens <= n:
        sizes.append(batched_tokens)
    return sorted(set(sizes))


def cuda_graph_bytes(sizes: list[int], allowance: float) -> float:
    """Graph memory: 0 when nothing is captured (enforce_eager, or no size within max_num_batched_tokens), else the
    logged allowance, and never less than vLLM's own floor of 1 MiB per graph (profile_cudagraph_memory, 0.23.0).
    The allowance is not scaled by the number of sizes: the logs behind it do not state their capture lists, and the
    per-graph cost vLLM measures is not in its code."""
    if not sizes:
        return 0.0
    return max(allowance, len(sizes) * MIN_PER_GRAPH)


# ---- hybrid models ----


def linear_state_bytes(a: Arch, tp: int, dtype_bytes: int) -> float:
    """Per-sequence state of all linear-attention layers on one TP rank (0 for other models). vLLM 0.23.0
    model_executor/layers/mamba/mamba_utils.py ``gated_delta_net_state_shape``: a conv state of
    (2 x key heads x key dim + value heads x value dim) / tp channels x (conv kernel - 1), and a recurrent state of
    value heads / tp x value dim x key dim, both in the model dtype when mamba_cache_dtype / mamba_ssm_cache_dtype are
    'auto' (``_mamba_state_dtype``). ``MambaSpec.max_memory_usage_bytes`` charges one page per layer per request
    (mamba_cache_mode 'none', the default; v1/kv_cache_interface.py)."""
    if not a.linear_layers or not a.linear_attention:
        return 0.0
    kh, kd, vh, vd, kernel = a.linear_attention
    conv = (2 * kh * kd + vh * vd) / tp * (kernel - 1)
    recurrent = vh / tp * vd * kd
    return a.linear_layers * (conv + recurrent) * dtype_bytes


def bytes_per_token(kv_per_token: float, a: Arch, tp: int, max_model_len: int) -> float:
    """KV bytes per token as V1 reports capacity: for a hybrid model each request also holds its linear-attention
    state, so "GPU KV cache size: N tokens" is max_concurrency x max_model_len with max_concurrency = blocks / blocks
    per request (v1/core/kv_cache_utils.py ``get_max_concurrency_for_kv_cache_config`` and ``_report_kv_cache_config``,
    vLLM 0.23.0): the state spreads over max_model_len tokens. Other models: ``kv_per_token``."""
    state = linear_state_bytes(a, tp, a.dtype_bytes)
    return kv_per_token + (state / max_model_len if state and max_model_len else 0.0)


def one_sequence_message(
    vllm_version: str | None, max_model_len: int, need_gib: float, avail_gib: float, estimate: int
) -> str:
    """V1's refusal when one max_model_len request does not fit (v1/core/kv_cache_utils.py
    ``check_enough_kv_cache_memory``), worded as the version words it: 0.10.1.1 says "models's", 0.23.0 "model's"
    and names the CPU backend."""
    v = version_tuple(vllm_version)
    est = f'Based on the available memory, the estimated maximum model length is {estimate}. ' if estimate > 0 else ''
    if v is not None and v < (0, 11, 0):
        return (
            f"To serve at least one request with the models's max seq len ({max_model_len}), ({need_gib:.2f} GiB "
            f'KV cache is needed, which is larger than the available KV cache memory ({avail_gib:.2f} GiB). '
            f'{est} Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the '
            f'engine. [vLLM {vllm_version}]'
        )
    return (
        f"To serve at least one request with the model's max seq len ({max_model_len}), ({need_gib:.2f} GiB KV "
        f'cache is needed, which is larger than the available KV cache memory ({avail_gib:.2f} GiB). {est}'
        f'Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or '
        f'decreasing `max_model_len` when initializing the engine. [vLLM {vllm_version or ">= 0.11"}]'
    )
