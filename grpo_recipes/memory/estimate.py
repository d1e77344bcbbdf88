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
Server mode plans the rollout GPUs on their own; without vLLM, HF generate's KV cache is added (and under ZeRO-3 with
``ds3_gather_for_generation`` the whole gathered model, ``trainer.zero3_generation_gather``).
"""

from __future__ import annotations

from dataclasses import replace

from ..config import GRPOConfig
from ..plan import Plan, prompt_bound
from .inputs import CUDA_CONTEXT, FRAGMENTATION, NCCL_PER_GROUP, GiB, GPUMemory, Inputs, _g
from .replay import replay_key
from .reserve import CARRIED, DEVICE_CONTEXT, STEP_TERMS, carried, quantities, reserve_bytes
from .trainer import logits_rows, reserve_inputs, trainer_terms
from .vllm import vllm_checks, vllm_terms


def estimate(cfg: GRPOConfig, plan: Plan, inp: Inputs) -> list[GPUMemory]:
    """Per-GPU memory of a launch, phase by phase: each training process's GPU (the trainer's terms, with the
    colocated vLLM engine or HF generation), then each rollout server GPU in server mode."""
    a = inp.arch
    cap = inp.capacity_gib
    ctx_len = a.context_len
    if inp.prompt_len is None:  # a copy: the caller's Inputs stay as given
        inp = replace(inp, prompt_len=prompt_bound(cfg, ctx_len, vllm=False, leave_room=False).tokens)
    tr = trainer_terms(cfg, plan, inp, fragmentation=FRAGMENTATION if inp.alloc is None else 1.0)
    if inp.alloc is not None:  # the caching allocator's reserve and the measured CUDA context (reserve.py)
        replayed = inp.replayed[1] if inp.replayed and inp.replayed[0] == replay_key(cfg, inp) else None
        tr.update(
            allocator_reserve=replayed
            if replayed is not None
            else reserve_bytes(cfg, a, inp.alloc, reserve_inputs(cfg, plan, inp), logits_rows(cfg, inp)),
            cuda_context=DEVICE_CONTEXT,
        )
    out: list[GPUMemory] = []
    train_ids = [str(p['gpu']) if p['gpu'] is not None else f'rank{p["local_rank"]}' for p in plan.processes]

    resident_keys = ['weights', 'lora_params', 'grads+optimizer', 'ref_model', 'cuda_context', 'nccl']
    dynamic_keys = list(STEP_TERMS)

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

    colocate = cfg.rollout_mode == 'colocate'
    server = cfg.rollout_mode == 'server'
    components = {k: _g(v) for k, v in tr.items() if v}
    parts: dict[str, dict[str, float]] = {}
    problems: list[dict] = []
    vinfo: dict = {}

    train_parts = {**resident(), **{k: tr[k] for k in dynamic_keys if tr.get(k)}}
    if inp.sft:
        parts['train'] = train_parts
    elif colocate:
        v = vllm_terms(cfg, inp, plan)
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
        sync_vllm = (
            {'vllm_reserved': v['requested'], 'vllm_cuda_graphs': v['graphs_outside']}
            if sleep == 0
            else {'vllm_weights': v['weights'], 'vllm_cuda_graphs': v['cuda_graphs'], 'vllm_non_torch': v['non_torch']}
        )
        h = inp.handover
        gather = {'zero3_sync_gather': tr['zero3_sync_gather']} if tr.get('zero3_sync_gather') else {}
        # offload_model/offload_optimizer run after the sync from ms-swift 3.6 on (offload_context around the
        # rollout): the sync sees the trainer's whole resident state
        at_sync = off if h is None or h.offload_before_sync else resident()
        parts['sync'] = {**at_sync, **gather, **sync_vllm}
        if h is not None:
            keep_sync, keep_rollout = _carries(cfg, h)
            if keep_sync:
                parts['sync'][CARRIED] = carried(train_parts, gather.get('zero3_sync_gather', 0.0))
            if keep_rollout:
                parts['rollout'][CARRIED] = carried(train_parts, 0.0)
            if keep_sync or keep_rollout:
                components[CARRIED] = _g(carried(train_parts, 0.0))
        residue = (
            {'vllm_reserved': v['requested'], 'vllm_cuda_graphs': v['graphs_outside']}
            if sleep == 0
            else {'vllm_cuda_graphs': v['cuda_graphs'], 'vllm_non_torch': v['non_torch']}
        )
        parts['train'] = {**train_parts, **residue}
        vinfo = vllm_checks(cfg, plan, inp, v, cap * GiB - sum(at_start.values()), problems)
        if vinfo.get('kv_accounting') == 'device':  # V1 before 0.9.1: util x total holds the trainer too (vllm_engine)
            for terms in parts.values():
                if 'vllm_reserved' in terms:
                    terms['vllm_reserved'] = max(0.0, v['requested'] - sum(at_start.values()))
    elif server:
        parts['train'] = train_parts
    else:
        # HF generate: KV cache for bs sequences of prompt + completion, full model on each rank
        gen_kv = (
            cfg.per_device_train_batch_size * (inp.prompt_len + cfg.max_completion_length) * a.kv_bytes_per_token(2)
        )
        components['hf_generate_kv'] = _g(gen_kv)
        parts['generate'] = {
            **resident(),
            'hf_generate_kv': gen_kv,
            **({'zero3_generation_gather': tr['zero3_generation_gather']} if tr.get('zero3_generation_gather') else {}),
        }
        h = inp.handover
        if h is not None and not h.empty_before_generate:  # generation's requests take the step's cached blocks first
            kept = carried(train_parts, gen_kv + tr.get('zero3_generation_gather', 0.0))
            if kept:
                parts['generate'][CARRIED] = kept
                components[CARRIED] = _g(carried(train_parts, 0.0))
        parts['train'] = train_parts
    role = 'train' if inp.sft else ('train+vllm' if colocate else ('train' if server else 'train+hf-generate'))
    for gid in train_ids:
        out.append(
            _finish(
                GPUMemory(
                    gpu=gid,
                    role=role,
                    capacity_gib=cap,
                    components=dict(components),
                    vllm=dict(vinfo),
                    problems=list(problems),
                ),
                parts,
                modelled=inp.alloc is not None,
            )
        )
    if server and not inp.sft:
        out += _rollout_gpus(cfg, plan, inp)
    return out


def _carries(cfg: GRPOConfig, h) -> tuple[bool, bool]:
    """(the sync, the rollout) start with the train step's cached blocks still reserved, by what the framework runs
    between the phases at its release (``framework.Handover``): an ``empty_cache()`` before the weights wake (only
    with the engine asleep), before the KV cache wakes, or in the offload of the settings that empty it."""
    asleep = cfg.effective_sleep_level > 0
    offloads = [k for k in ('offload_model', 'offload_optimizer') if getattr(cfg, k)]
    emptied_by_offload = any(k in h.offload_empties for k in offloads)
    sync = not (asleep and h.empty_before_sync) and not (h.offload_before_sync and emptied_by_offload)
    rollout = sync and not (asleep and h.empty_before_rollout) and not emptied_by_offload
    return sync, rollout


# Server GPUs whose ids are not known get a row each up to this many (a node's GPUs and more); past it, one row
# stands for all of them, as their rows are alike (a TP x DP of 10^9 must not build 10^9 rows).
UNNAMED_ROWS = 64


def _rollout_gpus(cfg: GRPOConfig, plan: Plan, inp: Inputs) -> list[GPUMemory]:
    """Server mode: each rollout server GPU (its vLLM engine, CUDA context and NCCL), by its id (another
    machine's marked ``remote:``; unknown ids as ``rolloutN``)."""
    cap = inp.capacity_gib
    out: list[GPUMemory] = []
    v = vllm_terms(cfg, inp, plan)
    rprob: list[dict] = []
    nccl = NCCL_PER_GROUP * (2 if cfg.vllm_tensor_parallel_size > 1 else 1)
    rinfo = vllm_checks(cfg, plan, inp, v, cap * GiB - CUDA_CONTEXT - nccl, rprob)
    comps = {f'vllm_{k}': _g(x) for k, x in v.items() if k not in ('requested', 'graphs_outside')}
    comps.update(vllm_reserved=_g(v['requested']), cuda_context=_g(CUDA_CONTEXT), nccl=_g(nccl))
    rparts = {
        'rollout': {
            'vllm_reserved': v['requested'],
            'vllm_cuda_graphs': v['graphs_outside'],
            'cuda_context': CUDA_CONTEXT,
            'nccl': nccl,
        }
    }
    where = 'remote:' if plan.rollout_remote else ''  # another machine's GPU ids
    n = max(1, cfg.vllm_tensor_parallel_size * cfg.vllm_data_parallel_size)
    rids = [f'{where}{i}' for i in (plan.rollout_gpus or [])] or (
        [f'rollout{i}' for i in range(n)] if n <= UNNAMED_ROWS else [f'rollout0-{n - 1}']  # rows alike: one
    )
    for gid in rids:
        out.append(
            _finish(
                GPUMemory(
                    gpu=gid,
                    role='rollout',
                    capacity_gib=cap,
                    components=dict(comps),
                    vllm=dict(rinfo),
                    problems=list(rprob),
                ),
                rparts,
            )
        )
    return out


def _finish(m: GPUMemory, parts: dict[str, dict[str, float]], modelled: bool | None = None) -> GPUMemory:
    phases = {k: sum(v.values()) for k, v in parts.items()}
    m.phases = {k: _g(v) for k, v in phases.items()}
    m.phase_parts = {k: {t: _g(x) for t, x in v.items() if x} for k, v in parts.items()}
    # a tie (the rollout of an awake engine holds the train step's cached blocks: the same bytes) is the train phase's
    m.phase = max(phases, key=lambda k: (round(phases[k] / 2**20), k == 'train'))
    m.phase_terms = {k: _g(v) for k, v in sorted(parts[m.phase].items(), key=lambda kv: -kv[1])}
    peak = phases[m.phase]
    m.total_gib = _g(peak)
    m.quantities = quantities(parts[m.phase], peak, modelled)
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
