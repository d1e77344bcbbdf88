"""Per-GPU memory model for a GRPO launch: trainer + vLLM, phase by phase.

Pure: (GRPOConfig, Plan, Arch, GPU capacity) -> list[GPUMemory]. All sizes in bytes internally,
GiB (2**30) in the output. Each constant below cites where it comes from (peers-and-memory.md is
../shared/reference/peers-and-memory.md); none is fitted to a particular case.

Phases on a colocated GPU (ms-swift 4.6 ``grpo_trainer``/``rollout_mixin``):
- ``startup``: vLLM starts after the trainer loaded its weights; vLLM requires
  free memory >= gpu_memory_utilization x total (vLLM ``init_device``), else start-up fails.
- ``rollout``: vLLM awake (weights + activations + KV = util x total) beside the trainer's resident
  state, minus what ``offload_model``/``offload_optimizer`` moved to CPU.
- ``sync``: weights handed to vLLM; under ZeRO-3 (or LoRA merge on ZeRO-3) the gathered 16-bit
  weights exist at once, split by ``move_model_batches``.
- ``train``: the trainer at peak (activations, logits, gradients, optimizer) beside what vLLM keeps
  per sleep level (0: everything; 1/2: CUDA graphs and its non-torch state).
Server mode plans the rollout GPUs on their own; without vLLM, HF generate's KV cache is added.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from .arch import Arch
from .config import GRPOConfig
from .plan import Plan
from .rules import version_tuple

GiB = 2 ** 30

# CUDA context + kernels per process. HF "model memory anatomy": 1.3 GB on a V100 after the first
# CUDA op; gpu_poor assumes 650 MB; we take 1.0 GiB (peers-and-memory.md §E.8).
CUDA_CONTEXT = 1.0 * GiB
# NCCL buffers per communicator group a process joins: ~0.5 GiB (peers-and-memory.md §E.9: 4 MiB x
# channels x peers FIFOs; a 512 MiB NET buffer seen for one rank; 1.6 GB for a busy communicator).
NCCL_PER_GROUP = 0.5 * GiB
# vLLM's "non-torch" memory (CUDA/cuBLAS workspaces, and with TP > 1 the NCCL and custom
# all-reduce buffers). Logged by vLLM per worker on H100 for six models (llm-d-benchmark,
# config_explorer/empirical-vllm-memory-results.md): 0.13-0.14 GiB at TP 1, 0.54-0.55 GiB at TP 2.
VLLM_NON_TORCH_TP1 = 0.14 * GiB
VLLM_NON_TORCH_TP = 0.55 * GiB
# The sampler step of vLLM's profiling run holds, for R dummy requests over the full vocabulary V
# (logits are gathered across TP ranks before sampling), this many R x V fp32-sized buffers at its peak.
# Counted from the code, not fitted:
# - native (vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p; the dummy batch sets top-k and
#   top-p, so the whole vocabulary is sorted): the bf16 logits the runner holds (0.5), their fp32 copy
#   (1), the sort's values (1) and int64 indices (2), and inside torch's segmented sort
#   (aten/src/ATen/native/cuda/Sort.cu segmented_sort_pairs) an int64 index input (2) plus cub's
#   alternate key and value buffers (1 + 2): 9.5.
# - flashinfer (flashinfer.sampling.top_k_top_p_sampling_from_logits): bf16 logits (0.5), fp32 logits
#   (1), the top-k masked copy (1) and its softmax (1): 3.5.
# Check: llm-d's H100 logs (R = 1024) give 9.57-9.64 x R x V x 4 bytes once the dummy forward's hidden
# states are taken off, for Qwen3-0.6B, Qwen3-32B, Llama-3.1-8B, Llama-3.3-70B and gpt-oss-20b.
SAMPLER_BUFFERS = {'native': 9.5, 'flashinfer': 3.5}
# CUDA-graph pools, kept even when vLLM sleeps (verl note, §D.3); enforce_eager removes them.
# Public vLLM logs show "Graph capturing finished ... took 0.3-1.0 GiB" and, from the profiler, "Estimated CUDA
# graph memory: 0.36 GiB total" (vLLM 0.27.1, gpustack/runner PR #251); we take 0.5 GiB.
VLLM_CUDA_GRAPHS = 0.5 * GiB
# From this vLLM on, the memory profiler captures graphs against a dummy KV cache and takes their memory out of
# the KV budget (vllm PR #30515, off by default when merged; the log says "CUDA graph memory profiling is enabled
# (default since v0.21.0)"; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 turns it off). Before it, graphs are
# captured after the KV cache is allocated and come on top of gpu_memory_utilization.
VLLM_GRAPHS_PROFILED_FROM = (0, 21, 0)
# Allocator fragmentation on the dynamic terms (activations, logits): Megatron's x1.05 (§E.10).
FRAGMENTATION = 1.05
# KV cache block size (vLLM default 16 tokens); a sequence needs ceil(len/16) blocks.
KV_BLOCK = 16
# bitsandbytes' 8-bit AdamW: two uint8 moments and two fp32 absmax per block of 256 values, per parameter
# (bitsandbytes/optim/optimizer.py Optimizer2State.init_state, block_wise)
EIGHT_BIT_MOMENTS = 2 + 8 / 256
# ZeRO-3 steps the optimizer one sub-group of at most this many fp32 elements at a time (ms-swift's
# swift/config/zero3.json and zero3_offload.json: "sub_group_size": 1e9; deepspeed stage3.py _optimizer_step).
ZERO3_SUB_GROUP = 10 ** 9


def _vllm_large_card(capacity_gib: float, gpu_name: str | None) -> bool:
    """vLLM V1 picks its larger defaults on >= 70 GiB cards other than the A100
    (vllm/engine/arg_utils.py ``_set_default_args``)."""
    return capacity_gib >= 70 and 'A100' not in (gpu_name or '').upper()


def vllm_default_batched_tokens(capacity_gib: float, gpu_name: str | None, offline: bool = True) -> int:
    """vLLM V1 default max_num_batched_tokens (vllm/engine/arg_utils.py ``_set_default_args``):
    LLM class 16384 / API server 8192 on >= 70 GiB non-A100 cards, else 8192 / 2048."""
    big = _vllm_large_card(capacity_gib, gpu_name)
    if offline:
        return 16384 if big else 8192
    return 8192 if big else 2048


@dataclass
class GPUMemory:
    gpu: str
    """GPU id (or ``train`` / ``rollout`` when ids are unknown)."""
    role: str
    """``train+vllm`` (colocate), ``train``, ``rollout`` (server), ``train+hf-generate``."""
    capacity_gib: float
    components: dict = field(default_factory=dict)
    """Every term in GiB, named; the phase totals are built from these."""
    phases: dict = field(default_factory=dict)
    """Total GiB per phase."""
    phase: str = ''
    """The phase that peaks."""
    total_gib: float = 0.0
    peak_fraction: float = 0.0
    fits: bool = True
    headroom_pct: float = 0.0
    vllm: dict = field(default_factory=dict)
    """vLLM accounting: requested, weights, activation, kv_gib, kv_tokens, checks."""
    problems: list = field(default_factory=list)
    """Failed checks, each a dict: check, message."""
    phase_terms: dict = field(default_factory=dict)
    """The terms of the peak phase, largest first (GiB)."""

    def to_dict(self) -> dict:
        return asdict(self)


def _g(x: float) -> float:
    return round(x / GiB, 2)


@dataclass
class Inputs:
    """What the memory model needs beyond the config: the model and the card."""
    arch: Arch
    capacity_gib: float
    gpu_name: str | None = None
    prompt_len: int | None = None
    """Tokens per prompt to plan for (default: max_length, capped by the context)."""
    sft: bool = False
    """Plain supervised training (calibration): one train phase, loss over every token."""
    vllm_entry: str = 'offline'
    """vLLM defaults of the entry point: ``offline`` (LLM class, what ms-swift uses) or ``server``."""
    vllm_sampler: str = 'native'
    """Top-k/top-p sampler of vLLM's profiling run, ``native`` or ``flashinfer`` (see resolve_sampler)."""
    vllm_sampler_why: str = ''
    """Why that sampler was assumed (shown with the vLLM accounting)."""
    vllm_version: str | None = None
    """The vLLM that runs the rollouts, when known (installed, or a calibration case's): before 0.8 the V0
    engine's scheduler defaults apply (see ``vllm_terms``)."""
    vllm_graphs_env: str | None = None
    """``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` as the launch sets it (see ``graphs_profiled``)."""
    adamw: str = 'fused'
    """How the trainer's AdamW steps: ``fused`` (one kernel, no temporaries), ``foreach`` (holds a copy of the
    second moments during the step), ``8bit`` (bitsandbytes: 1-byte moments) or ``other`` (counted as AdamW); see
    ``resolve_adamw``."""
    adamw_why: str = ''
    weight_sync: str = 'batched'
    """How ZeRO-3 weights reach vLLM: ``batched`` (ms-swift: the model gathered in ``move_model_batches`` groups, all
    at once when unset) or ``per_param`` (TRL: trl/generation/vllm_generation.py ``sync_weights`` gathers one
    parameter at a time without PEFT; with PEFT it gathers the whole model to merge the adapters)."""
    """Why that AdamW was assumed (shown with the assumptions)."""


# transformers' names for bitsandbytes' 8-bit AdamW (training_args.py OptimizerNames; trainer.py maps them to
# bnb.optim.AdamW with optim_bits 8, paged for the paged_ one)
EIGHT_BIT_ADAMW = ('adamw_bnb_8bit', 'adamw_8bit', 'paged_adamw_8bit')


def resolve_adamw(optim: str | None, torch_version: str | None,
                  transformers_version: str | None) -> tuple[str, str]:
    """(``fused`` | ``foreach`` | ``8bit`` | ``other``, why) for the trainer's optimizer.

    - ``--optim adamw_torch_fused`` is fused; ``--optim adamw_torch`` is torch's AdamW with neither flag, which runs
      the foreach implementation on CUDA (torch/optim/optimizer.py ``_default_to_fused_or_foreach``; fused was
      never the default, pytorch PR #95415).
    - Unset, transformers picks: ``adamw_torch_fused`` from transformers 4.54 when torch >= 2.8
      (transformers/training_args.py ``default_optim``, PR #37358), else ``adamw_torch``.
    - Versions unknown: fused, the stack ms-swift 4.x recommends (torch 2.8+), and said so.
    Other optimizers keep the AdamW state accounting and are named as such."""
    if optim in EIGHT_BIT_ADAMW:
        return '8bit', f'--optim {optim}: bitsandbytes\' 8-bit AdamW (moments at 1 byte each)'
    if optim and optim not in ('adamw_torch', 'adamw_torch_fused'):
        return 'other', f'--optim {optim}: its state is counted as AdamW\'s'
    if optim == 'adamw_torch_fused':
        return 'fused', '--optim adamw_torch_fused'
    if optim == 'adamw_torch':
        return 'foreach', '--optim adamw_torch: torch\'s AdamW runs its foreach implementation on CUDA'
    tv, hv = version_tuple(torch_version), version_tuple(transformers_version)
    if tv is not None and tv < (2, 8):
        return 'foreach', (f'torch {torch_version} < 2.8: transformers\' default optim is adamw_torch, whose '
                           f'foreach step holds a copy of the second moments')
    if hv is not None and hv < (4, 54):
        return 'foreach', (f'transformers {transformers_version} < 4.54 defaults to adamw_torch, whose foreach step '
                           f'holds a copy of the second moments')
    if tv is not None and hv is not None:
        return 'fused', f'torch {torch_version} and transformers {transformers_version}: adamw_torch_fused'
    return 'fused', ('torch/transformers versions not known: transformers\' default on torch >= 2.8 '
                     '(adamw_torch_fused) assumed; on older torch, foreach AdamW needs a copy of the second moments '
                     'more at the optimizer step')


def trainer_terms(cfg: GRPOConfig, plan: Plan, inp: Inputs, fragmentation: float = FRAGMENTATION) -> dict[str, float]:
    """Per-rank training memory terms in bytes (``fragmentation``: the allowance on the dynamic terms; 1.0 gives
    the allocated bytes `grpo-guard trace` counts)."""
    a = inp.arch
    N = max(1, plan.world_size)
    P = a.param_count()
    stage = cfg.zero_stage if cfg.deepspeed else None
    ds = cfg.deepspeed or ''
    offload_opt = 'offload' in ds
    offload_param = ds.startswith('zero3_offload')
    bnb_bits = cfg.quant_bits if cfg.quant_method == 'bnb' else None
    base_bytes = a.weight_bytes(bnb_bits=bnb_bits)
    t: dict[str, float] = {}

    # bytes per parameter of the policy as loaded: torch_dtype, else the checkpoint's dtype
    pb = 4 if (cfg.torch_dtype or a.dtype).endswith('float32') else 2
    if pb == 4 and not (a.quant_method() or bnb_bits):
        base_bytes = a.weight_bytes(dtype_bytes=4)
    if cfg.is_lora:
        T = a.lora_params(cfg.lora_rank, cfg.target_modules)
        # frozen base; ZeRO-3 partitions it (and offloads it with zero3_offload)
        t['weights'] = 0.0 if offload_param else (base_bytes / N if stage == 3 else base_bytes)
    else:
        T = P - (a.vision if cfg.freeze_vit else 0)  # a frozen vision tower has no gradients or optimizer state
        t['weights'] = 0.0 if offload_param else (pb * P / N if stage == 3 else pb * P)

    # gradients + optimizer (AdamW). Without DeepSpeed ms-swift trains bf16 params with bf16 grads
    # and AdamW states in the param dtype (2 + 4 B). With DeepSpeed, its own estimators
    # (deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs and stage3.py
    # estimate_zero3_model_states_mem_needs, peers-and-memory.md §D.2):
    #   ZeRO-2: 2P (16-bit params) + 18P/N ("2_grads_16bit + 4_grads_32bit + 4_params_32bit +
    #           8_optimizer_states_32bit"); optimizer offload: 2P.
    #   ZeRO-3: 18P/N + 4L (L = largest layer, gathered fp16 params + grads); optimizer offload: 2P/N + 4L;
    #           param + optimizer offload: 4L.
    #   ZeRO-1 has no estimator: 16-bit grads unpartitioned (2P) + 16P/N.
    # FSDP2 (ms-swift fsdp2.json, full_shard): accelerate upcasts the parameters to fp32 for mixed
    # precision (accelerate/utils/fsdp_utils.py fsdp2_prepare_model), so 4 (param) + 4 (grad) + 8 (AdamW)
    # bytes sharded over N, plus the gathered largest layer as under ZeRO-3; shard_grad_op keeps the
    # fp32 params whole.
    fsdp = cfg.fsdp_sharding if not cfg.deepspeed else None
    # AdamW's two moments per trainable parameter: fp32 (8 B) where the optimizer steps fp32 values (adapters,
    # DeepSpeed's/FSDP's master copies); bitsandbytes' 8-bit AdamW keeps each as uint8 plus an fp32 absmax per
    # block of 256 (bitsandbytes/optim/optimizer.py Optimizer2State.init_state): 2 + 8/256 B
    moments = EIGHT_BIT_MOMENTS if inp.adamw == '8bit' else 8
    if cfg.is_lora:
        # LoRA adapters are kept in fp32 by PEFT: 4 (param) + 4 (grad) + the moments (AdamW: 8)
        t['lora_params'] = 4 * T / (N if stage == 3 or fsdp == 'full_shard' else 1)
        states = (4 + moments) * T
        t['grads+optimizer'] = 0.0 if offload_opt else (states / N if stage in (1, 2, 3) or fsdp else states)
        if fsdp == 'full_shard':
            t['weights'] = base_bytes / N
    elif fsdp is not None:
        t['weights'] = 4 * P / N if fsdp == 'full_shard' else 4 * P
        t['grads+optimizer'] = (4 + moments) * T / N
    elif stage is None:
        # grads + AdamW m, v in the parameter dtype (or 8-bit)
        t['grads+optimizer'] = pb * T + (EIGHT_BIT_MOMENTS if inp.adamw == '8bit' else 2 * pb) * T
    elif stage == 3:
        t['grads+optimizer'] = 0.0 if offload_opt else (8 + moments) * T / N
    else:
        grads16 = 2 * T / N if stage >= 2 else 2 * T
        fp32_states = (8 + moments) * T / N
        if offload_opt:
            grads16, fp32_states = 0.0, 0.0
        t['grads+optimizer'] = grads16 + fp32_states
    if stage == 3 or fsdp == 'full_shard':
        # gathered 16-bit params + grads of the largest module (DS estimate: 4 x largest layer)
        t['zero3_live_params'] = 4 * a.largest_layer_params()

    # reference model: full training with beta != 0 (LoRA disables the adapter instead)
    if not cfg.is_lora and cfg.beta != 0:
        t['ref_model'] = 0.0 if offload_param else (pb * P / N if stage == 3 or fsdp == 'full_shard' else pb * P)

    # activations: per micro-batch of bs sequences of prompt + completion tokens (padded)
    bs = cfg.per_device_train_batch_size
    prompt = inp.prompt_len or 0
    # Ulysses sequence parallelism splits each sequence's tokens over its group (swift/sequence_parallel)
    sp = max(1, cfg.sequence_parallel_size)
    C = math.ceil(cfg.max_completion_length / sp)
    tokens = bs * math.ceil((prompt + cfg.max_completion_length) / sp)
    h, L, I = a.hidden, a.layers, a.token_mlp_width
    # One decoder layer's saved tensors per token, 16-bit weights, as `grpo-guard trace` counts them on the
    # real model class (grpo_recipes/trace.py, transformers 5.19 modeling_qwen2.py/modeling_qwen3.py):
    #   RMSNorm x2 (Qwen2RMSNorm: fp32 upcast 4h, the 16-bit normalised copy 2h, the output 2h): 16h;
    #   attention with q = heads x head_dim (not h: Qwen3-0.6B has q = 2h) and kv = kv_heads x head_dim: the
    #   rotated q and k (2q, 2kv), v (2kv) and SDPA's output (2q; the o_proj input is a view of it), fp32
    #   logsumexp; GQA runs in SDPA itself (enable_gqa, integrations/sdpa_attention.py use_gqa_in_sdpa: no mask,
    #   the unpadded micro-batch), so K/V are never repeated to the query heads: 4q + 4kv;
    #   Qwen3's per-head q_norm/k_norm (the same RMSNorm over head_dim, its output consumed by the rotary
    #   embedding, which saves only cos/sin): fp32 upcast + normalised copy, 6q + 6kv;
    #   SwiGLU MLP (gate, silu(gate), up, their product): 8I.  -> 16h + 4q + 4kv (+ 6q + 6kv) + 8I
    #   (Qwen2.5-1.5B 103,350 B traced vs 103,424 here; Qwen3-0.6B 71,823 vs 71,680)
    kv, q = a.kv_dim, a.q_dim
    per_layer_token = 16 * h + 4 * q + 4 * kv + 8 * I + (6 * q + 6 * kv if a.qk_norm else 0)
    if cfg.is_lora:
        # frozen linears keep no input and frozen norms no normalised copy (-(8h + 2I): both norms' copies, their
        # outputs, the down projection's input; with qk_norm -(2q + 2kv)); each adapted linear keeps its input
        # cast to the adapters' fp32 (peft/tuners/lora/layer.py Linear.forward, _cast_input_dtype), or with
        # lora_dropout > 0 the dropout's fp32 output and its bool mask (CUDA native_dropout), plus lora_A's fp32
        # output (4r)
        sum_in, n_mod = a.lora_inputs(cfg.target_modules)
        per_layer_token += -(8 * h + 2 * I) - (2 * q + 2 * kv if a.qk_norm else 0) + \
            (5 if cfg.lora_dropout > 0 else 4) * sum_in + 4 * cfg.lora_rank * n_mod
    if cfg.use_liger_kernel:
        # transformers applies Liger's kernels with their defaults (rope, rms_norm, swiglu, fused linear loss;
        # liger_kernel/transformers/monkey_patch.py): each RMSNorm keeps its 16-bit input and a per-row fp32 rstd
        # instead of the fp32 upcast and the normalised copy (liger ops/rms_norm.py save_for_backward(X, W, RSTD):
        # -4h per norm), and SwiGLU keeps gate and up only, recomputing silu in backward (ops/swiglu.py: -2I).
        # Not traced (Triton kernels have no CPU/fake implementation); read from Liger's code.
        per_layer_token -= 8 * h + 2 * I
    checkpointed = bool(cfg.gradient_checkpointing or cfg.fsdp_sharding)  # fsdp2.json turns it on
    if checkpointed:
        # layer inputs (2h bytes/token/layer) + one layer recomputed during backward. Its peak is the end of the
        # recompute (torch/utils/checkpoint.py, non-reentrant: the layer's forward re-run inside backward), at the
        # MLP's down projection: beside every tensor the layer saves, what the running forward still references
        # (the residual, transformers Qwen2DecoderLayer.forward; the down projection's 16-bit output) and the
        # gradient backward holds for the layer's output (the residual branch's 16-bit gradient, the next layer's
        # RMSNorm input gradient in fp32 and cast back to 16 bits): 2h + 2h + 2h + 4h + 2h = 12h. Under LoRA the
        # frozen MLP's input (2h) and the down projection's input (2I) are held only by the running forward, and
        # with lora_dropout the input's fp32 cast too (4I: the dropout keeps its output, not its input;
        # peft/tuners/lora/layer.py Linear.forward). Traced: Qwen2.5-7B LoRA 1 x 9,216 to 1 x 32,768 tokens.
        transient = 12 * h
        down_keeps = 2 * I  # what the down projection saved of its input: a trained linear keeps it
        if cfg.is_lora:
            targets = cfg.target_modules or ['all-linear']
            down = any(t in ('all-linear', 'all') or t.endswith('down_proj') for t in targets)
            transient += 2 * h + 2 * I + (4 * I if down and cfg.lora_dropout > 0 else 0)
            down_keeps = (5 if cfg.lora_dropout > 0 else 4) * I if down else 0
        # Later, in the MLP's backward (the product silu(gate) x up): the 16-bit gradients of the product, of
        # silu(gate) and of up (3 x 2I) and of the layer's output (2h) are live, the down projection's saved input
        # freed. In full training this moment is the larger (traced: Qwen2.5-1.5B full, 1 x 32,768 tokens).
        in_mlp_backward = 6 * I + 2 * h - down_keeps
        recompute = tokens * (per_layer_token + max(transient, in_mlp_backward))
        # the first layer's MLP backward, with its checkpointed input (the embedding's output): see the no-ZeRO rule
        first_layer = tokens * (per_layer_token + in_mlp_backward + 2 * h)
        if not cfg.is_lora and (a.tied or (stage is None and fsdp is None)):
            # the lm_head's gradient exists by then (vocab x h): a tied one waits in autograd's input buffer of the
            # shared weight until the embedding's backward adds to it (the late term below), an untied one is
            # already in .grad, which the no-ZeRO rule below takes as absent while activations are live
            recompute += a.vocab * h * pb
        act = tokens * 2 * h * L + recompute
    else:
        act = tokens * per_layer_token * L
        first_layer = 0.0
    t['activations'] = act * fragmentation
    # logits over completion tokens (ms-swift computes log-probs for completion positions only,
    # logits_to_keep, swift grpo_trainer _get_logps_via_local_forward): the mixed-precision wrapper's fp32 copy
    # (accelerate convert_outputs_to_fp32), divided by the temperature in place, is kept by TRL's
    # selective_log_softmax (its fp32 path: gather - per-row logsumexp, which saves its input). Its backward
    # frees that copy but builds four full-size fp32 buffers of its own (the gradients of the two branches, their
    # sum, and the slice's and the in-place division's backward): 16 B per element at the traced peak (backward,
    # aten.div; all four are temporaries in `grpo-guard trace`'s split; Qwen2.5-7B at micro-batch 1, 8 and 16
    # alike).
    V = a.vocab
    if cfg.use_liger_kernel:
        # Liger's fused linear + loss never holds the full logits: chunks of ceil(n / ceil(V / h)) tokens
        n = bs * C
        chunk = max(1, math.ceil(n / math.ceil(V / h)))
        t['logits'] = chunk * V * 4 * 2
    elif inp.sft:
        # ms-swift's default SFT loss (swift/template/base.py compute_sft_loss -> transformers ForCausalLMLoss:
        # fp32 upcast, cross_entropy = log_softmax + nll_loss) peaks in log_softmax's backward: its saved fp32
        # output, the fp32 gradient nll_loss hands it and the fp32 gradient it returns, 12 B per element
        # (`grpo-guard trace` in SFT mode, trace_step(sft=True): Qwen2.5-7B LoRA 1 x 2048, peak at
        # aten._log_softmax_backward_data)
        t['logits'] = bs * C * V * 12 * fragmentation
    elif cfg.deepspeed:
        # Under DeepSpeed accelerate does not wrap the forward (accelerate 1.15 accelerator.py: native_amp stays False
        # for DistributedType.DEEPSPEED, so prepare_model adds no autocast and no convert_outputs_to_fp32; checked on
        # CPU with accelerate and DeepSpeed themselves, tests/test_trace_long.py), and neither ms-swift
        # (_get_logps_via_local_forward) nor TRL casts: the 16-bit logits take selective_log_softmax's row-wise
        # log_softmax path. Traced (trace_step(upcast_logits=False)): the same four full-size buffers at the peak
        # (backward, aten.div), 16-bit: 8 B per element (Qwen2.5-7B LoRA at 8 x 1,024 and 1 x 8,192 completions)
        t['logits'] = bs * C * V * 8 * fragmentation
    else:
        t['logits'] = bs * C * V * 16 * fragmentation
    # Terms that never coexist (traced, grpo_recipes/trace.py). In full training
    # without ZeRO/FSDP the 16-bit gradients (pb x P, inside grads+optimizer) appear layer by layer as backward
    # frees that layer's saved tensors (Qwen2.5-7B full: the peak is in the embedding's backward, every gradient
    # present, the activations gone).
    # with checkpointing the logits' backward runs before any layer is recomputed and frees its buffers first
    overlap = min(recompute * fragmentation, t['logits']) if checkpointed and not cfg.use_liger_kernel else 0.0
    dynamic = t['activations'] + t['logits'] - overlap
    if not cfg.is_lora and stage is None and fsdp is None:
        overlap += min(pb * T, dynamic)
        dynamic -= min(pb * T, dynamic)
        # ...but with checkpointing the first layer's backward is a later peak: every gradient is there except that
        # layer's and the (untied) embedding's, beside the layer's live tensors (traced: Llama-3.1-8B full,
        # 1 x 17,408 tokens, peak in layer 0's MLP backward with 13.7 of 15.0 GiB of gradients)
        emb = 0 if a.tied else a.vocab * h
        at_first = pb * (T - a.attention_linear_params() - a.mlp_linear_params() - emb) + first_layer * fragmentation
        beyond = max(0.0, at_first - (pb * T + dynamic))
        overlap -= beyond
        dynamic += beyond
    # Transients after the activations and logits are freed; the largest of them and what is left of the dynamic
    # terms counts (they happen at different times).
    late: dict[str, float] = {}
    if inp.adamw == 'foreach' and not offload_opt:
        # foreach AdamW: torch._foreach_sqrt(exp_avg_sqs) makes a full copy of the second moments, live until the
        # parameters are updated (torch/optim/adam.py _multi_tensor_adam; traced: trace_step(adamw='foreach')).
        # DeepSpeed steps its fp32 flat partitions through the same torch optimizer (ZeRO-3: one sub-group at a
        # time), FSDP2 its fp32 shards; without them the moments are in the parameter dtype.
        sharded = stage in (1, 2, 3) or fsdp is not None
        elems = T / N if sharded else T
        if stage == 3:
            elems = min(elems, ZERO3_SUB_GROUP)
        late['adamw_foreach_temp'] = elems * (4 if (cfg.is_lora or sharded) else pb)
    if not cfg.is_lora and a.tied:
        # a tied, trained embedding gets two gradients, lm_head's and the embedding's (embedding_dense_backward);
        # autograd sums them out of place before accumulating, so two more vocab x hidden gradients are live at
        # the end of backward (traced: Qwen3-4B full, peak at aten.add in backward)
        late['tied_embedding_grad_temp'] = 2 * a.vocab * a.hidden * pb
    if late:
        t.update(late)
        overlap += dynamic + sum(late.values()) - max(dynamic, *late.values())
    if overlap:
        t['overlap'] = -overlap
    t['cuda_context'] = CUDA_CONTEXT
    groups = 1 if N > 1 else 0
    if cfg.use_vllm and cfg.vllm_mode == 'colocate' and cfg.vllm_tensor_parallel_size > 1:
        groups += 1
    if cfg.use_vllm and cfg.vllm_mode == 'server':
        groups += 1  # weight-sync communicator with the rollout server
    t['nccl'] = groups * NCCL_PER_GROUP
    # weight sync to vLLM: ZeRO-3 gathers 16-bit weights, split by move_model_batches
    if cfg.use_vllm and stage == 3:
        gathered = 2 * P if not cfg.is_lora else base_bytes
        parts = max(1, cfg.move_model_batches or 1)
        t['zero3_sync_gather'] = gathered / parts + (2 * a.vocab * a.hidden if parts > 1 else 0)
        if inp.weight_sync == 'per_param' and not cfg.is_lora:
            t['zero3_sync_gather'] = pb * a.vocab * a.hidden  # one parameter at a time: the largest, the embedding
    return t


def resolve_sampler(env_value: str | None, vllm_version: str | None,
                    flashinfer_installed: bool | None) -> tuple[str, str]:
    """Which top-k/top-p sampler vLLM's profiling run uses: ``native`` (sorts the vocabulary) or
    ``flashinfer``, and why. Unknown means ``native``, the larger reservation, so predicted KV is a floor.

    - ``VLLM_USE_FLASHINFER_SAMPLER`` decides when set (vllm/envs.py).
    - Without FlashInfer installed, vLLM samples natively.
    - With it installed, V1 used it by default until 0.11.1 (vllm PR #11394; PR #26859 turned the default
      off in October 2025). A later PR (#40376) turned it back on, in a release we cannot date, so for
      0.11.1 and newer we keep the native figure unless the variable says otherwise.
    - Whether it is installed, when not known: ``pip install vllm`` did not bring FlashInfer before
      0.11.1 (an optional extra, vllm PR #21959; a default dependency from PR #26443), so native again.
    """
    if env_value is not None and env_value.strip() != '':
        on = env_value.strip().lower() in ('1', 'true', 'yes', 'on')
        return ('flashinfer' if on else 'native'), f'VLLM_USE_FLASHINFER_SAMPLER={env_value}'
    if flashinfer_installed is False:
        return 'native', 'FlashInfer is not installed'
    parts = version_tuple(vllm_version)
    if parts and parts >= (0, 11, 1):
        return 'native', (f'vLLM {vllm_version}: FlashInfer sampling is off by default from 0.11.1 until a later '
                          'release turned it back on; assumed native, the larger reservation '
                          '(set VLLM_USE_FLASHINFER_SAMPLER to state it)')
    if parts and parts < (0, 8, 0):
        return 'native', f'vLLM {vllm_version}: the V0 engine sorts natively'
    if parts and flashinfer_installed:
        return 'flashinfer', f'vLLM {vllm_version} with FlashInfer installed samples with FlashInfer'
    if parts:
        return 'native', f'vLLM {vllm_version}: a pip install has no FlashInfer, so the native sampler'
    return 'native', 'vLLM version not known; assumed native, the larger profiling reservation'


def graphs_profiled(vllm_version: str | None, env_value: str | None) -> bool:
    """Whether vLLM's memory profiler counts CUDA graphs inside ``gpu_memory_utilization`` (then the KV cache is
    smaller by them and nothing comes on top): the variable decides when set, else the version
    (``VLLM_GRAPHS_PROFILED_FROM``); an unknown version means on top, the larger footprint."""
    if env_value is not None and env_value.strip() != '':
        return env_value.strip().lower() in ('1', 'true', 'yes', 'on')
    v = version_tuple(vllm_version)
    return v is not None and v >= VLLM_GRAPHS_PROFILED_FROM


def _positive_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def vllm_engine_options(cfg: GRPOConfig) -> dict:
    """The JSON object in ``vllm_engine_kwargs`` ({} when unset or not an object)."""
    if not cfg.vllm_engine_kwargs:
        return {}
    try:
        value = json.loads(cfg.vllm_engine_kwargs)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def vllm_kv_bytes_per_token(cfg: GRPOConfig, a: Arch) -> float:
    """KV cache bytes per token on one TP rank: the model dtype (vLLM ``kv_cache_dtype`` "auto"), or one
    byte for an fp8 cache."""
    kv_dtype = str(vllm_engine_options(cfg).get('kv_cache_dtype') or 'auto')
    return a.kv_bytes_per_token(1 if kv_dtype.startswith('fp8') else a.dtype_bytes) / \
        max(1, cfg.vllm_tensor_parallel_size)


def vllm_profile_peak(a: Arch, tp: int, tokens: int, seqs: int, sampler: str = 'native') -> float:
    """Peak torch memory of vLLM's profiling run (vllm/v1/worker/gpu_model_runner.py ``profile_run``),
    bytes: the dummy forward over ``tokens`` tokens, or, after it, its hidden states plus the sampler on
    ``min(seqs, tokens)`` rows of full-vocabulary logits, whichever is larger."""
    act_bytes = a.dtype_bytes
    inter = a.token_mlp_width
    # forward: residual + normed hidden (2h) beside the MLP's gate_up (2I) and activation output (I), per rank
    forward = tokens * act_bytes * (2 * a.hidden + 3 * inter / tp)
    rows = min(seqs, tokens)
    sampler_peak = tokens * a.hidden * act_bytes + SAMPLER_BUFFERS[sampler] * rows * a.vocab * 4
    return max(forward, sampler_peak)


def vllm_terms(cfg: GRPOConfig, inp: Inputs) -> dict[str, float]:
    """One vLLM engine shard on one GPU (bytes)."""
    a = inp.arch
    tp = max(1, cfg.vllm_tensor_parallel_size)
    cap = inp.capacity_gib * GiB
    requested = cfg.vllm_gpu_memory_utilization * cap
    bnb_bits = cfg.quant_bits if cfg.quant_method == 'bnb' else None
    weights = a.weight_bytes(bnb_bits=bnb_bits) / tp
    offline = inp.vllm_entry == 'offline'
    opts = vllm_engine_options(cfg)
    tb = _positive_int(opts.get('max_num_batched_tokens'))
    v = version_tuple(inp.vllm_version)
    v0 = v is not None and v < (0, 8, 0)  # V1 became the default engine in vLLM 0.8.0
    max_len = _max_model_len(cfg, a)
    if not tb and v0 and max_len <= 32768:
        # V0 without chunked prefill (its default up to a 32K context; longer contexts turn chunked prefill
        # on, vllm/engine/arg_utils.py): SchedulerConfig max_num_batched_tokens = max(max_model_len, 2048)
        # (vllm/config.py), and the profiling run fills that many tokens
        tb = max(max_len, 2048)
    if not tb:
        tb = vllm_default_batched_tokens(inp.capacity_gib, inp.gpu_name, offline=offline)
    seqs = cfg.vllm_max_num_seqs or _positive_int(opts.get('max_num_seqs'))
    if not seqs and v0:
        seqs = 256  # V0 EngineArgs max_num_seqs default
    if not seqs and cfg.vllm_mode == 'colocate' and offline:
        # ms-swift colocate: per_device_train_batch_size x TP x steps_per_generation (rollout_mixin)
        spg = cfg.steps_per_generation or cfg.gradient_accumulation_steps or 1
        seqs = cfg.per_device_train_batch_size * tp * spg
    elif not seqs:
        seqs = 1024 if _vllm_large_card(inp.capacity_gib, inp.gpu_name) else 256  # vLLM V1 default max_num_seqs
    act = vllm_profile_peak(a, tp, tb, seqs, inp.vllm_sampler)
    non_torch = VLLM_NON_TORCH_TP if tp > 1 else VLLM_NON_TORCH_TP1
    graphs = 0.0 if cfg.vllm_enforce_eager else VLLM_CUDA_GRAPHS
    # V1 sizes the KV cache from what the profile left: requested - weights - peak activation - non-torch; CUDA
    # graphs are captured afterwards and come on top, unless the profiler estimates them (graphs_profiled): then
    # they come out of the KV budget and stay inside the reservation
    inside = bool(graphs) and graphs_profiled(inp.vllm_version, inp.vllm_graphs_env)
    kv = requested - weights - act - non_torch - (graphs if inside else 0.0)
    return {'requested': requested, 'weights': weights, 'activation': act, 'non_torch': non_torch,
            'cuda_graphs': graphs, 'kv_cache': kv, 'graphs_outside': 0.0 if inside else graphs}


def _max_model_len(cfg: GRPOConfig, a: Arch) -> int:
    return cfg.vllm_max_model_len or a.context_len


def estimate(cfg: GRPOConfig, plan: Plan, inp: Inputs) -> list[GPUMemory]:
    a = inp.arch
    cap = inp.capacity_gib
    ctx_len = a.context_len
    if inp.prompt_len is None:
        inp.prompt_len = min(cfg.max_length or ctx_len, ctx_len)
    tr = trainer_terms(cfg, plan, inp)
    out: list[GPUMemory] = []
    train_ids = [str(p['gpu']) if p['gpu'] is not None else f'rank{p["local_rank"]}' for p in plan.processes]

    resident_keys = ['weights', 'lora_params', 'grads+optimizer', 'ref_model', 'cuda_context', 'nccl']
    dynamic_keys = ['activations', 'logits', 'adamw_foreach_temp', 'tied_embedding_grad_temp', 'overlap',
                    'zero3_live_params']

    def resident(offload_model=False, offload_optimizer=False) -> dict[str, float]:
        out = {}
        for k in resident_keys:
            if offload_model and k in ('weights', 'ref_model', 'lora_params'):
                continue
            if offload_optimizer and k == 'grads+optimizer':
                continue
            if tr.get(k):
                out[k] = tr[k]
        return out

    colocate = cfg.use_vllm and cfg.vllm_mode == 'colocate'
    server = cfg.use_vllm and cfg.vllm_mode == 'server'
    components = {k: _g(v) for k, v in tr.items() if v}
    parts: dict[str, dict[str, float]] = {}
    problems: list[dict] = []
    vinfo: dict = {}

    train_parts = {**resident(), **{k: tr[k] for k in dynamic_keys if tr.get(k)}}
    if inp.sft:
        parts['train'] = train_parts
    elif colocate:
        v = vllm_terms(cfg, inp)
        components.update({f'vllm_{k}': _g(x) for k, x in v.items() if k not in ('requested', 'graphs_outside')})
        components['vllm_reserved'] = _g(v['requested'])
        sleep = cfg.effective_sleep_level
        off = resident(cfg.offload_model, cfg.offload_optimizer)
        # start-up: the trainer holds its weights (no optimizer state yet) when vLLM initialises
        at_start = {k: tr[k] for k in ('weights', 'lora_params', 'ref_model', 'cuda_context', 'nccl') if tr.get(k)}
        parts['startup'] = {**at_start, 'vllm_reserved': v['requested']}
        # awake, the graphs sit inside the reservation when the profiler counted them (graphs_outside = 0)
        parts['rollout'] = {**off, 'vllm_reserved': v['requested'], 'vllm_cuda_graphs': v['graphs_outside']}
        # awake (sleep 0) vLLM holds its whole reservation (the profile's activation blocks stay cached
        # in this process); after sleep, ms-swift wakes only the weights for the sync
        sync_vllm = {'vllm_reserved': v['requested'], 'vllm_cuda_graphs': v['graphs_outside']} if sleep == 0 else \
            {'vllm_weights': v['weights'], 'vllm_cuda_graphs': v['cuda_graphs'], 'vllm_non_torch': v['non_torch']}
        parts['sync'] = {**off, **({'zero3_sync_gather': tr['zero3_sync_gather']} if tr.get('zero3_sync_gather')
                                   else {}), **sync_vllm}
        residue = {'vllm_reserved': v['requested'], 'vllm_cuda_graphs': v['graphs_outside']} if sleep == 0 else \
            {'vllm_cuda_graphs': v['cuda_graphs'], 'vllm_non_torch': v['non_torch']}
        parts['train'] = {**train_parts, **residue}
        vinfo = _vllm_checks(cfg, plan, inp, v, cap * GiB - sum(at_start.values()), problems)
    elif server:
        parts['train'] = train_parts
    else:
        # HF generate: KV cache for bs sequences of prompt + completion, full model on each rank
        gen_kv = cfg.per_device_train_batch_size * (inp.prompt_len + cfg.max_completion_length) * \
            a.kv_bytes_per_token(2)
        components['hf_generate_kv'] = _g(gen_kv)
        parts['generate'] = {**resident(), 'hf_generate_kv': gen_kv}
        parts['train'] = train_parts
    role = 'train' if inp.sft else ('train+vllm' if colocate else ('train' if server else 'train+hf-generate'))
    for gid in train_ids:
        out.append(_finish(GPUMemory(gpu=gid, role=role, capacity_gib=cap, components=dict(components),
                                     vllm=dict(vinfo), problems=list(problems)), parts))
    if server and not inp.sft:
        v = vllm_terms(cfg, inp)
        rprob: list[dict] = []
        nccl = NCCL_PER_GROUP * (2 if cfg.vllm_tensor_parallel_size > 1 else 1)
        rinfo = _vllm_checks(cfg, plan, inp, v, cap * GiB - CUDA_CONTEXT - nccl, rprob)
        comps = {f'vllm_{k}': _g(x) for k, x in v.items() if k not in ('requested', 'graphs_outside')}
        comps.update(vllm_reserved=_g(v['requested']), cuda_context=_g(CUDA_CONTEXT), nccl=_g(nccl))
        rparts = {'rollout': {'vllm_reserved': v['requested'], 'vllm_cuda_graphs': v['graphs_outside'],
                              'cuda_context': CUDA_CONTEXT, 'nccl': nccl}}
        where = 'remote:' if plan.rollout_remote else ''  # another machine's GPU ids
        rids = [f'{where}{i}' for i in (plan.rollout_gpus or [])] or \
            [f'rollout{i}' for i in range(max(1, cfg.vllm_tensor_parallel_size * cfg.vllm_data_parallel_size))]
        for gid in rids:
            out.append(_finish(GPUMemory(gpu=gid, role='rollout', capacity_gib=cap, components=dict(comps),
                                         vllm=dict(rinfo), problems=list(rprob)), rparts))
    return out


def _vllm_checks(cfg: GRPOConfig, plan: Plan, inp: Inputs, v: dict, free_at_start: float,
                 problems: list[dict]) -> dict:
    """vLLM's own three checks: start-up free memory, one max-length sequence, rollout concurrency."""
    a = inp.arch
    cap = inp.capacity_gib * GiB
    kv_per_token = vllm_kv_bytes_per_token(cfg, a)
    mml = _max_model_len(cfg, a)
    kv_tokens = max(0, int(v['kv_cache'] // kv_per_token)) // KV_BLOCK * KV_BLOCK if kv_per_token else 0
    info = {'requested_gib': _g(v['requested']), 'weights_gib': _g(v['weights']),
            'activation_gib': _g(v['activation']), 'non_torch_gib': _g(v['non_torch']),
            'sampler': inp.vllm_sampler, 'sampler_basis': inp.vllm_sampler_why,
            'kv_cache_gib': _g(max(0.0, v['kv_cache'])),
            'cuda_graphs_in_budget_gib': _g(v['cuda_graphs'] - v['graphs_outside']),
            'kv_tokens': kv_tokens, 'max_model_len': mml}
    if v['weights'] > cap:
        problems.append({'check': 'vllm.weights-exceed-gpu', 'phase': 'startup', 'message': (
            f'the model weights alone ({v["weights"] / GiB:.2f} GiB per GPU) exceed the GPU ({cap / GiB:.2f} GiB): '
            f'CUDA out of memory while loading')})
    elif free_at_start < v['requested']:
        problems.append({'check': 'vllm.startup-free-memory', 'phase': 'startup', 'message': (
            f'Free memory on device ({free_at_start / GiB:.2f}/{cap / GiB:.2f} GiB) on startup is less than '
            f'desired GPU memory utilization ({cfg.vllm_gpu_memory_utilization}, {v["requested"] / GiB:.2f} GiB). '
            f'[vLLM init_device]')})
    if v['kv_cache'] <= 0:
        problems.append({'check': 'vllm.no-kv-memory', 'phase': 'startup', 'message': (
            'No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when '
            'initializing the engine. [vLLM]')})
    else:
        need = math.ceil(mml / KV_BLOCK) * KV_BLOCK * kv_per_token
        if need > v['kv_cache']:
            # vLLM's estimate is the longest length whose whole blocks fit (estimate_max_model_len binary-searches
            # cdiv(len, block_size) x page size against the available memory): a multiple of the block size
            est = KV_BLOCK * int(v['kv_cache'] // (KV_BLOCK * kv_per_token))
            ver = version_tuple(inp.vllm_version)
            if ver is not None and ver < (0, 8, 0):
                # the V0 worker (vllm/worker/worker.py raise_if_cache_size_invalid): block_size x num_gpu_blocks
                held = KV_BLOCK * int(v['kv_cache'] // (KV_BLOCK * kv_per_token))
                message = (f"The model's max seq len ({mml}) is larger than the maximum number of tokens that can be "
                           f"stored in KV cache ({held}). Try increasing `gpu_memory_utilization` or decreasing "
                           f"`max_model_len` when initializing the engine. [vLLM {inp.vllm_version}]")
            else:
                # V1 (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory)
                message = (f"To serve at least one request with the models's max seq len ({mml}), ({need / GiB:.2f} "
                           f"GiB KV cache is needed, which is larger than the available KV cache memory "
                           f"({v['kv_cache'] / GiB:.2f} GiB). Based on the available memory, the estimated maximum "
                           f"model length is {est}. [vLLM]")
            problems.append({'check': 'vllm.kv-one-sequence', 'phase': 'startup', 'message': message})
    conc = plan.rollout_concurrency_per_engine
    if conc:
        seq = min(mml, (inp.prompt_len or 0) + cfg.max_completion_length)
        want = conc * seq
        info['rollout_tokens'] = int(want)
        info['rollout_concurrency'] = conc
        if kv_tokens and want > kv_tokens:
            # throughput, not memory: an info (it would fire on most long-completion launches at their limits)
            problems.append({'check': 'vllm.kv-concurrency', 'phase': 'rollout', 'severity': 'info', 'message': (
                f'a rollout sends {conc:g} sequences of up to {seq} tokens to each engine ({int(want):,} tokens at '
                f'the longest) but the KV cache holds {kv_tokens:,}: vLLM queues or preempts and recomputes the '
                f'rest (slower, same memory)')})
    return info


def _finish(m: GPUMemory, parts: dict[str, dict[str, float]]) -> GPUMemory:
    phases = {k: sum(v.values()) for k, v in parts.items()}
    m.phases = {k: _g(v) for k, v in phases.items()}
    m.phase = max(phases, key=phases.get)
    m.phase_terms = {k: _g(v) for k, v in sorted(parts[m.phase].items(), key=lambda kv: -kv[1])}
    peak = phases[m.phase]
    m.total_gib = _g(peak)
    m.peak_fraction = round(peak / (m.capacity_gib * GiB), 4) if m.capacity_gib else 0.0
    m.headroom_pct = round(100 * (1 - m.peak_fraction), 1)
    hard = [p for p in m.problems if p.get('severity', 'error') == 'error']
    m.fits = m.peak_fraction <= 1.0 and not hard
    return m


def dominant_term(m: GPUMemory) -> tuple[str, float]:
    """The largest term of the peak phase."""
    if not m.phase_terms:
        return '', 0.0
    name, gib = next(iter(m.phase_terms.items()))
    if name == 'vllm_reserved':
        name = 'vllm_reserved (vllm_gpu_memory_utilization)'
    return name, gib
