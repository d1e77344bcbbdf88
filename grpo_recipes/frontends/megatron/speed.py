"""Seconds per optimizer step of a Megatron-SWIFT GRPO launch (``megatron rlhf --rlhf_type grpo``), phase by phase, in
the same ``SpeedEstimate`` the ms-swift and TRL launches get (``--json``'s ``speed``; docs/throughput.md).

The terms are speed/model.py's (decode step, prefill, 6N/8N training FLOPs, sleep/wake, the constants' band), laid
out as Megatron runs them:

- training and log-prob FLOPs of a DP rank's sequences are split over its TP x PP GPUs; a pipeline idles for
  (PP - 1) / micro-batches of the step (the pipeline bubble of the 1F1B schedule; (PP - 1) / (VPP x m) interleaved:
  Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21, §2.2);
- tensor parallelism adds two all-reduces of a layer's activations forward and two backward per micro-batch
  (Shoeybi et al., "Megatron-LM", 2019, §3; a third pair when full recomputation repeats the forward);
- ``padding_free`` (ms-swift's default for Megatron GRPO) packs sequences: tokens are the mean prompt + completion,
  not the padded lengths;
- the old policy's log-probs are computed for every batch (swift/megatron/trainers/grpo_trainer.py, ms-swift 4.6: the
  ``old_per_token_logps`` forward has no condition), the reference model's when beta != 0 (default 0.04,
  megatron_args.py ``default_beta``);
- ``recompute_granularity`` full recomputes the forward (8N per token); selective (the default) recomputes only the
  attention core (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", 2022): 6N;
- the distributed optimizer (default on) shards AdamW's states over DP; gradients are reduce-scattered in fp32 and
  the updated 16-bit weights all-gathered (megatron/core/distributed/param_and_grad_buffer.py);
- colocated vLLM: world / vllm_tensor_parallel_size engines share the generation batch; after each rollout the
  weights are gathered from the TP x PP shards and loaded, and vLLM sleeps and wakes at sleep_level 1/2.

Not modelled: MoE all-to-all and routing imbalance, context parallelism's exchange, dynamic sampling, rewards.
"""

from __future__ import annotations

import math

from ...memory.arch import Arch
from ...speed import constants as K
from ...speed.model import FAST, POINT, SLOW, SpeedEstimate, _attn_flops_per_token, _Consts, _decode_step
from ...speed.specs import spec_for
from .plan import tuner


def _lengths(args: dict, a: Arch, data_stats: dict | None, completion_mean: int | None) -> tuple[int, int, int, list]:
    """(prompt mean, completion mean, longest completion, notes)."""
    cap = max(1, int(args.get('max_completion_length') or 512))
    notes = []
    if completion_mean is not None:
        cm = max(1, min(cap, int(completion_mean)))
        notes.append(f'--completion-mean {completion_mean}')
    else:
        cm = max(1, int(cap * K.DEFAULT_COMPLETION_SHARE))
        notes.append(
            f'completions assumed {K.DEFAULT_COMPLETION_SHARE:.0%} of max_completion_length on average '
            '(pass --completion-mean N)'
        )
    if data_stats and data_stats.get('mean'):
        pm = int(round(float(data_stats['mean'])))
        notes.append('prompt lengths from --data-stats (mean)')
    else:
        pm = K.DEFAULT_PROMPT
        notes.append(f'prompts of {pm} tokens assumed (no --data-stats)')
    if args.get('max_length'):
        pm = min(pm, int(args['max_length']))
    return pm, cm, cap, notes


def _one(args: dict, plan: dict, a: Arch, spec, nnodes: int, kv_tokens: int | None, L, c: _Consts):
    par = plan['parallel']
    tp, pp, dp = par['tp'], par['pp'], max(1, par['dp'] or 1)
    mpc = tp * pp * max(1, par.get('cp') or 1)  # the GPUs one DP rank's sequences are split over
    vpp = par.get('vpp') or 1
    world = max(1, plan['world_size'])
    pm, cm, cx = L
    gbs = plan['global_batch']
    spg = max(1, plan.get('steps_per_generation') or 1)
    gen = plan.get('generation_batch') or gbs * spg
    m = max(1, plan.get('num_microbatches') or 1)
    n = a.active_params()
    peak = spec.bf16_tflops * 1e12 * c.mfu
    link = (K.INTERNODE_GBPS if nnodes > 1 else spec.link_gbps) * 1e9
    lora = tuner(args) == 'lora'
    full_recompute = args.get('recompute_granularity') == 'full'
    # training: a DP rank's sequences, packed (padding_free) or padded to the longest prompt + completion
    seq = pm + cm if args.get('padding_free', True) else pm + cx
    tokens = gbs / dp * seq
    attn = _attn_flops_per_token(a, seq)
    if lora:
        per_tok = (6 if full_recompute else 4) * n
    else:
        per_tok = (8 if full_recompute else 6) * n
    bubble = 1 + (pp - 1) / (vpp * m)
    train = tokens * (per_tok + 3 * attn) / mpc / peak * bubble
    if tp > 1:  # 2 all-reduces forward + 2 backward per layer (+2 with full recompute), ring: 2 (t-1)/t x bytes
        ars = (6 if full_recompute else 4) * a.layers / pp
        train += ars * tokens * a.hidden * 2 * 2 * (tp - 1) / tp / (spec.link_gbps * 1e9)
    beta = args.get('beta')
    beta = 0.04 if beta is None else beta
    passes = 1 + (1 if beta != 0 else 0)  # the old policy's, always; the reference's with beta
    mu = max(1, int(args.get('num_iterations') or 1))
    fwd = tokens * (2 * n + attn) / mpc / peak * bubble
    logprobs = passes * fwd / mu
    # optimizer and gradient reduction on one GPU's shard
    trainable = a.lora_params(int(args.get('lora_rank') or 8), args.get('target_modules')) if lora else a.param_count()
    shard = trainable / (tp * pp)
    dist_opt = bool(args.get('use_distributed_optimizer', True))
    optimizer = shard * K.ADAM_BYTES_PER_PARAM / (dp if dist_opt else 1) / (spec.hbm_gbps * 1e9 * c.bw_eff)
    if args.get('offload_optimizer'):
        optimizer += shard * 4 / (dp if dist_opt else 1) / (K.PCIE_GBPS * 1e9)
    grad_reduce = shard * (4 + 2) * (dp - 1) / dp / link if dp > 1 else 0.0
    other = optimizer + grad_reduce
    # rollout: colocated engines share the generation batch
    vtp = max(1, int(args.get('vllm_tensor_parallel_size') or 1))
    colocate = args.get('vllm_mode') == 'colocate'
    engines = max(1, world // vtp) if colocate else max(1, int(args.get('vllm_data_parallel_size') or 1))
    reqs = gen / engines
    conc = min(reqs, plan.get('vllm_max_num_seqs') or reqs)
    if kv_tokens:
        conc = min(conc, max(1, kv_tokens // max(1, pm + cx)))
    conc = max(1.0, conc)
    waves = math.ceil(reqs / conc - 1e-9)
    w = a.weight_bytes()
    eager = K.EAGER_FACTOR if args.get('vllm_enforce_eager') else 1.0
    G = max(1, int(args.get('num_generations') or 8))
    prompts = reqs / G if args.get('vllm_enable_prefix_caching', True) is not False else reqs
    prefill = prompts * pm * (2 * n + _attn_flops_per_token(a, pm)) / vtp / peak
    bulk = (waves - 1) * cm * _decode_step(a, spec, c, w, conc, pm + cm / 2, vtp) * eager
    last = reqs - (waves - 1) * conc
    tail = cx * _decode_step(a, spec, c, w, max(1.0, last * cm / cx), pm + cm / 2, vtp) * eager
    rollout = prefill + bulk + tail
    # weights into vLLM after each rollout: gathered from the TP x PP shards, loaded (a copy), sleep/wake
    w16 = a.weight_bytes(dtype_bytes=2)
    mp = tp * pp
    gather = w16 * (mp - 1) / mp / (spec.link_gbps * 1e9) if mp > 1 else 0.0
    if colocate:
        load = 2 * w16 / vtp / (spec.hbm_gbps * 1e9 * c.bw_eff)
        sleep = 0.0
        level = int(args.get('sleep_level') or 0)
        if level in K.SLEEP_WAKE:
            a0, b = K.SLEEP_WAKE[level]
            sleep = (a0 + b * w16 / vtp / 2**30) * c.sleep
        sync = gather + load + sleep
    else:
        sync = gather + w16 / (K.INTERNODE_GBPS * 1e9)  # to a rollout server (ms-swift's bucketed broadcast)
    per_gen = 1 / (spg * mu)
    phases = {
        'rollout': rollout * per_gen,
        'logprobs': logprobs,
        'train': train,
        'weight_sync': sync * per_gen,
        'other': other,
    }
    detail = {
        'engine': 'vllm',
        'sequences_per_engine': reqs,
        'concurrency': conc,
        'waves': waves,
        'decode_step_ms': round(_decode_step(a, spec, c, w, conc, pm + cm / 2, vtp) * eager * 1e3, 2),
        'prefill': prefill,
        'long_tail': tail,
        'pipeline_bubble': bubble - 1,
        'train_tokens_per_dp_rank': tokens,
        'optimizer': optimizer,
        'grad_reduce': grad_reduce,
        'weight_gather': gather,
        'rollouts_per_optimizer_step': per_gen,
        'steps_per_generation': spg,
    }
    return sum(phases.values()), phases, detail


def predict(launch, hw, model_config: dict | None, plan: dict, mem: dict | None, data_stats=None, completion_mean=None):
    """(SpeedEstimate, None) or (None, why not)."""
    if model_config is None:
        from . import _model_config

        model_config = _model_config(launch, None)[0]
    if model_config is None:
        return None, 'no config.json for the model'
    card = hw.capacity()[0] if hw is not None else None
    spec = spec_for(card)
    if spec is None:
        return None, f'GPU {card or "unknown"} has no throughput spec (pass --gpu-type with a catalogued card)'
    if not plan.get('global_batch') or not plan['parallel'].get('dp'):
        return None, "the launch's batch or parallel layout does not give a step"
    if not launch.args.get('use_vllm'):
        return None, 'Megatron GRPO without vLLM is not modelled'
    try:
        a = Arch.from_config(model_config)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        return None, f'cannot read the architecture ({e!r})'
    args = launch.args
    L = _lengths(args, a, data_stats, completion_mean)
    kv = None
    if mem and (mem.get('vllm') or {}).get('kv_cache'):
        vtp = max(1, int(args.get('vllm_tensor_parallel_size') or 1))
        kv = int(mem['vllm']['kv_cache'] * 2**30 / (a.kv_bytes_per_token(a.dtype_bytes) / vtp))
    nnodes = max(1, int(getattr(launch, 'nnodes', 1) or 1))
    total, phases, detail = _one(args, plan, a, spec, nnodes, kv, L[:3], POINT)
    low = _one(args, plan, a, spec, nnodes, kv, L[:3], FAST)[0]
    high = _one(args, plan, a, spec, nnodes, kv, L[:3], SLOW)[0]
    pm, cm, cx, notes = L
    gbs = plan['global_batch']
    G = max(1, int(args.get('num_generations') or 8))
    est = SpeedEstimate(
        step_seconds=round(total, 2),
        step_seconds_low=round(low, 2),
        step_seconds_high=round(high, 2),
        phases={k: round(v, 3) for k, v in phases.items()},
        detail={k: (round(v, 4) if isinstance(v, float) else v) for k, v in detail.items()},
        completion_tokens_assumed={'mean': cm, 'max': cx},
        prompt_tokens_assumed={'mean': pm, 'padded': pm},
        gpus=max(1, plan['world_size']),
        tokens_per_second=round(gbs * cm / total, 1) if total else 0.0,
        seconds_per_prompt=round(total / (gbs / G), 3),
        assumptions=notes + ([] if kv else ["vLLM's KV cache not known: the rollout is counted in one wave"]),
    )
    rows = data_stats.get('count') if data_stats else None
    if rows:
        steps = rows / (gbs / G) * max(1, int(args.get('num_iterations') or 1))
        est.hours_per_epoch = round(steps * total / 3600, 2)
        est.gpu_hours_per_epoch = round(steps * total * est.gpus / 3600, 1)
    return est, None
