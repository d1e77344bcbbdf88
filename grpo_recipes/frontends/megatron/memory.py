"""Per-GPU memory of a colocated (or server-mode) Megatron-SWIFT GRPO launch, phase by phase.

Megatron state on one GPU (bf16 training, Megatron-LM's distributed optimizer), per parameter held by the rank:
  weights 2 bytes (bf16) + the fp32 gradient buffer 4 bytes (``main_grads_dtype`` fp32; 2 with bf16) + fp32 main
  weights and Adam's two moments 12 bytes / DP -- Megatron-LM's "6 + 12/d" bytes per parameter
  (docs/source/api-guide/dist_optimizer.md; megatron/training/theoretical_memory_usage.py
  ``compute_weight_and_optimizer_memory``: 18 bytes without it, ``6 + 12 / data_parallel_size`` with it).
  The rank's parameters: the embedding on the first stage and the output layer on the last (split by TP), the
  decoder layers split by PP, and their dense weights by TP; routed experts by EP and expert-TP, their optimizer
  states by the expert data-parallel size (megatron/core/parallel_state.py: world / (ETP x EP x PP)).
  ``optimizer_cpu_offload`` keeps ``1 - optimizer_offload_fraction`` of the states on the GPU; the precision-aware
  optimizer stores the moments in ``exp_avg_dtype``/``exp_avg_sq_dtype`` and the main weights in
  ``main_params_dtype``.
Reference model: full tuning builds one (swift/megatron/trainers/rlhf_mixin.py ``prepare_model``: ``tuner_type ==
  'full' and rlhf_type not in ['rm', 'gkd']``) even with beta 0: bf16 weights with the same split.
Activations per transformer layer per micro-batch (Korthikanti et al. 2022, "Reducing Activation Recomputation in
  Large Transformer Models", Table 2; bytes, s tokens, b micro-batch, h hidden, a heads, t TP):
  no recompute: sbh(10 + 24/t + 5as/(ht)), with sequence parallelism sbh(34/t + 5as/(ht));
  selective (core attention) recompute: sbh(10 + 24/t), with sequence parallelism 34sbh/t;
  full recompute: the layer input only, 2sbh (2sbh/t with sequence parallelism).
  Flash/fused attention never stores the a x s x s scores, so the 5as/(ht) term is dropped with them (Table 2's
  selective row is what a flash kernel keeps). Context parallelism divides s. Padding-free packing: b = 1,
  s = micro_batch_size x the sequence length. The first pipeline stage holds min(PP, micro-batches) micro-batches
  in flight under 1F1B (Megatron-LM theoretical_memory_usage.py ``compute_activation_memory``); the last stage holds
  the logits: s x V/t in bf16 plus the fp32 log-softmax and its gradient (swift/megatron/trainers/
  vocab_parallel_utils.py), 10 bytes per element. Fragmentation x1.05 on activations (memory/inputs.py).
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
from ...memory.inputs import CUDA_CONTEXT, FRAGMENTATION, NCCL_PER_GROUP, GiB, Inputs
from ...memory.vllm import vllm_checks, vllm_terms
from .plan import tuner

DTYPE_BYTES = {'fp32': 4, 'fp16': 2, 'bf16': 2, 'fp8': 1}
FLASH_BACKENDS = ('flash', 'fused', 'auto')
LOGIT_BYTES = 2 + 4 + 4
"""bf16 logits, their fp32 log-softmax and its gradient per vocabulary element on the last stage."""


def rank_params(a: Arch, tp: int, pp: int, ep: int, etp: int) -> dict[str, float]:
    """Parameters one rank holds on the heaviest stage: dense (split by TP), experts (split by EP x ETP), the
    embedding/output layer on their stages (split by TP). Norms and biases are counted with the dense part."""
    layers = -(-a.layers // pp)
    h = a.hidden
    expert = a.experts * 3 * h * a.moe_intermediate if a.experts else 0
    dense_layer = a.attention_linear_params() + a.mlp_linear_params() - expert + a.layer_small_params()
    emb = a.vocab * h
    first = emb  # the embedding
    last = (0 if a.tied and pp == 1 else emb) + h  # output layer (tied: shared when PP is 1) + final norm
    edge = first + last if pp == 1 else max(first, last)
    return {
        'dense': layers * dense_layer / tp + edge / tp,
        'expert': layers * expert / (ep * etp),
        'layers_per_stage': layers,
    }


def megatron_state(args: dict, a: Arch, par: dict) -> dict[str, float]:
    """Bytes per GPU of the training model, its gradients, optimizer states and the reference model."""
    tp, pp, ep, etp = par['tp'], par['pp'], par['ep'], par['etp']
    dp, edp = par['dp'] or 1, par['expert_dp'] or 1
    p = rank_params(a, tp, pp, ep, etp)
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
        # layer they wrap (an upper bound: ms-swift does not split A under TP)
        r = int(args.get('lora_rank') or 8)
        targets = args.get('target_modules')
        lora = a.lora_params(r, targets if isinstance(targets, list) else None) / max(1, a.layers)
        trained_dense, trained_expert = lora * p['layers_per_stage'] / tp, 0.0
        weights += 2 * trained_dense
    grads = grad_b * (trained_dense + trained_expert)
    optim = opt_b * (trained_dense / (dp if distributed else 1) + trained_expert / (edp if distributed else 1)) * on_gpu
    ref = 2 * (p['dense'] + p['expert']) if full and args.get('rlhf_type') not in ('rm', 'gkd') else 0.0
    groups = 1 + sum(1 for k in ('tp', 'pp', 'cp', 'ep') if par[k] > 1)
    return {
        'weights': weights,
        'grads': grads,
        'optimizer': optim,
        'ref_model': ref,
        'cuda_context': CUDA_CONTEXT,
        'nccl': groups * NCCL_PER_GROUP,
    }


def activations(args: dict, a: Arch, par: dict, seq: int, num_microbatches: int) -> dict[str, float]:
    """Bytes of activations on the first stage (layers in flight) and logits on the last (Korthikanti Table 2)."""
    tp, pp, cp = par['tp'], par['pp'], par['cp']
    sp = par['sequence_parallel']
    mbs = int(args.get('micro_batch_size') or 1)
    if args.get('padding_free', True):
        s, b = mbs * seq / cp, 1
    else:
        s, b = seq / cp, mbs
    h, heads = a.hidden, a.heads
    gran = args.get('recompute_granularity')
    gran = None if gran in (None, 'none') else gran
    flash = str(args.get('attention_backend') or 'flash') in FLASH_BACKENDS
    scores = 0.0 if flash else 5 * heads * s / (h * tp)
    if gran == 'full':
        per_layer = s * b * h * 2 / (tp if sp else 1)
        nrec = args.get('recompute_num_layers') or 1
        layer_peak = s * b * h * ((34 / tp) if sp else (10 + 24 / tp)) + s * b * h * 2 * max(0, nrec - 1)
    elif gran == 'selective':
        per_layer = s * b * h * ((34 / tp) if sp else (10 + 24 / tp))
        layer_peak = 0.0
    else:
        per_layer = s * b * h * ((34 / tp + scores) if sp else (10 + 24 / tp + scores))
        layer_peak = 0.0
    layers = -(-a.layers // pp)
    in_flight = min(pp, max(1, num_microbatches)) if pp > 1 else 1
    if par.get('vpp') and pp > 1:
        in_flight *= 1 + (pp - 1) / (pp * par['vpp'])  # interleaved 1F1B: the first stage's extra warm-up
    logits = s * b * a.vocab / tp * LOGIT_BYTES * FRAGMENTATION
    first = (per_layer * layers * in_flight + layer_peak) * FRAGMENTATION
    if pp == 1:
        return {'activations': first, 'logits': logits}
    # PP > 1: the first stage holds the most micro-batches in flight, the last one micro-batch and the logits;
    # the heavier of the two is the GPU to plan for
    last = (per_layer * layers + layer_peak) * FRAGMENTATION
    return {'activations': first, 'logits': 0.0} if first >= last + logits else {'activations': last, 'logits': logits}


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
) -> dict:
    """{'phases': {phase: GiB}, 'terms': {phase: {term: GiB}}, 'peak_phase', 'peak_gib', 'capacity_gib',
    'vllm': {...}, 'problems': [...]} for one GPU."""
    par = {
        **plan['parallel'],
        'world_size': plan['world_size'],
        'expert_dp': plan['expert_dp'],
        'sequence_parallel': plan['sequence_parallel'],
    }
    state = megatron_state(args, a, par)
    prompt, seq = sequence_length(args, a, prompt_len)
    act = activations(args, a, par, seq, plan.get('num_microbatches') or 1)
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
