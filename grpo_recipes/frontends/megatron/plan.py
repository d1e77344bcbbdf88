"""Processes, parallel layout and batches of a Megatron GRPO launch, derived as ms-swift and Megatron-LM derive them.

- world = NPROC_PER_NODE x NNODES (torchrun, started by swift/cli/main.py when either is set; one process otherwise);
- DP = world // (TP x PP x CP) (swift/megatron/arguments/megatron_args.py ``_init_distributed``; EP and expert-TP
  re-partition the same ranks for the experts and do not change DP: megatron/core/parallel_state.py);
- micro-batches per optimizer step = global_batch_size // (micro_batch_size x DP) (megatron/core/
  num_microbatches_calculator.py; grpo_trainer.py ``num_mini_batch``);
- generation_batch_size / steps_per_generation: ``RLHFMegatronArgumentsMixin.resolve_generation_batch_size``
  (steps_per_generation 1 when neither is set), in completions;
- prompts per rollout = generation_batch_size // num_generations, per DP rank // DP
  (``validate_batch_dp_alignment``); a colocated engine's max_num_seqs = vllm_max_num_seqs or
  (generation_batch_size // world) x vllm_tensor_parallel_size (rollout_mixin.py ``_prepare_vllm_engine``).
"""

from __future__ import annotations

from .reader import MegatronLaunch


def _pos(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def tuner(args: dict) -> str:
    """The tuner ms-swift trains with: tuner_type (3.x train_type), switched from full to lora when adapters are given
    (MegatronArguments.__post_init__: "Setting args.tuner_type: lora")."""
    t = args.get('tuner_type') or args.get('train_type') or 'full'
    if t == 'full' and (
        args.get('adapters')
        or args.get('ref_adapters')
        or args.get('mcore_adapter')
        or args.get('mcore_ref_adapter')
        or args.get('adapter_load')
        or args.get('ref_adapter_load')
    ):
        return 'lora'
    return t


def parallel(launch: MegatronLaunch) -> dict:
    a = launch.args
    tp = _pos(a.get('tensor_model_parallel_size')) or 1
    pp = _pos(a.get('pipeline_model_parallel_size')) or 1
    cp = _pos(a.get('context_parallel_size')) or 1
    ep = _pos(a.get('expert_model_parallel_size')) or 1
    etp = _pos(a.get('expert_tensor_parallel_size')) or 1
    world = launch.world_size
    model = tp * pp * cp
    vpp = a.get('virtual_pipeline_model_parallel_size')
    vpp = None if vpp in (None, 1) else vpp  # _init_vpp_size: 1 means none
    return {
        'world_size': world,
        'tp': tp,
        'pp': pp,
        'cp': cp,
        'ep': ep,
        'etp': etp,
        'vpp': vpp,
        'dp': world // model if world % model == 0 else None,
        'expert_dp': world // (etp * ep * pp) if world % (etp * ep * pp) == 0 else None,
        'sequence_parallel': bool(a.get('sequence_parallel')) and tp > 1,
    }


def resolve_generation(
    gbs: int | None, spg: int | None, global_batch: int
) -> tuple[int | None, int | None, str | None]:
    """RLHFMegatronArgumentsMixin.resolve_generation_batch_size without the num_generations check:
    (generation_batch_size, steps_per_generation, the ValueError's message or None)."""
    if gbs is None and spg is None:
        return global_batch, 1, None
    if gbs is not None and spg is not None:
        expected = global_batch * spg
        if gbs != expected:
            return (
                None,
                None,
                (
                    f'generation_batch_size ({gbs}) must equal global_batch_size ({global_batch}) * '
                    f'steps_per_generation ({spg}) = {expected}.'
                ),
            )
        return gbs, spg, None
    if gbs is not None:
        if global_batch <= 0 or gbs % global_batch != 0:
            return (
                None,
                None,
                (f'generation_batch_size ({gbs}) must be divisible by global_batch_size ({global_batch})'),
            )
        return gbs, gbs // global_batch, None
    return global_batch * spg, spg, None


def plan(launch: MegatronLaunch) -> dict:
    """The plan as a dict (``--json``'s ``plan``); None where ms-swift would stop before it is known."""
    a = launch.args
    par = parallel(launch)
    mbs = a.get('micro_batch_size')
    gbs_global = a.get('global_batch_size')
    ng = a.get('num_generations')
    dp = par['dp']
    gen, spg, _ = (
        resolve_generation(a.get('generation_batch_size'), a.get('steps_per_generation'), gbs_global)
        if _pos(gbs_global)
        else (None, None, None)
    )
    out = {
        'framework': 'megatron',
        'world_size': par['world_size'],
        'nproc_per_node': launch.nproc_per_node,
        'nnodes': launch.nnodes,
        'parallel': {k: par[k] for k in ('tp', 'pp', 'cp', 'ep', 'etp', 'dp', 'vpp')},
        'expert_dp': par['expert_dp'],
        'sequence_parallel': par['sequence_parallel'],
        'global_batch': gbs_global,
        'micro_batch': mbs,
        'num_microbatches': None,
        'steps_per_generation': spg,
        'generation_batch': gen,
        'num_generations': ng,
        'prompts_per_rollout': None,
        'prompts_per_rollout_per_dp_rank': None,
        'prompts_per_optimizer_step': None,
        'per_device_generation_batch': None,
        'vllm_mode': a.get('vllm_mode'),
        'vllm_engines': None,
        'vllm_max_num_seqs': None,
    }
    if dp and _pos(mbs) and _pos(gbs_global) and gbs_global % (mbs * dp) == 0:
        out['num_microbatches'] = gbs_global // (mbs * dp)
    if _pos(ng) and _pos(gbs_global):
        out['prompts_per_optimizer_step'] = gbs_global / ng if gbs_global % ng else gbs_global // ng
    if gen and _pos(ng):
        out['prompts_per_rollout'] = gen // ng
        if dp:
            out['prompts_per_rollout_per_dp_rank'] = (gen // ng) // dp
    if gen and par['world_size']:
        out['per_device_generation_batch'] = gen // par['world_size']
    vtp = _pos(a.get('vllm_tensor_parallel_size')) or 1
    if a.get('vllm_mode') == 'colocate':
        out['vllm_engines'] = par['world_size'] // vtp if par['world_size'] % vtp == 0 else None
        per_dev = out['per_device_generation_batch'] if out['per_device_generation_batch'] is not None else mbs
        out['vllm_max_num_seqs'] = a.get('vllm_max_num_seqs') or ((per_dev or 0) * vtp or None)
    return out
