"""The trainer's per-rank memory terms (weights, optimizer state, activations, logits, transients) and which
AdamW implementation steps it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import GRPOConfig
from ..plan import Plan, no_grad_passes
from ..versions import version_tuple
from . import vision_train as vt
from .arch import Arch
from .inputs import CUDA_CONTEXT, EIGHT_BIT_MOMENTS, FRAGMENTATION, NCCL_PER_GROUP, ZERO3_SUB_GROUP, Inputs

# transformers' names for bitsandbytes' 8-bit AdamW (training_args.py OptimizerNames; trainer.py maps them to
# bnb.optim.AdamW with optim_bits 8, paged for the paged_ one)
EIGHT_BIT_ADAMW = ('adamw_bnb_8bit', 'adamw_8bit', 'paged_adamw_8bit')


def resolve_adamw(optim: str | None, torch_version: str | None, transformers_version: str | None) -> tuple[str, str]:
    """(``fused`` | ``foreach`` | ``8bit`` | ``other``, why) for the trainer's optimizer.

    - ``--optim adamw_torch_fused`` is fused; ``--optim adamw_torch`` is torch's AdamW with neither flag, which runs
      the foreach implementation on CUDA (torch/optim/optimizer.py ``_default_to_fused_or_foreach``; fused was
      never the default, pytorch PR #95415).
    - Unset, transformers picks: ``adamw_torch_fused`` from transformers 4.54 when torch >= 2.8
      (transformers/training_args.py ``default_optim``, PR #37358), else ``adamw_torch``.
    - Versions unknown: fused, the stack ms-swift 4.x recommends (torch 2.8+), and said so.
    Other optimizers keep the AdamW state accounting and are named as such."""
    if optim in EIGHT_BIT_ADAMW:
        return '8bit', f"--optim {optim}: bitsandbytes' 8-bit AdamW (moments at 1 byte each)"
    if optim and optim not in ('adamw_torch', 'adamw_torch_fused'):
        return 'other', f"--optim {optim}: its state is counted as AdamW's"
    if optim == 'adamw_torch_fused':
        return 'fused', '--optim adamw_torch_fused'
    if optim == 'adamw_torch':
        return 'foreach', "--optim adamw_torch: torch's AdamW runs its foreach implementation on CUDA"
    tv, hv = version_tuple(torch_version), version_tuple(transformers_version)
    if tv is not None and tv < (2, 8):
        return 'foreach', (
            f"torch {torch_version} < 2.8: transformers' default optim is adamw_torch, whose "
            f'foreach step holds a copy of the second moments'
        )
    if hv is not None and hv < (4, 54):
        return 'foreach', (
            f'transformers {transformers_version} < 4.54 defaults to adamw_torch, whose foreach step '
            f'holds a copy of the second moments'
        )
    if tv is not None and hv is not None:
        return 'fused', f'torch {torch_version} and transformers {transformers_version}: adamw_torch_fused'
    return 'fused', (
        "torch/transformers versions not known: transformers' default on torch >= 2.8 "
        '(adamw_torch_fused) assumed; on older torch, foreach AdamW needs a copy of the second moments '
        'more at the optimizer step'
    )


@dataclass
class Rank:
    """What every trainer term of one rank reads: the sharding, the dtype and the parameter counts."""

    arch: Arch
    N: int
    """World size (the ZeRO-3/FSDP shards)."""
    P: int
    """Parameters of the policy."""
    T: int
    """Trainable parameters: the adapters under LoRA, else P less a frozen vision tower."""
    pb: int
    """Bytes per parameter of the policy as loaded: torch_dtype, else the checkpoint's dtype."""
    base_bytes: float
    """The policy's weight bytes as loaded (quantised where it is)."""
    stage: int | None
    """DeepSpeed ZeRO stage (None: no DeepSpeed)."""
    fsdp: str | None
    """FSDP sharding (None: none, or DeepSpeed)."""
    offload_opt: bool
    offload_param: bool
    moments: float
    """Bytes of AdamW's two moments per trainable parameter where the optimizer steps fp32 values."""
    resident_quant: float = 0.0
    """Bytes of a quantised base's packed linear weights that ZeRO-3 neither partitions nor offloads (see
    ``quantised_resident``); 0 for an unquantised model."""


# Quantised bases whose packed linear weights stay whole on every GPU under ZeRO-3:
# - transformers 5.19 modeling_utils.py (PreTrainedModel.get_init_context; ``needs_zero3_init =
#   is_deepspeed_zero3_enabled() and not _is_quantized``): a quantised model is never built under
#   deepspeed.zero.Init, so it loads whole on each rank;
# - DeepSpeed 0.19 runtime/zero/parameter_offload.py ``_convert_to_zero_parameters`` then partitions (and with
#   offload_param offloads) ``module.parameters()`` at engine start, whatever their dtype (partition_parameters.py
#   ``_zero_init_param``: broadcast as uint8, then ``partition()``), and nothing else: GPTQ's and AWQ's packed weights
#   (qweight, qzeros, scales, g_idx) are registered buffers of their QuantLinear modules (peers-and-memory.md §E,
#   auto_gptq qlinear_cuda.py), so they stay; the checkpoint's unquantised embeddings, norms and lm_head are
#   parameters and are partitioned.
# bitsandbytes' Params4bit/Int8Params are torch.nn.Parameter subclasses, so the engine partitions them like any
# parameter: a bnb base is whole on each GPU only while it loads (below the training peak), and is planned as
# partitioned.
RESIDENT_QUANT = ('gptq', 'awq')


def quantised_resident(a: Arch, bnb_bits: int | None) -> float:
    """Bytes of the packed linear weights that stay on every rank under ZeRO-3 (0: not a resident quantisation)."""
    if bnb_bits or a.quant_method() not in RESIDENT_QUANT:
        return 0.0
    return a.linear_params() * a.linear_bytes_per_weight()


def rank_of(cfg: GRPOConfig, plan: Plan, inp: Inputs) -> Rank:
    a = inp.arch
    P = a.param_count()
    ds = cfg.deepspeed or ''
    # --quant_bits / load_in_4bit, else a bitsandbytes checkpoint's own bits (transformers loads it so)
    bnb_bits = cfg.quant_bits if cfg.quant_method == 'bnb' else a.bnb_bits()
    base_bytes = a.weight_bytes(bnb_bits=bnb_bits)
    # bytes per parameter of the policy as loaded: torch_dtype, else the checkpoint's dtype
    pb = 4 if (cfg.torch_dtype or a.dtype).endswith('float32') else 2
    if pb == 4 and not (a.quant_method() or bnb_bits):
        base_bytes = a.weight_bytes(dtype_bytes=4)
    T = (
        a.lora_params(cfg.lora_rank, cfg.target_modules) if cfg.is_lora else P - (a.vision if cfg.freeze_vit else 0)
    )  # a frozen vision tower has no gradients or optimizer state
    # AdamW's two moments per trainable parameter: fp32 (8 B) where the optimizer steps fp32 values (adapters,
    # DeepSpeed's/FSDP's master copies); bitsandbytes' 8-bit AdamW keeps each as uint8 plus an fp32 absmax per
    # block of 256 (bitsandbytes/optim/optimizer.py Optimizer2State.init_state): 2 + 8/256 B
    return Rank(
        arch=a,
        N=max(1, plan.world_size),
        P=P,
        T=T,
        pb=pb,
        base_bytes=base_bytes,
        stage=cfg.zero_stage if cfg.deepspeed else None,
        fsdp=cfg.fsdp_sharding if not cfg.deepspeed else None,
        offload_opt='offload' in ds,
        offload_param=ds.startswith('zero3_offload'),
        moments=EIGHT_BIT_MOMENTS if inp.adamw == '8bit' else 8,
        resident_quant=quantised_resident(a, bnb_bits) if cfg.is_lora else 0.0,
    )


def weights(cfg: GRPOConfig, r: Rank) -> float:
    """The policy's weights on one rank: frozen base under LoRA (ZeRO-3 partitions it and zero3_offload offloads
    it, except a GPTQ/AWQ base's packed weights, which stay whole: ``quantised_resident``), else the trained
    parameters; FSDP2 upcasts them to fp32."""
    N, stage, fsdp = r.N, r.stage, r.fsdp
    if cfg.is_lora:
        if fsdp == 'full_shard':
            return r.base_bytes / N
        rest = r.base_bytes - r.resident_quant  # what ZeRO-3 partitions
        return r.resident_quant + (0.0 if r.offload_param else (rest / N if stage == 3 else rest))
    if fsdp is not None:
        return 4 * r.P / N if fsdp == 'full_shard' else 4 * r.P
    return 0.0 if r.offload_param else (r.pb * r.P / N if stage == 3 else r.pb * r.P)


def optimizer(cfg: GRPOConfig, r: Rank, inp: Inputs) -> dict[str, float]:
    """Gradients and optimizer state (``lora_params``, ``grads+optimizer``) and, sharded, the gathered largest
    layer (``zero3_live_params``)."""
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
    N, T, stage, fsdp, moments = r.N, r.T, r.stage, r.fsdp, r.moments
    t: dict[str, float] = {}
    if cfg.is_lora:
        # LoRA adapters are kept in fp32 by PEFT: 4 (param) + 4 (grad) + the moments (AdamW: 8)
        t['lora_params'] = 4 * T / (N if stage == 3 or fsdp == 'full_shard' else 1)
        states = (4 + moments) * T
        t['grads+optimizer'] = 0.0 if r.offload_opt else (states / N if stage in (1, 2, 3) or fsdp else states)
    elif fsdp is not None:
        t['grads+optimizer'] = (4 + moments) * T / N
    elif stage is None:
        # grads + AdamW m, v in the parameter dtype (or 8-bit)
        t['grads+optimizer'] = r.pb * T + (EIGHT_BIT_MOMENTS if inp.adamw == '8bit' else 2 * r.pb) * T
    elif stage == 3:
        t['grads+optimizer'] = 0.0 if r.offload_opt else (8 + moments) * T / N
    else:
        grads16 = 2 * T / N if stage >= 2 else 2 * T
        fp32_states = (8 + moments) * T / N
        if r.offload_opt:
            grads16, fp32_states = 0.0, 0.0
        t['grads+optimizer'] = grads16 + fp32_states
    if stage == 3 or fsdp == 'full_shard':
        # gathered 16-bit params + grads of the largest module (DS estimate: 4 x largest layer)
        t['zero3_live_params'] = 4 * r.arch.largest_layer_params()
    return t


def reserve_inputs(cfg: GRPOConfig, plan: Plan, inp: Inputs) -> dict[str, float]:
    """What the caching allocator's reserve depends on besides the logits block (``reserve.segments_left_free``),
    bytes per rank: ``recompute`` (one recomputed layer's working set under checkpointing, else 0: its segments are
    free while the logits' backward runs), ``after_forward`` (gradients and optimizer states first allocated after
    the first forward: they fill the segments that forward freed), ``states`` (the optimizer states the first
    step creates, which stay: where they land in a freed logits segment, that block is made again) and
    ``no_grad_pass`` (1.0 where a no-grad log-probabilities forward runs before each training forward,
    ``plan.no_grad_passes``: the old policy's or the reference's)."""
    r = rank_of(cfg, plan, inp)
    _, recompute, _ = activations(cfg, r, inp)
    no_grad = float(bool(no_grad_passes(cfg, plan, inp.framework)))  # framework None: the harness's step
    if r.stage is not None or r.fsdp is not None or r.offload_opt:
        # DeepSpeed and FSDP allocate their flat gradient and optimizer partitions when the engine is built,
        # before any forward: nothing lands in the logits' segments later
        return {'recompute': recompute, 'after_forward': 0.0, 'states': 0.0, 'no_grad_pass': no_grad}
    go = optimizer(cfg, r, inp).get('grads+optimizer', 0.0)
    grads = (4 if cfg.is_lora else r.pb) * r.T
    return {'recompute': recompute, 'after_forward': go, 'states': max(0.0, go - grads), 'no_grad_pass': no_grad}


def ref_model(cfg: GRPOConfig, r: Rank) -> float | None:
    """The reference model: full training with beta != 0 (LoRA disables the adapter instead); None: none."""
    if cfg.is_lora or cfg.beta == 0:
        return None
    return 0.0 if r.offload_param else (r.pb * r.P / r.N if r.stage == 3 or r.fsdp == 'full_shard' else r.pb * r.P)


def _tokens(cfg: GRPOConfig, inp: Inputs) -> tuple[int, int]:
    """(tokens of one micro-batch, logits rows per sequence) on one rank: bs sequences of prompt + completion,
    padded; the logits cover the completion and the micro-batch's prompt spread (``logits_rows``); Ulysses sequence
    parallelism splits each sequence over its group (swift/sequence_parallel)."""
    sp = max(1, cfg.sequence_parallel_size)
    return (
        cfg.per_device_train_batch_size * math.ceil(((inp.prompt_len or 0) + cfg.max_completion_length) / sp),
        math.ceil(logits_rows(cfg, inp) / sp),
    )


def logits_from(cfg: GRPOConfig, spans_prompts: bool, shortest: int | None) -> int | None:
    """``Inputs.logits_from_prompt``: the data's shortest prompt (``shortest``, from --data-stats; None: not known,
    and prompts of one length are planned) where the framework keeps logits from the micro-batch's earliest first
    label on (``spans_prompts``, ``Framework.logits_span_prompts``) and a micro-batch holds several prompts. It
    holds one prompt's completions when it divides num_generations: the sampler repeats each prompt num_generations
    times in a row and the trainer cuts the batch in order (swift/rlhf_trainers/rollout_mixin.py
    ``split_by_mini_batches``)."""
    return shortest if spans_prompts and mixes_prompts(cfg) else None


def mixes_prompts(cfg: GRPOConfig) -> bool:
    """A micro-batch holds the completions of more than one prompt (see ``logits_from``)."""
    mb, groups = cfg.per_device_train_batch_size, cfg.num_generations
    return not (groups and mb and groups % mb == 0)


def logits_rows(cfg: GRPOConfig, inp: Inputs) -> int:
    """Positions per sequence the training forward makes logits for: the completion and, where the logits start at
    the micro-batch's earliest first label (``Inputs.logits_from_prompt``), the planned prompt less the shortest
    one (a micro-batch with a prompt of each length, padded on the right)."""
    short = inp.logits_from_prompt if mixes_prompts(cfg) else None  # a fix's micro-batch may hold one prompt
    return cfg.max_completion_length + (max(0, (inp.prompt_len or 0) - short) if short is not None else 0)


def activations(cfg: GRPOConfig, r: Rank, inp: Inputs) -> tuple[float, float, float]:
    """(bytes autograd keeps for the backward of one micro-batch, the one recomputed layer's share of them under
    gradient checkpointing, else 0, and the first layer's backward peak for the no-ZeRO full-training rule, else 0),
    before the fragmentation allowance."""
    a = inp.arch
    tokens, _ = _tokens(cfg, inp)
    h, L, I = a.hidden, a.layers, a.token_mlp_width  # noqa: E741 (the papers' names)
    # One decoder layer's saved tensors per token, 16-bit weights, as `grpo-guard trace` counts them on the
    # real model class (grpo_recipes/memory/trace.py, transformers 5.19 modeling_qwen2.py/modeling_qwen3.py):
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
        per_layer_token += (
            -(8 * h + 2 * I)
            - (2 * q + 2 * kv if a.qk_norm else 0)
            + (5 if cfg.lora_dropout > 0 else 4) * sum_in
            + 4 * cfg.lora_rank * n_mod
        )
    if cfg.use_liger_kernel:
        # transformers applies Liger's kernels with their defaults (rope, rms_norm, swiglu, fused linear loss;
        # liger_kernel/transformers/monkey_patch.py): each RMSNorm keeps its 16-bit input and a per-row fp32 rstd
        # instead of the fp32 upcast and the normalised copy (liger ops/rms_norm.py save_for_backward(X, W, RSTD):
        # -4h per norm), and SwiGLU keeps gate and up only, recomputing silu in backward (ops/swiglu.py: -2I).
        # Not traced (Triton kernels have no CPU/fake implementation); read from Liger's code.
        per_layer_token -= 8 * h + 2 * I
    if not checkpointed(cfg):
        return tokens * per_layer_token * L, 0.0, 0.0
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
    # the first layer's MLP backward, with its checkpointed input (the embedding's output): see trainer_terms
    first_layer = tokens * (per_layer_token + in_mlp_backward + 2 * h)
    if not cfg.is_lora and (a.tied or (r.stage is None and r.fsdp is None)):
        # the lm_head's gradient exists by then (vocab x h): a tied one waits in autograd's input buffer of the
        # shared weight until the embedding's backward adds to it (the late term), an untied one is already in
        # .grad, which the no-ZeRO rule in trainer_terms takes as absent while activations are live
        recompute += a.vocab * h * r.pb
    return tokens * 2 * h * L + recompute, recompute, first_layer


def checkpointed(cfg: GRPOConfig) -> bool:
    return bool(cfg.gradient_checkpointing or cfg.fsdp_sharding)  # fsdp2.json turns it on


def logits(cfg: GRPOConfig, inp: Inputs, fragmentation: float) -> float:
    """The loss's full-vocabulary buffers over the logits rows (``logits_rows``) at their peak."""
    # logits over the completion positions and, in ms-swift, the micro-batch's prompt spread (logits_to_keep,
    # swift grpo_trainer _get_logps_via_local_forward; see logits_rows): the mixed-precision wrapper's fp32 copy
    # (accelerate convert_outputs_to_fp32), divided by the temperature in place, is kept by TRL's
    # selective_log_softmax (its fp32 path: gather - per-row logsumexp, which saves its input). Its backward
    # frees that copy but builds four full-size fp32 buffers of its own (the gradients of the two branches, their
    # sum, and the slice's and the in-place division's backward): 16 B per element at the traced peak (backward,
    # aten.div; all four are temporaries in `grpo-guard trace`'s split; Qwen2.5-7B at micro-batch 1, 8 and 16
    # alike).
    a = inp.arch
    V, bs = a.vocab, cfg.per_device_train_batch_size
    _, C = _tokens(cfg, inp)
    if cfg.use_liger_kernel:
        # Liger's fused linear + loss never holds the full logits: chunks of ceil(n / ceil(V / h)) tokens
        n = bs * C
        chunk = max(1, math.ceil(n / math.ceil(V / a.hidden)))
        return chunk * V * 4 * 2
    if inp.sft:
        # ms-swift's default SFT loss (swift/template/base.py compute_sft_loss -> transformers ForCausalLMLoss:
        # fp32 upcast, cross_entropy = log_softmax + nll_loss) peaks in log_softmax's backward: its saved fp32
        # output, the fp32 gradient nll_loss hands it and the fp32 gradient it returns, 12 B per element
        # (`grpo-guard trace` in SFT mode, trace_step(sft=True): Qwen2.5-7B LoRA 1 x 2048, peak at
        # aten._log_softmax_backward_data)
        return bs * C * V * 12 * fragmentation
    if cfg.deepspeed:
        # Under DeepSpeed accelerate does not wrap the forward (accelerate 1.15 accelerator.py: native_amp stays False
        # for DistributedType.DEEPSPEED, so prepare_model adds no autocast and no convert_outputs_to_fp32; checked on
        # CPU with accelerate and DeepSpeed themselves, tests/test_trace_long.py), and neither ms-swift
        # (_get_logps_via_local_forward) nor TRL casts: the 16-bit logits take selective_log_softmax's row-wise
        # log_softmax path. Traced (trace_step(upcast_logits=False)): the same four full-size buffers at the peak
        # (backward, aten.div), 16-bit: 8 B per element (Qwen2.5-7B LoRA at 8 x 1,024 and 1 x 8,192 completions)
        return bs * C * V * 8 * fragmentation
    return bs * C * V * 16 * fragmentation


def transients(cfg: GRPOConfig, r: Rank, inp: Inputs) -> dict[str, float]:
    """Buffers that live after the activations and logits are freed: foreach AdamW's copy of the second moments,
    a tied embedding's second gradient."""
    late: dict[str, float] = {}
    if inp.adamw == 'foreach' and not r.offload_opt:
        # foreach AdamW: torch._foreach_sqrt(exp_avg_sqs) makes a full copy of the second moments, live until the
        # parameters are updated (torch/optim/adam.py _multi_tensor_adam; traced: trace_step(adamw='foreach')).
        # DeepSpeed steps its fp32 flat partitions through the same torch optimizer (ZeRO-3: one sub-group at a
        # time), FSDP2 its fp32 shards; without them the moments are in the parameter dtype.
        sharded = r.stage in (1, 2, 3) or r.fsdp is not None
        elems = r.T / r.N if sharded else r.T
        if r.stage == 3:
            elems = min(elems, ZERO3_SUB_GROUP)
        late['adamw_foreach_temp'] = elems * (4 if (cfg.is_lora or sharded) else r.pb)
    if not cfg.is_lora and r.arch.tied:
        # a tied, trained embedding gets two gradients, lm_head's and the embedding's (embedding_dense_backward);
        # autograd sums them out of place before accumulating, so two more vocab x hidden gradients are live at
        # the end of backward (traced: Qwen3-4B full, peak at aten.add in backward)
        late['tied_embedding_grad_temp'] = 2 * r.arch.vocab * r.arch.hidden * r.pb
    return late


def nccl(cfg: GRPOConfig, r: Rank) -> float:
    """NCCL buffers: the data-parallel group, a colocated vLLM's TP group, the weight-sync group of a server."""
    groups = 1 if r.N > 1 else 0
    if cfg.rollout_mode == 'colocate' and cfg.vllm_tensor_parallel_size > 1:
        groups += 1
    if cfg.rollout_mode == 'server':
        groups += 1  # weight-sync communicator with the rollout server
    return groups * NCCL_PER_GROUP


def zero3_sync_gather(cfg: GRPOConfig, r: Rank, inp: Inputs) -> float | None:
    """Weight sync to vLLM: ZeRO-3 gathers 16-bit weights, split by move_model_batches; None: no gather."""
    if not (cfg.use_vllm and r.stage == 3):
        return None
    a = r.arch
    if inp.weight_sync == 'per_param' and not cfg.is_lora:
        return r.pb * a.vocab * a.hidden  # one parameter at a time: the largest, the embedding
    gathered = 2 * r.P if not cfg.is_lora else r.base_bytes - r.resident_quant  # resident ones are not gathered
    parts = max(1, cfg.move_model_batches or 1)
    return gathered / parts + (2 * a.vocab * a.hidden if parts > 1 else 0)


def zero3_generation_gather(cfg: GRPOConfig, r: Rank) -> float | None:
    """HF generation (no vLLM) under ZeRO-3 gathers the whole policy on every rank for the length of the rollout, when
    ``ds3_gather_for_generation`` is true (its default in both frameworks): the gathered 16-bit parameters (the frozen
    base as loaded and the fp32 adapters under LoRA) beside each rank's own shard. None: no such gather.

    - ms-swift 4.6: swift/rlhf_trainers/rollout_mixin.py ``_generate_completions`` runs HF generate (``use_fast_infer``
      is ``use_vllm``) inside swift/utils/transformers_utils.py ``unwrap_model_for_generation(..., gather_deepspeed3_
      params=args.ds3_gather_for_generation)``, which wraps every ``named_parameters()`` in
      ``deepspeed.zero.GatheredParameters``; the argument defaults to True (swift/trainers/arguments.py).
    - TRL: trl/models/utils.py ``unwrap_model_for_generation`` with GRPOConfig ``ds3_gather_for_generation`` (True).
    With it false, generation fetches each layer's parameters as the forward reaches them (DeepSpeed's hooks): the
    ``zero3_live_params`` term already counts that."""
    if cfg.use_vllm or r.stage != 3 or not cfg.ds3_gather_for_generation:
        return None
    if cfg.is_lora:
        return r.base_bytes - r.resident_quant + 4 * r.T  # a quantised base's packed weights are there already
    return 2 * r.P  # DeepSpeed's 16-bit engine holds the partitioned parameters in 16 bits (as zero3_sync_gather)


def trainer_terms(cfg: GRPOConfig, plan: Plan, inp: Inputs, fragmentation: float = FRAGMENTATION) -> dict[str, float]:
    """Per-rank training memory terms in bytes (``fragmentation``: the allowance on the dynamic terms; 1.0 gives
    the allocated bytes `grpo-guard trace` counts)."""
    r = rank_of(cfg, plan, inp)
    t: dict[str, float] = {'weights': weights(cfg, r), **optimizer(cfg, r, inp)}
    ref = ref_model(cfg, r)
    if ref is not None:
        t['ref_model'] = ref
    act, recompute, first_layer = activations(cfg, r, inp)
    # a trained vision tower keeps its blocks' tensors; a frozen one only holds its forward's (vision_train.py)
    vis = vt.vision_activation_bytes(
        r.arch,
        cfg.freeze_vit,
        inp.images_per_prompt,
        inp.max_pixels,
        cfg.per_device_train_batch_size,
        checkpointed(cfg),
    )
    act += 0.0 if cfg.freeze_vit else vis
    t['activations'] = act * fragmentation
    t['logits'] = logits(cfg, inp, fragmentation)
    # Terms that never coexist (traced, grpo_recipes/trace.py). In full training
    # without ZeRO/FSDP the 16-bit gradients (pb x P, inside grads+optimizer) appear layer by layer as backward
    # frees that layer's saved tensors (Qwen2.5-7B full: the peak is in the embedding's backward, every gradient
    # present, the activations gone).
    # with checkpointing the logits' backward runs before any layer is recomputed and frees its buffers first
    overlap = min(recompute * fragmentation, t['logits']) if checkpointed(cfg) and not cfg.use_liger_kernel else 0.0
    dynamic = t['activations'] + t['logits'] - overlap
    if not cfg.is_lora and r.stage is None and r.fsdp is None:
        overlap += min(r.pb * r.T, dynamic)
        dynamic -= min(r.pb * r.T, dynamic)
        # ...but with checkpointing the first layer's backward is a later peak: every gradient is there except that
        # layer's and the (untied) embedding's, beside the layer's live tensors (traced: Llama-3.1-8B full,
        # 1 x 17,408 tokens, peak in layer 0's MLP backward with 13.7 of 15.0 GiB of gradients)
        a = r.arch
        emb = 0 if a.tied else a.vocab * a.hidden
        at_first = (
            r.pb * (r.T - a.attention_linear_params() - a.mlp_linear_params() - emb) + first_layer * fragmentation
        )
        beyond = max(0.0, at_first - (r.pb * r.T + dynamic))
        overlap -= beyond
        dynamic += beyond
    # Transients after the activations and logits are freed; the largest of them and what is left of the dynamic
    # terms counts (they happen at different times).
    late = transients(cfg, r, inp)
    if cfg.freeze_vit and vis:
        late['vision_forward_temp'] = vis * fragmentation  # before the language model's forward: never beside it
    if late:
        t.update(late)
        overlap += dynamic + sum(late.values()) - max(dynamic, *late.values())
    if overlap:
        t['overlap'] = -overlap
    t['cuda_context'] = CUDA_CONTEXT
    t['nccl'] = nccl(cfg, r)
    sync = zero3_sync_gather(cfg, r, inp)
    if sync is not None:
        t['zero3_sync_gather'] = sync
    gen = zero3_generation_gather(cfg, r)
    if gen is not None:
        t['zero3_generation_gather'] = gen
    return t
