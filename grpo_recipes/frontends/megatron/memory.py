"""Per-GPU memory of a colocated (or server-mode) Megatron-SWIFT GRPO launch, phase by phase.

Megatron state on one GPU (bf16 training, Megatron-LM's distributed optimizer), per parameter held by the rank:
  weights 2 bytes (bf16) + the fp32 gradient buffer 4 bytes (``main_grads_dtype`` fp32; 2 with bf16) + fp32 main
  weights and Adam's two moments 12 bytes / DP -- Megatron-LM's "6 + 12/d" bytes per parameter
  (docs/source/api-guide/dist_optimizer.md; megatron/training/theoretical_memory_usage.py
  ``compute_weight_and_optimizer_memory``: 18 bytes without it, ``6 + 12 / data_parallel_size`` with it).
  The rank's parameters: the embedding on the first stage and the output layer on the last (split by TP), the
  decoder layers split by PP (an uneven first/last stage as given), their attention and dense MLP by TP, norms and
  the router whole on every rank; routed experts (and their LoRA adapters) by EP and expert-TP, their optimizer
  states by the expert data-parallel size (megatron/core/parallel_state.py: world / (ETP x EP x PP)).
  ``optimizer_cpu_offload`` with fraction 1 leaves no optimizer state on the GPU (HybridDeviceOptimizer copies the
  shard's parameters to pinned CPU memory, steps there and copies them back).
  ``optimizer_cpu_offload`` keeps ``1 - optimizer_offload_fraction`` of the states on the GPU; the precision-aware
  optimizer stores the moments in ``exp_avg_dtype``/``exp_avg_sq_dtype`` and the main weights in
  ``main_params_dtype``. Without it the distributed optimizer's fp32 main copy of the offloaded shards stays on the
  GPU (4 bytes per parameter / DP; distrib_optimizer.py ``_build_model_and_main_param_groups``).
Freed parameter storage (ms-swift 3.x only): the policy's bf16 parameters as built stay in PyTorch's cache after
  DDP moves them into its parameter buffer, less what the optimizer's GPU states and the step's transients reuse
  (``freed_param_storage``; 4.x empties the cache before the first step, ``keeps_freed_param_storage``); train phase.
Reference model: full tuning builds one (swift/megatron/trainers/rlhf_mixin.py ``prepare_model``: ``tuner_type ==
  'full' and rlhf_type not in ['rm', 'gkd']``) even with beta 0: bf16 weights with the same split.
Activations per transformer layer per micro-batch (``layer_bytes``, counted from megatron-core 0.19's layers, in
  the place of Korthikanti et al. 2022's Table 2, whose 34sbh assumes a 4h GeLU MLP and no GQA): each norm's
  input and output (8h per token, split by TP only with sequence parallelism), attention's saved q, k, v and
  output (4q + 4kv per TP rank with a flash kernel; the local path repeats K/V and keeps its fp32 softmax and bf16
  probabilities, 8q + 6as), the gated MLP's 8I; selective recompute drops the scores; full recompute keeps the
  layer input (2sbh, /t with sequence parallelism) and recomputes one layer at a time. The loss's logits are freed
  before any layer's backward, so a stage's peak is its saved activations plus the larger of the logits and the
  recomputed layer with the unfused attention's backward transient (measured on one H200, 2026-11-27:
  bench/bench_megatron_gpu.py). Context parallelism divides s. Padding-free packing: b = 1,
  s = micro_batch_size x the sequence length. An MoE layer also keeps its router's fp32 scores and, per routed
  token copy, the grouped MLP's input, intermediates and output (``moe_layer_bytes``; every layer without
  recompute, one at a time with full recompute). The first pipeline stage holds min(PP, micro-batches) micro-batches
  in flight under 1F1B (Megatron-LM theoretical_memory_usage.py ``compute_activation_memory``); the last stage holds
  the logits: s x V/t in bf16 plus the fp32 log-softmax and its gradient (swift/megatron/trainers/
  vocab_parallel_utils.py), 10 bytes per element. Fragmentation x1.05 on activations (memory/inputs.py), and the
  caching allocator's reserve beyond the allocated peak (memory/reserve.py, per allocator setting) in the train
  phase.
vLLM (colocate): one engine shard per GPU from memory/vllm.py ``vllm_terms``, sized by ms-swift's max_num_seqs
  (rollout_mixin.py ``_prepare_vllm_engine``); vLLM's own KV checks from ``vllm_checks`` (one max_model_len sequence,
  the completions one engine generates per rollout).
Phases (rollout_mixin.py ``_init_rollout_engine``, ``_generate``/``_move_model_to_vllm``, ``offload_context``):
  startup   the model, its gradient buffers and the reference model (the optimizer is built later, in train();
            offload_model moves the rest out) + the new engine's reservation;
            vLLM requires free memory >= gpu_memory_utilization x capacity when it starts;
  train     Megatron state + activations + what the engine keeps while it sleeps (CUDA graphs, non-torch
            memory; everything when sleep_level is 0);
  weight_sync  Megatron state (nothing offloaded at that point) + the engine's weights woken (sleep_level 1/2:
            ``wake_up(tags=['weights'])``) + one exported full tensor (mcore-bridge ``export_weights``);
  rollout   Megatron state less what offload_model/offload_optimizer move to the CPU + the whole engine.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from ...config import GRPOConfig
from ...memory.arch import Arch
from ...memory.inputs import FRAGMENTATION, NCCL_PER_GROUP, GiB, Inputs
from ...memory.reserve import DEVICE_CONTEXT
from ...memory.vllm import vllm_checks, vllm_terms
from .plan import tuner

DTYPE_BYTES = {'fp32': 4, 'fp16': 2, 'bf16': 2, 'fp8': 1}
FLASH_BACKENDS = ('flash', 'fused', 'auto')
LOGIT_BYTES = 2 + 4 + 4
"""bf16 logits, their fp32 log-softmax and its gradient per vocabulary element on the last stage."""
CE_LOGIT_BYTES = 4 + 2
"""Megatron-core's own vocab-parallel cross entropy (a bare GPTModel with labels, bench/bench_megatron_gpu.py):
an fp32 copy of the logits that ``torch.exp(..., out=)`` turns into the softmax it saves, and whose buffer the
backward turns into the gradient in place (tensor_parallel/cross_entropy.py ``grad_input = softmax``,
``grad_input.mul_``), beside the bf16 logits in the forward and their bf16 gradient in the backward."""


def stage_layers(args: dict, layers: int, pp: int) -> list[int]:
    """Decoder layers per pipeline stage: ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers``
    on the edge stages and the rest split evenly over the others (Megatron-LM megatron/core/transformer/
    transformer_block.py ``get_num_layers_to_build``); else ceil(layers / PP) on the heaviest stage."""
    if pp <= 1:
        return [layers]
    first, last = args.get('decoder_first_pipeline_num_layers'), args.get('decoder_last_pipeline_num_layers')
    if first is None and last is None:
        return [-(-layers // pp)] * pp
    middle = pp - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    each = -(-rest // middle) if middle > 0 else 0
    return [first if first is not None else each] + [each] * (pp - 2) + [last if last is not None else each]


def rank_params(a: Arch, tp: int, pp: int, ep: int, etp: int, args: dict | None = None) -> dict[str, float]:
    """Parameters one rank holds on the heaviest stage, split as Megatron-LM splits them (megatron/training/
    theoretical_memory_usage.py ``compute_weight_and_optimizer_memory``): attention and dense MLP by TP; norms and
    the router replicated on every TP rank; routed experts by EP x expert-TP; the embedding on the first stage and
    the output layer on the last (split by TP; tied and PP 1: one matrix)."""
    h = a.hidden
    expert = a.experts * 3 * h * a.moe_intermediate if a.experts else 0
    tp_split = a.attention_linear_params() + a.mlp_linear_params() - expert
    replicated = a.layer_small_params()
    emb = a.vocab * h
    per_stage = stage_layers(args or {}, a.layers, pp)
    best = None
    for i, n in enumerate(per_stage):
        edge = (emb if i == 0 else 0) + ((0 if a.tied and pp == 1 else emb) if i == pp - 1 else 0)
        total = n * (tp_split / tp + replicated + expert / (ep * etp)) + edge / tp + (h if i == pp - 1 else 0)
        if best is None or total > best[0]:
            best = (total, i, n, edge)
    _, i, n, edge = best
    return {
        'dense': n * (tp_split / tp + replicated) + edge / tp + (h if i == pp - 1 else 0),
        'expert': n * expert / (ep * etp),
        'layers_per_stage': n,
        'first_stage_layers': per_stage[0],
    }


def megatron_state(args: dict, a: Arch, par: dict) -> dict[str, float]:
    """Bytes per GPU of the training model, its gradients, optimizer states and the reference model."""
    tp, pp, ep, etp = par['tp'], par['pp'], par['ep'], par['etp']
    dp, edp = par['dp'] or 1, par['expert_dp'] or 1
    p = rank_params(a, tp, pp, ep, etp, args)
    full = tuner(args) == 'full'
    grad_b = DTYPE_BYTES.get(str(args.get('main_grads_dtype') or 'fp32'), 4)
    main_b = DTYPE_BYTES.get(str(args.get('main_params_dtype') or 'fp32'), 4)
    m1 = m2 = 4
    if args.get('use_precision_aware_optimizer'):
        m1 = DTYPE_BYTES.get(str(args.get('exp_avg_dtype') or 'fp32'), 4)
        m2 = DTYPE_BYTES.get(str(args.get('exp_avg_sq_dtype') or 'fp32'), 4)
    opt_b = main_b + m1 + m2
    on_gpu = 1.0
    if args.get('optimizer_cpu_offload'):
        on_gpu = 1.0 - float(args.get('optimizer_offload_fraction') or 0.0)
    distributed = args.get('use_distributed_optimizer', True)
    weights = 2 * (p['dense'] + p['expert'])
    if full:
        trained_dense, trained_expert = p['dense'], p['expert']
    else:
        # LoRA: rank r adapters on every linear of the stage's layers (A: d_in x r, B: r x d_out), split like the
        # layer they wrap: the attention/dense MLP ones by TP (an upper bound: ms-swift does not split A under TP),
        # the routed experts' by EP x expert-TP, as the experts are (megatron/core/transformer/moe/experts.py)
        r = int(args.get('lora_rank') or 8)
        targets = args.get('target_modules')
        targets = targets if isinstance(targets, list) else None
        lora = a.lora_params(r, targets) / max(1, a.layers)
        lora_expert = 0.0
        if a.experts:
            dense_only = replace(a, experts=0, intermediate=a.shared_expert_intermediate)
            lora_dense = dense_only.lora_params(r, targets) / max(1, a.layers)
            if not a.shared_expert_intermediate:
                lora_dense -= dense_only.lora_params(r, ['gate_proj', 'up_proj', 'down_proj']) / max(1, a.layers)
            lora_expert = max(0.0, lora - lora_dense)
            lora = lora_dense
        n = p['layers_per_stage']
        trained_dense, trained_expert = lora * n / tp, lora_expert * n / (ep * etp)
        weights += 2 * (trained_dense + trained_expert)
    grads = grad_b * (trained_dense + trained_expert)
    share = trained_dense / (dp if distributed else 1) + trained_expert / (edp if distributed else 1)
    optim = opt_b * share * on_gpu
    if args.get('optimizer_cpu_offload') and distributed and not args.get('use_precision_aware_optimizer'):
        # without the precision-aware optimizer the distributed optimizer makes an fp32 main copy of every shard on
        # the GPU (distrib_optimizer.py _build_model_and_main_param_groups: ``shard_model_param.clone().float()``
        # unless use_precision_aware_optimizer_no_fp8_or_ds_fp8); HybridDeviceOptimizer steps a CPU copy of the
        # offloaded ones and copies the result back into it (hybrid_optimizer.py _get_sub_optimizer_param_groups,
        # param_copy_back_gpu_hook), so that copy stays. ms-swift 4.x accepts this; 3.x refuses it (rules.py)
        optim += 4 * share * (1.0 - on_gpu)
    ref = 2 * (p['dense'] + p['expert']) if full and args.get('rlhf_type') not in ('rm', 'gkd') else 0.0
    groups = 1 + sum(1 for k in ('tp', 'pp', 'cp', 'ep') if par[k] > 1)
    return {
        'weights': weights,
        'grads': grads,
        'optimizer': optim,
        'ref_model': ref,
        'cuda_context': DEVICE_CONTEXT,  # measured beside torch's reserve (memory/reserve.py)
        'nccl': groups * NCCL_PER_GROUP,
    }


def keeps_freed_param_storage(args: dict, release: str | None) -> bool:
    """Whether the policy's pre-DDP parameter storage (``freed_param_storage``) is still cached at the first train
    step. ms-swift 4.x: no -- BaseMegatronTrainer.__init__ (swift/megatron/trainers/base.py) calls
    ``warmup_jit_function`` after ``prepare_model`` and ``get_optimizer_and_scheduler``, and it ends in
    ``torch.cuda.empty_cache()`` (swift/megatron/utils/megatron_lm_utils.py). ms-swift 3.x: yes -- it trains through
    Megatron-LM's ``pretrain``, whose ``set_jit_fusion_options`` (and its ``empty_cache``) runs before
    ``setup_model_and_optimizer`` builds the model (megatron/training/training.py, core_r0.13-0.15), unless a
    colocated GRPO run empties the cache at its first rollout, before its first train step: ``sleep_level`` > 0
    (``aggressive_empty_cache`` before the KV cache wakes and after the engine sleeps, rollout_mixin.py /
    grpo_trainer.py 3.12) or ``offload_model``/``offload_optimizer`` (``empty_cache`` in trainers/utils.py's
    offload functions). None: the newest release (4.x)."""
    from ...versions import version_tuple

    v = version_tuple(release) if release else None
    if v is None or v >= (4,):
        return False
    if args.get('rlhf_type') == 'grpo' and args.get('vllm_mode') == 'colocate':
        return not (int(args.get('sleep_level') or 0) > 0 or args.get('offload_model') or args.get('offload_optimizer'))
    return True


def freed_param_storage(args: dict, state: dict, transient: float) -> float:
    """Bytes the caching allocator keeps reserved, not allocated, in the train phase when
    ``keeps_freed_param_storage``: the policy's trained parameters as built, before DDP. With the distributed
    optimizer Megatron-core's DDP allocates one contiguous buffer for them and moves each parameter into it
    (megatron/core/distributed/param_and_grad_buffer.py ``_ParamAndGradBuffer.__init__``: ``old_param_data =
    param.data; param.data = new_param_data; ... del old_param_data``, core 0.13 to 0.19); the old bf16 storage
    returns to PyTorch's cache, which nvidia-smi still counts, until later allocations reuse it: the optimizer's GPU
    states (built after the wrap: Megatron-LM ``setup_model_and_optimizer``) and the step's own transients
    (``transient``: activations, logits, the allocator's reserve). The reference model does not: ms-swift 3.x builds
    it first (rlhf_mixin.py / dpo_trainer.py ``setup_model_and_optimizer``: ``get_model(..., wrap_with_ddp=False)``
    before ``super().setup_model_and_optimizer``). What is left over is the term; 0 without the distributed
    optimizer (no parameter buffer)."""
    if not args.get('use_distributed_optimizer', True):
        return 0.0
    grad_b = DTYPE_BYTES.get(str(args.get('main_grads_dtype') or 'fp32'), 4)
    freed = 2 * state['grads'] / grad_b
    return max(0.0, freed - state['optimizer'] - transient)


def moe_layer_bytes(a: Arch, tokens: float) -> float:
    """Bytes one MoE layer keeps for its backward beyond the dense-layer formula, for ``tokens`` tokens on the rank:
    the router's fp32 logits and probabilities (tokens x experts; megatron/core/transformer/moe/router.py, with
    ms-swift's ``moe_router_dtype`` fp32 default), and per routed copy of a token (top-k of them, an even load
    assumed): the received hidden states (the grouped fc1's input) and the expert output the unpermute weights by
    the probabilities (h each, bf16), the fc1 output (2 x moe_intermediate, SwiGLU) and its activation
    (moe_intermediate) (megatron/core/transformer/moe/token_dispatcher.py ``MoEAlltoAllTokenDispatcher``,
    experts.py ``TEGroupedMLP``). A shared expert is a dense MLP of shared_expert_intermediate. ``layer_bytes``
    counts no dense MLP for an MoE layer. 0 for a dense model."""
    if not a.experts:
        return 0.0
    k = max(1, a.experts_per_token)
    routed = tokens * k * 2 * (2 * a.hidden + 3 * a.moe_intermediate)
    router = tokens * a.experts * 4 * 2
    shared = tokens * 2 * 3 * a.shared_expert_intermediate
    return routed + router + shared


def layer_bytes(a: Arch, tp: int, sp: bool, flash: bool, s: float, saved: str = 'all') -> dict[str, float]:
    """Bytes per token one decoder layer keeps for its backward (megatron-core 0.19, bf16, dropout 0 as ms-swift
    runs Qwen and Llama), by what keeps them, and the unfused core attention's backward transient:

    - each RMSNorm its input and its output, the next linear's input: 4h per norm, 8h per layer, replicated by TP
      unless sequence parallelism splits them;
    - attention, per TP rank: with a flash/fused kernel the rotated q, k and v it saves and its output (the
      projection's input), 4q + 4kv, and its fp32 log-sum-exp (4 per head); the local (unfused) path
      (transformer/dot_product_attention.py) repeats K and V to the query heads before ``baddbmm`` (q, k and v at q
      each, with the output 8q) and keeps, per query position, the fp32 softmax output (fusions/fused_softmax.py
      ``forward_torch_softmax``: the scores cast to fp32 when ``attention_softmax_in_fp32``) and its bf16 copy
      that the probabilities' ``bmm`` saves, 6 x heads x s;
    - the gated MLP (transformer/mlp.py ``glu``): fc1's output (gate and up, 4I), silu's output (2I) and the
      product, fc2's input (2I): 8I per TP rank; an MoE layer's experts are ``moe_layer_bytes``.

    ``saved``: 'all' (no recompute), 'selective' (the core attention recomputed: its inputs and output stay, its
    scores do not). ``backward``: the unfused path's transient in the core attention's backward, the gradient of
    the probabilities in bf16 and fp32 and the softmax's fp32 gradient (10 x heads x s per token per TP rank), 0
    with a flash kernel."""
    h, q, kv, heads = a.hidden, a.q_dim, a.kv_dim, a.heads
    rep = 1 / tp if sp else 1.0
    unfused = not flash and saved == 'all'
    attn = (8 * q + 6 * heads * s) / tp if unfused else (4 * q + 4 * kv + (4 * heads if flash else 0)) / tp
    mlp = 0.0 if a.experts else 8 * a.token_mlp_width / tp
    return {
        'norms': 8 * h * rep,
        'attention': attn,
        'mlp': mlp,
        'backward': 0.0 if flash else 10 * heads * s / tp,
    }


def _kept(layer: dict[str, float]) -> float:
    """What a ``layer_bytes`` row keeps until its backward (its transient aside)."""
    return layer['norms'] + layer['attention'] + layer['mlp']


def activations(
    args: dict, a: Arch, par: dict, seq: int, num_microbatches: int, logit_bytes: float = LOGIT_BYTES
) -> dict[str, float]:
    """Bytes of activations on the first stage (layers in flight) and logits on the last (``layer_bytes``;
    ``logit_bytes`` per vocabulary element: GRPO's log-softmax, ``LOGIT_BYTES``, or ``CE_LOGIT_BYTES``)."""
    tp, pp, cp = par['tp'], par['pp'], par['cp']
    sp = par['sequence_parallel']
    mbs = int(args.get('micro_batch_size') or 1)
    if args.get('padding_free', True):
        s, b = mbs * seq / cp, 1
    else:
        s, b = seq / cp, mbs
    h = a.hidden
    gran = args.get('recompute_granularity')
    gran = None if gran in (None, 'none') else gran
    flash = str(args.get('attention_backend') or 'flash') in FLASH_BACKENDS
    full_layer = layer_bytes(a, tp, sp, flash, s)
    one_layer = s * b * _kept(full_layer)
    moe = moe_layer_bytes(a, s * b / (tp if sp else 1))
    if gran == 'full':
        # each layer keeps its input; during backward one layer at a time is recomputed (recompute_num_layers of
        # them under 'uniform' keep their inputs) and its backward runs
        per_layer = s * b * h * 2 / (tp if sp else 1)
        nrec = args.get('recompute_num_layers') or 1
        layer_peak = one_layer + moe + per_layer * max(0, nrec - 1)
    else:
        per_layer = (s * b * _kept(layer_bytes(a, tp, sp, flash, s, 'selective')) if gran else one_layer) + moe
        layer_peak = 0.0
    layer_peak += s * b * full_layer['backward']
    stages = stage_layers(args, a.layers, pp)
    layers = stages[0]
    in_flight = min(pp, max(1, num_microbatches)) if pp > 1 else 1
    if par.get('vpp') and pp > 1:
        in_flight *= 1 + (pp - 1) / (pp * par['vpp'])  # interleaved 1F1B: the first stage's extra warm-up
    logits = s * b * a.vocab / tp * logit_bytes * FRAGMENTATION
    if pp == 1:
        # the loss's backward ends, and its logits buffers are freed, before any layer's backward (or recompute)
        # begins: the stage's peak is its saved activations plus the larger of the two
        first = (per_layer * layers + max(0.0, layer_peak - logits / FRAGMENTATION)) * FRAGMENTATION
        return {'activations': first, 'logits': logits}
    first = (per_layer * layers * in_flight + layer_peak) * FRAGMENTATION
    # PP > 1: the first stage holds the most micro-batches in flight, the last one micro-batch and the logits;
    # the heavier of the two is the GPU to plan for
    last = (per_layer * stages[-1] + max(0.0, layer_peak - logits / FRAGMENTATION)) * FRAGMENTATION
    return {'activations': first, 'logits': 0.0} if first >= last + logits else {'activations': last, 'logits': logits}


def allocator_reserve(args: dict, a: Arch, par: dict, seq: int, allocator: str = 'default') -> float:
    """What the caching allocator reserves beyond the allocated peak: memory/reserve.py's ``RESERVE_PER_BLOCK`` (from
    its allocator simulator, one number per setting) times the step's largest transient block, here one
    micro-batch's fp32 logits on the last stage (s x V/TP x 4 bytes; swift/megatron/trainers/vocab_parallel_utils.py
    and Megatron-LM's vocab-parallel cross entropy upcast them)."""
    from ...memory.reserve import RESERVE_PER_BLOCK

    mbs = int(args.get('micro_batch_size') or 1)
    tokens = mbs * seq / (par.get('cp') or 1)
    return RESERVE_PER_BLOCK[allocator] * tokens * a.vocab / (par.get('tp') or 1) * 4


def train_step_terms(
    a: Arch,
    tp: int,
    pp: int,
    dp: int,
    micro_batch: int,
    seq: int,
    recompute: str | None,
    attention_backend: str = 'flash',
    allocator: str = 'default',
) -> dict[str, float]:
    """Bytes per GPU of one full-parameter Megatron-core training step with no reference model and no vLLM: the
    terms ``estimate`` plans for the train phase (``megatron_state``, ``activations``, ``allocator_reserve``),
    taken for exactly these inputs (bf16, the distributed optimizer, Adam, no padding-free packing: ``micro_batch``
    sequences of ``seq`` tokens; ``recompute``: None, 'selective' or 'full' with one uniform layer). For the GPU
    bench (bench/bench_megatron_gpu.py), which measures the same terms on a bare GPTModel."""
    args = {
        'tuner_type': 'full',
        'micro_batch_size': micro_batch,
        'padding_free': False,
        'recompute_granularity': recompute,
        'recompute_method': 'uniform' if recompute == 'full' else None,
        'recompute_num_layers': 1 if recompute == 'full' else None,
        'attention_backend': attention_backend,
        'use_distributed_optimizer': True,
    }
    par = {'tp': tp, 'pp': pp, 'cp': 1, 'ep': 1, 'etp': 1, 'dp': dp, 'expert_dp': dp, 'sequence_parallel': False}
    state = megatron_state(args, a, par)
    act = activations(args, a, par, seq, 1, CE_LOGIT_BYTES)
    return {
        'params': rank_params(a, tp, pp, 1, 1, args)['dense'],
        'weights': state['weights'],
        'grads': state['grads'],
        'optimizer': state['optimizer'],
        'activations': act['activations'],
        'logits': act['logits'],
        'allocator_reserve': allocator_reserve(args, a, par, seq, allocator),
        'cuda_context': state['cuda_context'],
    }


def vllm_engine(
    args: dict,
    a: Arch,
    capacity_gib: float,
    gpu_name: str | None,
    max_num_seqs: int,
    vllm_version: str | None = None,
    prompt_len: int | None = None,
) -> tuple[GRPOConfig, Inputs, dict]:
    """One colocated engine shard (memory/vllm.py) with ms-swift's Megatron engine settings: (the engine's settings
    as a GRPOConfig, the Inputs, vllm_terms)."""
    import json

    kwargs = args.get('vllm_engine_kwargs')
    cfg = replace(
        GRPOConfig(),
        vllm_mode='colocate',
        use_vllm=True,
        vllm_tensor_parallel_size=int(args.get('vllm_tensor_parallel_size') or 1),
        vllm_gpu_memory_utilization=float(args.get('vllm_gpu_memory_utilization') or 0.9),
        vllm_max_model_len=args.get('vllm_max_model_len'),
        vllm_max_num_seqs=max_num_seqs,
        vllm_enforce_eager=bool(args.get('vllm_enforce_eager')),
        vllm_engine_kwargs=json.dumps(kwargs) if isinstance(kwargs, dict) else kwargs,
        max_completion_length=int(args.get('max_completion_length') or 512),
    )
    inp = Inputs(arch=a, capacity_gib=capacity_gib, gpu_name=gpu_name, vllm_version=vllm_version, prompt_len=prompt_len)
    return cfg, inp, vllm_terms(cfg, inp)


def sequence_length(args: dict, a: Arch, prompt_len: int | None = None) -> tuple[int, int]:
    """(prompt tokens, training sequence tokens) to plan for, as plan.prompt_bound bounds a prompt: at most
    max_length (ms-swift truncates longer prompts, left for GRPO), at most vllm_max_model_len - max_completion_length
    (swift/infer_engine/infer_engine.py ``set_default_max_tokens``), at most ``prompt_len`` when the data's longest
    prompt is known; the sequence is the prompt plus max_completion_length, within vLLM's max_model_len (else the
    model context)."""
    c = int(args.get('max_completion_length') or 512)
    mml = args.get('vllm_max_model_len')
    bounds = [b for b in (args.get('max_length'), (mml - c) if mml else None, prompt_len) if b]
    prompt = max(1, min(bounds) if bounds else a.context_len - c)
    return prompt, min(prompt + c, mml or max(a.context_len, prompt + c))


def _largest(terms: dict, n: int = 3) -> list:
    """The n largest (name, bytes) terms of a phase."""
    return sorted(terms.items(), key=lambda x: -x[1])[:n]


def estimate(
    args: dict,
    a: Arch,
    plan: dict,
    capacity_gib: float,
    gpu_name: str | None = None,
    vllm_version: str | None = None,
    prompt_len: int | None = None,
    allocator: str = 'default',
    release: str | None = None,
) -> dict:
    """{'phases': {phase: GiB}, 'terms': {phase: {term: GiB}}, 'peak_phase', 'peak_gib', 'capacity_gib',
    'vllm': {...}, 'problems': [...]} for one GPU. ``allocator``: 'default' or 'expandable' (the caching allocator
    setting of the launch, memory/reserve.py ``allocator_kind``); ``release``: the ms-swift release that runs it
    (None: the newest; a 3.x release keeps the policy's pre-DDP storage cached, ``keeps_freed_param_storage``)."""
    par = {
        **plan['parallel'],
        'world_size': plan['world_size'],
        'expert_dp': plan['expert_dp'],
        'sequence_parallel': plan['sequence_parallel'],
    }
    state = megatron_state(args, a, par)
    prompt, seq = sequence_length(args, a, prompt_len)
    act = activations(args, a, par, seq, plan.get('num_microbatches') or 1)
    act['allocator_reserve'] = allocator_reserve(args, a, par, seq, allocator)
    if keeps_freed_param_storage(args, release):
        act['freed_params'] = freed_param_storage(args, state, sum(act.values()))
    cap = capacity_gib * GiB
    colocate = args.get('vllm_mode') == 'colocate'
    off_model, off_opt = bool(args.get('offload_model')), bool(args.get('offload_optimizer'))
    sleep = int(args.get('sleep_level') or 0)
    base = {'cuda_context': state['cuda_context'], 'nccl': state['nccl']}
    model = {k: state[k] for k in ('weights', 'grads', 'ref_model')}
    opt = {'optimizer': state['optimizer']}
    problems: list[dict] = []
    terms: dict[str, dict[str, float]] = {}
    vinfo: dict = {}
    if colocate:
        seqs = plan.get('vllm_max_num_seqs') or 1
        vcfg, vinp, v = vllm_engine(args, a, capacity_gib, gpu_name, seqs, vllm_version, prompt)
        vinfo = {k: round(val / GiB, 2) for k, val in v.items()}
        # vLLM's own KV checks (memory/vllm.py vllm_checks): one max_model_len sequence must fit; the completions one
        # engine generates per rollout (generation_batch / engines) against the KV cache
        engines = plan.get('vllm_engines') or 0
        conc = SimpleNamespace(
            rollout_concurrency_per_engine=(plan['generation_batch'] / engines)
            if engines and plan.get('generation_batch')
            else None
        )
        theirs: list[dict] = []
        vinfo.update(vllm_checks(vcfg, conc, vinp, v, float('inf'), theirs))
        problems += [p for p in theirs if p['check'] in ('vllm.kv-one-sequence', 'vllm.kv-concurrency')]
        whole = v['requested'] + v['graphs_outside']
        asleep = v['non_torch'] + v['cuda_graphs'] if sleep else whole
        woken = (v['weights'] + v['rope_cache'] + v['non_torch'] + v['cuda_graphs']) if sleep else whole
        # the engine starts in the trainer's __init__ (grpo_trainer.py: prepare_model, then _init_rollout_engine),
        # before train() builds the optimizer (base.py get_optimizer_and_scheduler): the model, its DDP gradient
        # buffers and the reference model are on the GPU unless offload_model moves them out (offload_context)
        start_state = {**base, **({} if off_model else model)}
        terms['startup'] = {**start_state, 'vllm': whole}
        free = cap - sum(start_state.values())
        vinfo['free_at_start_gib'] = round(free / GiB, 2)
        if v['weights'] > cap:
            problems.append(
                {
                    'check': 'vllm-weights',
                    'phase': 'startup',
                    'message': (
                        f'the model weights alone ({v["weights"] / GiB:.2f} GiB per GPU at vllm_tensor_parallel_size '
                        f'{args.get("vllm_tensor_parallel_size") or 1}) exceed the GPU ({capacity_gib:.2f} GiB)'
                    ),
                }
            )
        elif free < v['requested']:
            problems.append(
                {
                    'check': 'vllm-startup',
                    'phase': 'startup',
                    'message': (
                        f'Free memory on device ({free / GiB:.2f}/{capacity_gib:.2f} GiB) on startup is less than '
                        'desired '
                        f'GPU memory utilization ({args.get("vllm_gpu_memory_utilization")}, '
                        f'{v["requested"] / GiB:.2f} '
                        f'GiB). [vLLM init_device]'
                    ),
                }
            )
        if v['kv_cache'] <= 0:
            problems.append(
                {
                    'check': 'vllm-no-kv',
                    'phase': 'startup',
                    'message': (
                        'No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when '
                        'initializing the engine. [vLLM]'
                    ),
                }
            )
        terms['train'] = {**base, **model, **opt, **act, 'vllm_asleep' if sleep else 'vllm': asleep}
        terms['weight_sync'] = {
            **base,
            **model,
            **opt,
            'vllm_weights' if sleep else 'vllm': woken,
            'export_buffer': 2 * a.largest_layer_params() if not args.get('offload_bridge') else 0.0,
        }
        terms['rollout'] = {**base, **({} if off_model else model), **({} if off_opt else opt), 'vllm': whole}
    else:
        terms['train'] = {**base, **model, **opt, **act}
        # server mode: weights go to the server in SWIFT_UPDATE_WEIGHTS_BUCKET_SIZE (512 MiB) buckets
        terms['weight_sync'] = {**base, **model, **opt, 'bucket': 512 * 2**20}
    phases = {k: sum(t.values()) / GiB for k, t in terms.items()}
    peak_phase = max(phases, key=phases.get)
    for ph, total in phases.items():
        if total * GiB > cap:
            problems.append(
                {
                    'check': 'oom',
                    'phase': ph,
                    'message': (
                        f'{ph}: {total:.1f} GiB per GPU > {capacity_gib:.1f} GiB '
                        f'(largest: {", ".join(f"{k} {v / GiB:.1f}" for k, v in _largest(terms[ph]))})'
                    ),
                }
            )
    return {
        'phases': {k: round(v, 2) for k, v in phases.items()},
        'terms': {k: {kk: round(vv / GiB, 2) for kk, vv in t.items()} for k, t in terms.items()},
        'peak_phase': peak_phase,
        'peak_gib': round(phases[peak_phase], 2),
        'capacity_gib': capacity_gib,
        'prompt_tokens': prompt,
        'sequence_tokens': seq,
        'vllm': vinfo,
        'problems': problems,
    }
