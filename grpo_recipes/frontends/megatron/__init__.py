"""Megatron-SWIFT GRPO: ``megatron rlhf --rlhf_type grpo ...`` (ms-swift 3.11+ and 4.x).

read(argv, env, source)          -> MegatronLaunch   (reader.py; the release's snapshot in snapshot.py)
check(launch, hw, model=None)    -> (findings, plan dict, memory per phase)

argfields.py  a Megatron argument dataclass's fields from a release's source, with ast (the snapshot writer)
snapshot.py   which snapshot judges a release; 3.x names renamed in 4.0
reader.py     argv / YAML / JSON (+ ENV) as ms-swift's megatron CLI and HfArgumentParser read them
plan.py       world, TP/PP/CP/EP/ETP/DP, micro-batches, generation batch, prompts per rollout and per step
rules.py      ms-swift's and Megatron-LM's checks, the late failures moved before launch, layout checks
memory.py     per-GPU memory phase by phase (Megatron state, activations, the colocated vLLM engine)
"""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import GuardError
from ...findings import ERROR, INFO, SEVERITY_ORDER, WARNING, Finding
from ...versions import version_tuple
from . import memory as _memory
from . import rules as _rules
from .plan import plan as _plan
from .reader import MegatronLaunch
from .reader import read as _read

__all__ = ['MegatronLaunch', 'check', 'read']


def read(
    argv: list[str], env: Mapping[str, str] | None = None, source: str = 'command line', release: str | None = None
) -> MegatronLaunch:
    """``megatron rlhf ...`` (the whole command, or what follows ``megatron rlhf``) -> MegatronLaunch."""
    return _read(argv, env, source, release)


def _model_config(launch: MegatronLaunch, model: dict | None) -> tuple[dict | None, str | None]:
    if model is not None:
        return model, None
    name = launch.args.get('model')
    if not name:
        return None, '--model is not set'
    from ...models import load_model_config

    try:
        return load_model_config(name), None
    except GuardError as e:
        return None, str(e)


def _vllm_version_findings(launch: MegatronLaunch, vllm_version: str | None) -> list[Finding]:
    """MegatronGRPOTrainer.__init__ (swift/megatron/trainers/grpo_trainer.py, since ms-swift 3.11): rollout
    importance sampling needs vLLM >= 0.10.2 (its processed logprobs); raised when the trainer starts, after the
    model has loaded. Only judged when the vLLM version is known."""
    v = version_tuple(vllm_version)
    if launch.args.get('rollout_importance_sampling_mode') is None or v is None or v >= (0, 10, 2):
        return []
    return [
        _rules._f(
            ERROR,
            'megatron.not-supported',
            ['rollout_importance_sampling_mode'],
            'rollout_importance_sampling_mode is not supported in vLLM version < 0.10.2, please update vLLM to '
            f'0.10.2 or later. -- raised when the trainer starts, after the model has loaded (vLLM {vllm_version})',
            'install vllm>=0.10.2, or drop --rollout_importance_sampling_mode',
            'swift/megatron/trainers/grpo_trainer.py',
        )
    ]


def check(
    launch: MegatronLaunch,
    hw=None,
    model: dict | None = None,
    vllm_version: str | None = None,
    prompt_len: int | None = None,
) -> tuple[list[Finding], dict, dict | None]:
    """(findings sorted errors first, the plan dict, memory per phase for one GPU or None when the model's
    config.json or the GPU's capacity is not known). ``hw`` is a hardware.Hardware (or None); ``model`` the
    model's config.json as a dict (default: looked up like the other readers, models.load_model_config);
    ``prompt_len`` the data's longest prompt when known (``--data-stats``), else prompts are planned at their bound."""
    plan = _plan(launch)
    cfg, why = _model_config(launch, model)
    findings = _rules.run(launch, plan, cfg, hw)
    findings += _vllm_version_findings(launch, vllm_version)
    mem = None
    if cfg is None:
        findings.append(
            _rules._f(
                INFO,
                'megatron.model-unavailable',
                ['model'],
                f'no config.json for the model ({why}): layout checks and memory skipped',
            )
        )
    cap = hw.capacity() if hw is not None else (None, None)
    blocking = any(
        f.severity == ERROR and f.rule in ('megatron.world-divisible', 'megatron.rlhf-type', 'megatron.vllm-required')
        for f in findings
    )
    if cfg is not None and cap[1] and not blocking and plan['parallel']['dp']:
        from ...memory.arch import Arch

        mem = _memory.estimate(
            launch.args,
            Arch.from_config(cfg),
            plan,
            cap[1],
            cap[0],
            vllm_version,
            prompt_len,
            _allocator(launch),
            launch.release,
        )
        short = _long_prompts_only(launch, cfg, plan, cap, vllm_version, prompt_len, mem)
        for p in mem['problems']:
            if short is not None and p['check'] == 'oom' and p['phase'] in short[0]:
                findings.append(_long_prompts_finding(p, short[1]))
                continue
            rid = {
                'vllm-startup': 'megatron.vllm-startup-memory',
                'vllm-no-kv': 'megatron.vllm-no-kv',
                'vllm-weights': 'megatron.memory',
                'oom': 'megatron.memory',
                'vllm.kv-one-sequence': 'megatron.vllm-kv-one-sequence',
                'vllm.kv-concurrency': 'megatron.vllm-kv-concurrency',
            }[p['check']]
            msg = p['message']
            if rid == 'megatron.vllm-startup-memory':
                msg += ' -- vLLM checks this when the engine starts, after the Megatron model has loaded'
            knobs = ['vllm_gpu_memory_utilization'] if 'vllm' in rid else []
            findings.append(
                _rules._f(
                    p.get('severity', ERROR),
                    rid,
                    knobs,
                    msg,
                    _memory_fix(launch, mem, p),
                    'swift/megatron/trainers/rollout_mixin.py',
                )
            )
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    return findings, plan, mem


def _long_prompts_only(launch, cfg, plan, cap, vllm_version, prompt_len, mem) -> tuple[set, int] | None:
    """(the phases whose OOM happens only with long prompts, the longest prompt with which they fit), when nothing
    in the launch bounds the prompts (no max_length, no vllm_max_model_len, no --data-stats): planned at the model
    context, those OOMs need prompts that long, as the ZeRO verdict's memory.oom-if-long-prompts. A phase that runs
    out of memory even with one-token prompts stays an error. None when no OOM is of that kind."""
    a = launch.args
    if prompt_len or a.get('max_length') or a.get('vllm_max_model_len'):
        return None
    if not any(p['check'] == 'oom' for p in mem['problems']):
        return None
    from ...memory.arch import Arch
    from ...memory.search import largest_that_fits

    arch = Arch.from_config(cfg)

    def oom_phases(n: int) -> set:
        m = _memory.estimate(a, arch, plan, cap[1], cap[0], vllm_version, n, _allocator(launch), launch.release)
        return {p['phase'] for p in m['problems'] if p['check'] == 'oom'}

    long_only = {p['phase'] for p in mem['problems'] if p['check'] == 'oom'} - oom_phases(1)
    if not long_only:
        return None
    return long_only, largest_that_fits(lambda n: not (oom_phases(n) & long_only), mem['prompt_tokens'])


def _long_prompts_finding(problem: dict, longest: int) -> Finding:
    return _rules._f(
        WARNING,
        'megatron.oom-if-long-prompts',
        ['max_length'],
        f'{problem["message"]} with prompts of the model context, which nothing in the launch rules out (no '
        f'max_length); it fits with prompts of up to {longest:,} tokens',
        f'--max_length {longest} (with --truncation_strategy delete after `grpo-data filter`), or --data-stats to '
        "plan with the data's real lengths",
        'swift/megatron/trainers/rollout_mixin.py',
    )


def _allocator(launch: MegatronLaunch) -> str:
    """'default' or 'expandable': the caching allocator the training processes start with (the dispatcher's reading
    of every place the launch sets it, else its environment)."""
    from ...allocconf import conf_of
    from ...memory.reserve import allocator_kind

    conf = launch.alloc.conf if launch.alloc is not None else conf_of(launch.env.get('PYTORCH_CUDA_ALLOC_CONF'))
    return allocator_kind(conf)[0]


def _memory_fix(launch: MegatronLaunch, mem: dict, problem: dict) -> str | None:
    a = launch.args
    if problem['check'] == 'vllm-startup':
        free, cap = mem['vllm']['free_at_start_gib'], mem['capacity_gib']
        util = int(max(0.0, free - 1.0) / cap * 100) / 100
        opts = [f'--vllm_gpu_memory_utilization {util}' if util >= 0.1 else None]
        if not (a.get('offload_model') and a.get('offload_optimizer')):
            opts.append('--offload_model true --offload_optimizer true')
        return ' or '.join(o for o in opts if o)
    if problem['check'] == 'vllm.kv-one-sequence':
        util = min(0.95, round((a.get('vllm_gpu_memory_utilization') or 0.9) + 0.1, 2))
        return f'--vllm_gpu_memory_utilization {util} or a smaller --vllm_max_model_len'
    if problem['check'] == 'oom':
        ph = problem['phase']
        if ph in ('train',):
            if a.get('recompute_granularity') != 'full':
                return '--recompute_granularity full --recompute_method uniform --recompute_num_layers 1'
            return f'--tensor_model_parallel_size {(a.get("tensor_model_parallel_size") or 1) * 2}'
        if ph in ('rollout', 'startup') and not a.get('offload_model'):
            return '--offload_model true --offload_optimizer true --sleep_level 1'
        if ph == 'weight_sync' and not a.get('sleep_level'):
            return '--sleep_level 1'
        return f'--tensor_model_parallel_size {(a.get("tensor_model_parallel_size") or 1) * 2}'
    return None


def as_gpu_memory(mem: dict, gpu: str = 'train'):
    """The memory dict of :func:`check` as the guard's ``memory.inputs.GPUMemory`` (for check.py's CheckReport and
    the renderers): components are the peak phase's terms, phases the totals."""
    from ...memory.inputs import GPUMemory

    peak = mem['peak_gib']
    cap = mem['capacity_gib']
    role = 'train+vllm' if 'rollout' in mem['phases'] else 'train'
    terms = dict(sorted(mem['terms'][mem['peak_phase']].items(), key=lambda kv: -kv[1]))
    return GPUMemory(
        gpu=gpu,
        role=role,
        capacity_gib=cap,
        components={**terms},
        phases=dict(mem['phases']),
        phase=mem['peak_phase'],
        total_gib=peak,
        peak_fraction=round(peak / cap, 3) if cap else 0.0,
        fits=peak <= cap,
        headroom_pct=round(100 * (cap - peak) / cap, 1) if cap else 0.0,
        vllm=dict(mem['vllm']),
        problems=list(mem['problems']),
        phase_terms=terms,
    )


def report(launch: MegatronLaunch, findings: list[Finding], plan: dict, mem: dict | None) -> dict:
    """A JSON-ready report: framework, ok, findings, plan, memory (the shape of ``grpo-guard check --json``'s keys)."""
    return {
        'framework': 'megatron',
        'source': launch.source,
        'config_file': launch.config_file,
        'ms_swift_snapshot': launch.snapshot,
        'ok': not any(f.severity == ERROR for f in findings),
        'findings': [f.to_dict() for f in findings],
        'plan': plan,
        'memory': mem,
    }
