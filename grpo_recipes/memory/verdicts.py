"""Glue between the check and the memory model: run it, turn its verdicts into findings, and
search for a fix when a GPU does not fit. :func:`plan_memory` returns a :class:`MemoryVerdict` (a value); check.py
puts it into the report."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from ..findings import ERROR, INFO, SEVERITY_ORDER, WARNING, Finding, declare
from ..plan import prompt_bound as plan_prompt_bound
from .arch import Arch
from .envfix import candidate
from .estimate import dominant_term, estimate
from .inputs import VLLM_CUDA_GRAPHS, Inputs
from .search import largest_completion_that_fits, largest_prompt_that_fits, search_fixes
from .trainer import logits_from, mixes_prompts, resolve_adamw
from .vllm import graphs_profiled, resolve_sampler

# vLLM's own start-up checks on each GPU (memory.vllm.vllm_checks) surface as findings under their check ids
declare(
    f'{__name__}.plan_memory',
    (
        'vllm.weights-exceed-gpu',
        'vllm.startup-free-memory',
        'vllm.no-kv-memory',
        'vllm.kv-one-sequence',
        'vllm.graph-capture-oom',
        'vllm.kv-concurrency',
        'memory.oom-if-long-prompts',
        'memory.oom-if-long-completions',
        'memory.oom',
        'memory.tight',
        'memory.fix',
        'memory.no-fix',
    ),
)

SAMPLER_ENV = 'VLLM_USE_FLASHINFER_SAMPLER'
GRAPHS_ENV = 'VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS'


def launch_adamw(report) -> tuple[str, str]:
    """The AdamW the launch's trainer steps with, and why (``memory.resolve_adamw`` on its ``--optim`` and the
    installed torch and transformers)."""
    return resolve_adamw(report.cfg.optim, report.packages.get('torch'), report.packages.get('transformers'))


def memory_inputs(report, model_config: dict | None) -> tuple[Inputs | None, str | None]:
    """(the memory model's inputs for the launch, None) or (None, why memory cannot be planned; None without a
    config.json): the card's capacity, the architecture, vLLM's sampler and graphs, the AdamW, the weight sync."""
    name, cap = report.hardware.capacity()
    if model_config is None:
        return None, None
    if cap is None:
        return None, 'GPU model unknown: pass --gpu-type (A100-40G, A100-80G, H100, ...) or --gpu-mem GIB'
    try:
        arch = Arch.from_config(model_config)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        return None, f'cannot read the architecture from config.json ({e!r})'
    # as ms-swift applies an ENV block: a variable already in the environment wins
    env_sampler = os.environ.get(SAMPLER_ENV, report.launch.file_env.get(SAMPLER_ENV))
    pk = report.packages
    fi = None if 'flashinfer-python' not in pk else pk['flashinfer-python'] is not None
    sampler, why = resolve_sampler(env_sampler, pk.get('vllm'), fi, name)
    adamw, adamw_why = launch_adamw(report)
    env_graphs = os.environ.get(GRAPHS_ENV, report.launch.file_env.get(GRAPHS_ENV))
    return Inputs(
        arch=arch,
        capacity_gib=cap,
        gpu_name=name,
        vllm_sampler=sampler,
        vllm_sampler_why=why,
        vllm_version=pk.get('vllm'),
        adamw=adamw,
        adamw_why=adamw_why,
        vllm_graphs_env=None if env_graphs is None else str(env_graphs),
        weight_sync=report.launch.fw.weight_sync,
        framework=report.launch.fw,
        handover=report.launch.fw.call('handover', pk) if report.launch.fw.handover else None,
    ), None


# Errors after which the launch does not start with the processes it plans: no memory verdict or fix is given
# until they are fixed (the memory is still shown, as written: as_written.py).
LAYOUT_ERRORS = ('batch.', 'args.', 'vllm.mode', 'launch.')
PROCESS_ERRORS = frozenset(
    {
        'device.infer-workers',  # the release stops at its GPU-layout check
        'device.nproc-exceeds-visible',  # processes without a GPU
        'device.none-visible',
        'device.bad-ids',
        'device.duplicate-ids',
    }
)


def _structurally_ok(report) -> bool:
    return not any(
        f.severity == ERROR and (f.rule.startswith(LAYOUT_ERRORS) or f.rule in PROCESS_ERRORS) for f in report.findings
    )


# The memory model's median error on published training peaks (README, "Calibration": 11.2% over 7
# cases on 2026-11-23, rounded up). It applies to the trainer's terms; vLLM's reservation is bounded by vLLM itself
# (gpu_memory_utilization x total), so a GPU is "tight" when peak + MODEL_ERROR x (trainer part) > capacity.
MODEL_ERROR = 0.12


def _uncertain_gib(m) -> float:
    return sum(v for k, v in m.phase_terms.items() if not k.startswith('vllm_'))


def prompt_bound(report, arch: Arch, data_stats: dict | None) -> tuple[int, str, bool]:
    """(longest prompt to plan for, why, whether the launch itself bounds it): ``plan.prompt_bound`` with every
    bound (max_length, vLLM's max_model_len, --data-stats)."""
    b = plan_prompt_bound(report.cfg, arch.context_len, data_stats['max'] if data_stats else None)
    return b.tokens, b.why, b.bounded


# An OOM that needs a micro-batch padded to more than this share of max_completion_length is a warning, not a
# refusal: GRPO pads each micro-batch to its longest completion, and a completion reaches the limit only when
# the policy runs on to it (ms-swift logs the share as completions/clipped_ratio). Within this share of the limit
# the OOM is expected on ordinary batches and the launch is refused. A stated policy, not a measurement.
LONG_COMPLETION_SHARE = 0.5

# ms-swift 4.6's templates registered with is_thinking=True whose model thinks by default: deepseek_r1
# (swift/template/templates/deepseek.py), qwq, qwen3_thinking and qwen3, the hybrid Qwen3 template, which thinks unless
# --enable_thinking false (swift/template/templates/qwen.py; swift/arguments/base_args/template_args.py: "True for
# thinking/hybrid thinking templates"). A reasoning model's completions run on to max_completion_length as a rule
# (its thinking is what GRPO lengthens), so an OOM there is planned as the ordinary case.
THINKING_TEMPLATES = ('deepseek_r1', 'qwq', 'qwen3_thinking', 'qwen3')


def _argv_value(argv: list[str], name: str) -> str | None:
    out = None
    for i, a in enumerate(argv):
        if a == f'--{name}' and i + 1 < len(argv):
            out = argv[i + 1]
        elif a.startswith(f'--{name}='):
            out = a.split('=', 1)[1]
    return out


def reasoning_model(report) -> str | None:
    """Why the launch's model is a reasoning (thinking) model, None if it is not: the template the launch names, else
    the one ms-swift registers for the model id (swift_registry_snapshot.json; a local dir by its name), is a thinking
    template, and the launch does not turn thinking off (--enable_thinking false)."""
    from ..frontends.swift.registry import snapshot

    cfg = report.cfg
    if (_argv_value(report.launch.argv, 'enable_thinking') or '').strip().lower() in ('false', '0', 'no'):
        return None
    template, where = cfg.template, "the launch's template"
    if not template and cfg.model:
        models = snapshot()['models']
        key = cfg.model.strip('/').lower()
        hit = models.get(key)
        if hit is None and '/' in key:  # a local dir: by its name
            name = key.rsplit('/', 1)[1]
            hit = next((v for k, v in models.items() if k.rsplit('/', 1)[-1] == name), None)
        if hit:
            template, where = hit[1], "ms-swift's template for this model"
    if template in THINKING_TEMPLATES:
        return f'{cfg.model} is a reasoning model ({where} is {template}, a thinking one)'
    return None


@dataclass
class MemoryVerdict:
    """What the memory model says about a checked launch (:func:`plan_memory`); check.py puts it into the report."""

    memory: list = field(default_factory=list)
    """Per-GPU memory (GPUMemory), as planned (or as written, for display only, when errors block a verdict)."""
    findings: list = field(default_factory=list)
    """The memory.* and vllm.* findings the plan gives."""
    fixes: list = field(default_factory=list)
    """Config changes that fit (search.Fix), smallest first."""
    assumptions: list = field(default_factory=list)
    """What the plan took as given, one line each, after the report's own."""
    unchecked: str | None = None
    """Why there is no memory verdict; None when there is one."""
    hard_fix: str | None = None
    """The fix of each memory/vLLM error that has none (the proposed fix, or more memory); None: no verdict given."""

    def findings_after(self, before: list) -> list:
        """The report's findings (``before``, left as they are) with these added: once a verdict is given, every
        memory/vLLM error without a fix gets ``hard_fix``, errors first (a stable sort)."""
        if self.hard_fix is None:
            return before + self.findings
        out = [
            replace(f, fix=self.hard_fix)
            if f.fix is None and f.severity == ERROR and f.rule.startswith(('memory.', 'vllm.'))
            else f
            for f in before + self.findings
        ]
        return sorted(out, key=lambda f: SEVERITY_ORDER[f.severity])


@dataclass
class _Limits:
    """What the OOM findings need to know beyond the plan: the lengths at which it fits."""

    conditional: int | None = None
    """Nothing bounds the prompts: the longest prompt that fits (the OOM needs prompts that long)."""
    short_mem: dict | None = None
    """GPU -> its memory with the shortest prompts, quoted when even they OOM and nothing bounds the prompts."""
    long_completion: int | None = None
    """The longest completion that fits with short prompts, when it is beyond the ordinary length (a warning)."""
    at_longest: int | None = None
    """The same with the longest prompts the launch allows (bounded launches)."""
    refused_at: int | None = None
    """The longest completion that fits, when an OOM below the ordinary length refuses the launch."""
    reasoning: str | None = None
    """Why the model is a reasoning model (its completions reach max_completion_length)."""
    ordinary: float = 0
    """The completion length reached as a rule."""


def plan_memory(
    report,
    model_config: dict | None,
    want_fixes: bool = True,
    data_stats: dict | None = None,
    completion_mean: int | None = None,
    replay: bool = False,
) -> MemoryVerdict:
    """The memory verdict of a launch whose rules have run: per-GPU memory, the memory/vLLM findings, the fixes
    and the assumptions. Reads the report (config, plan, launch, the rules' findings); changes nothing in it."""
    v = MemoryVerdict()
    inp, v.unchecked = memory_inputs(report, model_config)
    if inp is None:
        return v
    cfg = report.cfg
    from .envfix import assumptions as alloc_assumptions
    from .envfix import with_alloc

    inp = with_alloc(inp, report.launch.alloc, cfg, report.launch.fw)
    v.assumptions += alloc_assumptions(report)
    inp.prompt_len, why, bounded = prompt_bound(report, inp.arch, data_stats)
    if inp.prompt_len == 0:
        v.assumptions.append(
            f'prompt + completion of up to {cfg.max_completion_length:,} tokens ({why} <= 0: '
            f'completions are capped at max_model_len - prompt)'
        )
    else:
        v.assumptions.append(
            f'prompts of up to {inp.prompt_len:,} tokens ({why}), completions of up to {cfg.max_completion_length:,}'
        )
    v.assumptions += _logits_span(report, inp, data_stats)
    if not _structurally_ok(report):
        v.unchecked = 'the launch has errors that decide the batch or the processes; fix them first'
        from .as_written import memory_as_written

        v.memory, note = memory_as_written(report, inp)  # the table is still shown; no verdict on it
        v.assumptions += [note] if note else []
        return v
    if (
        cfg.per_device_train_batch_size < 1
        or cfg.max_completion_length < 1
        or not 0 < cfg.vllm_gpu_memory_utilization <= 1
        or cfg.vllm_tensor_parallel_size < 1
    ):
        v.unchecked = 'a batch, length or vLLM setting is out of range (see the errors)'
        return v
    if replay and inp.alloc is not None:
        inp.replayed, note = _replayed(report, model_config, inp)
        v.assumptions.append(note)
    v.memory = estimate(cfg, report.plan, replace(inp))
    v.assumptions += _model_assumptions(cfg, inp) + _reserve_edge(cfg, report.plan, inp)
    lim = _limits(report, inp, v, bounded, completion_mean)
    _gpu_findings(report, inp, v, lim, why, bounded, completion_mean)
    _fixes(report, inp, v, lim, want_fixes)
    return v


def _replayed(report, model_config: dict, inp: Inputs) -> tuple:
    """``Inputs.replayed`` and its assumption line: the launch's step traced and replayed as its framework runs it
    (``replay.replayed_reserve``)."""
    from ..errors import GuardError

    try:
        from .replay import replayed_reserve

        return replayed_reserve(report.cfg, report.plan, model_config, inp, report.launch.fw)
    except ImportError as e:
        raise GuardError(f'--replay traces the step with torch, transformers and peft ({e}); install them') from None
    except ValueError as e:  # transformers or PEFT cannot build this model or tuner
        from .trace import build_error

        raise GuardError(f'--replay: cannot build the model as the launch asks ({build_error(e)})') from None


def _logits_span(report, inp: Inputs, data_stats: dict | None) -> list[str]:
    """Set ``inp.logits_from_prompt`` where the framework's logits span the micro-batch's prompts
    (``Framework.logits_span_prompts``) and a micro-batch mixes prompts; the assumption it makes."""
    cfg, fw = report.cfg, report.launch.fw
    shortest = data_stats.get('min') if data_stats and isinstance(data_stats.get('min'), int) else None
    if not (fw.logits_span_prompts and mixes_prompts(cfg)) or inp.prompt_len <= 0:
        return []
    inp.logits_from_prompt = logits_from(cfg, fw.logits_span_prompts, shortest)
    mb, groups = cfg.per_device_train_batch_size, cfg.num_generations
    head = (
        f'a micro-batch of {mb} completions holds several prompts (num_generations {groups} is not a multiple of '
        f"it) and {fw.display} keeps its logits from the shortest prompt's first completion token on"
    )
    if shortest is None:
        return [
            f'{head}: prompts of one length are planned (logits over the completions only); pass --data-stats '
            f'to plan the longest less the shortest prompt too'
        ]
    return [
        f'{head}: the logits span up to {max(0, inp.prompt_len - shortest):,} prompt tokens beyond the '
        f"completions (the longest prompt planned less the data's shortest, {shortest:,} tokens, --data-stats)"
    ]


def _reserve_edge(cfg, plan, inp: Inputs) -> list[str]:
    """A line where the default allocator's reserve sits on a knife edge (``reserve.on_the_edge``)."""
    from .reserve import allocator_kind, largest_transient, on_the_edge, states_room
    from .trainer import logits_rows, reserve_inputs

    if inp.alloc is None or inp.replayed or cfg.use_liger_kernel or allocator_kind(inp.alloc)[0] != 'default':
        return []
    parts = reserve_inputs(cfg, plan, inp)
    block = largest_transient(cfg, inp.arch, logits_rows(cfg, inp))
    if not on_the_edge(cfg, block, parts):
        return []
    return [
        f"torch's cache: the optimizer states ({parts['states'] / 2**30:.1f} GiB) about fill the segments the "
        f'training step leaves free ({states_room(cfg, block, parts) / 2**30:.1f} GiB), so where each tensor lands '
        f'decides whether torch makes one more logits block ({block / 2**30:.1f} GiB); the plan counts it only where '
        'the states exceed that room (`--replay` replays the step)'
    ]


def _model_assumptions(cfg, inp: Inputs) -> list[str]:
    """What the plan leaves out or takes as given: reward/teacher models, the optimizer, vLLM's graphs and sampler."""
    out = []
    extra = list(cfg.reward_model or []) + ([cfg.teacher_model] if cfg.teacher_model else [])
    if extra:
        out.append(
            f'reward or teacher models ({", ".join(extra)}) are not in the plan: each training '
            f'process loads them too (unless offloaded), so the peaks above are low by their weights'
        )
    a = inp.arch
    method = a.quant_method()
    if a.bnb_bits() and not cfg.quant_method:
        kept = a.skipped_linear_params()
        out.append(
            f'the checkpoint is saved in bitsandbytes {a.bnb_bits()}-bit (its config.json): training loads it so '
            f'without --quant_bits'
            + (f', with {kept / 1e9:.2f}B linear parameters its llm_int8_skip_modules name at 16 bits' if kept else '')
        )
    elif method in ('compressed-tensors', 'modelopt'):
        out.append(
            f'the checkpoint is saved in {method} (its config.json): vLLM holds it packed; training holds it at 16 '
            f'bits (transformers decompresses it on the first forward)'
        )
    if not (cfg.deepspeed or '').endswith('offload'):
        out.append(f'optimizer: {inp.adamw_why}')
    if cfg.use_vllm and not cfg.vllm_enforce_eager:
        where = (
            'inside gpu_memory_utilization (vLLM >= 0.21 profiles them)'
            if graphs_profiled(inp.vllm_version, inp.vllm_graphs_env)
            else 'on top of gpu_memory_utilization (captured after the KV cache; vLLM before 0.21 or not known)'
        )
        out.append(f"vLLM's CUDA graphs: {VLLM_CUDA_GRAPHS / 2**30:.1f} GiB {where}")
    if cfg.use_vllm:
        out.append(
            f"vLLM's profiling run samples with the {inp.vllm_sampler} top-k/top-p sampler ({inp.vllm_sampler_why})"
        )
    return out


def _limits(report, inp: Inputs, v: MemoryVerdict, bounded: bool, completion_mean: int | None) -> _Limits:
    """Where a training OOM starts: the prompt and completion lengths that fit, and the completion length reached
    as a rule (a reasoning model's, a stated mean, else a share of the limit); its assumption goes into ``v``."""
    cfg, plan = report.cfg, report.plan
    lim = _Limits()
    train_oom = any(m.peak_fraction > 1.0 for m in v.memory if m.role != 'rollout')
    if train_oom and not bounded:
        # the launch sets no prompt limit: the OOM happens only if the data has prompts that long
        lim.conditional = largest_prompt_that_fits(cfg, plan, inp, inp.prompt_len)
    if train_oom and not bounded and lim.conditional is None:
        lim.short_mem = {x.gpu: x for x in estimate(cfg, plan, replace(inp, prompt_len=1))}
    lim.reasoning = reasoning_model(report) if completion_mean is None else None
    # completions the data and the model produce as a rule: a micro-batch is padded to its longest, so an OOM below
    # this length is expected on ordinary batches and refused. A reasoning model runs on to the limit; a stated mean
    # (--completion-mean) is the length they reach; else the share of the limit (LONG_COMPLETION_SHARE).
    C = cfg.max_completion_length
    lim.ordinary = C if lim.reasoning else max(LONG_COMPLETION_SHARE * C, min(completion_mean or 0, C))
    if lim.reasoning:
        v.assumptions.append(
            f'completions reach max_completion_length ({C:,} tokens): {lim.reasoning}; pass '
            f"--completion-mean TOKENS (e.g. completions/mean_length from a run's log) to plan "
            f'with shorter ones'
        )
    elif completion_mean is not None:
        v.assumptions.append(
            f'completions of {completion_mean:,} tokens on average (--completion-mean): an OOM '
            f'below that length is a refusal'
        )
    if train_oom and lim.conditional is None:
        # a refusal needs the OOM on ordinary batches: the shortest prompts and completions of the ordinary length
        # (the prompt and completion worst cases together are a warning's business)
        n = largest_completion_that_fits(cfg, plan, replace(inp, prompt_len=1))
        if n is not None and n >= lim.ordinary:
            lim.long_completion = n
            if bounded:
                lim.at_longest = largest_completion_that_fits(cfg, plan, inp) or 0
        elif n is not None:
            lim.refused_at = n
    return lim


def _gpu_findings(
    report, inp: Inputs, v: MemoryVerdict, lim: _Limits, why: str, bounded: bool, completion_mean: int | None
) -> None:
    """Each GPU's findings into ``v``: vLLM's own checks, an OOM (or the warning of an OOM that needs long prompts or
    completions), a tight fit; one of each kind per role."""
    seen: set = set()
    for m in v.memory:
        v.findings += _problem_findings(report, m, seen)
        if m.peak_fraction > 1.0 and ('oom', m.role) not in seen:
            seen.add(('oom', m.role))
            _oom_finding(report, inp, v, m, lim, why, bounded, completion_mean)
            if v.findings and v.findings[-1].rule in ('memory.oom-if-long-prompts', 'memory.oom-if-long-completions'):
                for x in v.memory:  # a warning, not a refusal: the table says so
                    if x.role == m.role and x.peak_fraction > 1.0:
                        x.verdict = 'OOM if long'

        elif (
            m.fits and m.total_gib + MODEL_ERROR * _uncertain_gib(m) > m.capacity_gib and ('tight', m.role) not in seen
        ):
            seen.add(('tight', m.role))
            env_fix = m.role != 'rollout' and candidate(report) is not None  # envfix: where it is compatible
            v.findings.append(
                Finding(
                    WARNING,
                    'memory.tight',
                    [],
                    f'GPU {m.gpu} ({m.role}) is predicted at {m.peak_fraction:.1%} of its {m.capacity_gib:.1f} GiB; '
                    'the '
                    f"memory model's median error on training peaks is {MODEL_ERROR:.0%} (README, Calibration) and "
                    f"{_uncertain_gib(m):.1f} GiB of this is the trainer's, so it may not fit"
                    + (
                        ''
                        if inp.replayed or inp.alloc is None
                        else " (--replay replays the training step for torch's reserve in place of the closed form)"
                    ),
                    f'keep {MODEL_ERROR:.0%} headroom: '
                    + (
                        'export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the '
                        'caching allocator then reserves less; no training setting changes), or '
                        if env_fix
                        else ''
                    )
                    + 'lower vllm_gpu_memory_utilization or the micro-batch',
                )
            )


def _problem_findings(report, m, seen: set) -> list[Finding]:
    """vLLM's own start-up checks on one GPU (memory.vllm.vllm_checks), once per check and role; a rollout
    server whose command is not known: its errors are warnings (its settings were assumed: check.with_rollout)."""
    out = []
    for p in m.problems:
        key = (p['check'], m.role)
        if key in seen:
            continue
        seen.add(key)
        sev = p.get('severity', 'error')
        assumed = m.role == 'rollout' and report.launch.rollout is None and sev == 'error'
        if assumed:
            sev = 'warning'
            p = {
                **p,
                'message': p['message'] + " (with the rollout server's settings assumed: pass --rollout "
                '"CMD" to check its own)',
            }
        names = ['vllm_gpu_memory_utilization', 'vllm_max_model_len']
        if m.role == 'rollout' and report.launch.rollout is not None:
            names = [
                report.launch.rollout.flag('gpu_memory_utilization').lstrip('-'),
                report.launch.rollout.flag('max_model_len').lstrip('-'),
            ]
        server_fw = report.launch.rollout.fw if report.launch.rollout is not None else report.launch.fw
        on_server = (  # its own flags on its own command line: the trainer's vllm_* settings are ignored there
            f"on the rollout server's command line: {server_fw.server} ... "
            f'{server_fw.server_arg("gpu_memory_utilization")} (higher) or '
            f'{server_fw.server_arg("max_model_len")} (lower), or more GPUs: '
            f'{server_fw.server_arg("tensor_parallel_size")} (no trainer setting moves this GPU)'
        )
        fix = None if sev != 'error' else (on_server if m.role == 'rollout' else None)
        out.append(
            Finding(
                {'error': ERROR, 'info': INFO}.get(sev, WARNING),
                p['check'],
                names,
                f'GPU {m.gpu} ({m.role}): {p["message"]}',
                fix
                if sev == 'error'
                else 'give the server\'s command: --rollout "CUDA_VISIBLE_DEVICES=... <server command>"'
                if assumed
                else (
                    f'{server_fw.server} ... {server_fw.server_arg("gpu_memory_utilization")} (higher) on the '
                    "rollout server's command line"
                    if m.role == 'rollout' and report.cfg.rollout_mode == 'server'
                    else 'raise vllm_gpu_memory_utilization or lower the rollout batch'
                ),
            )
        )
    return out


def _oom_finding(
    report, inp: Inputs, v: MemoryVerdict, m, lim: _Limits, why: str, bounded: bool, completion_mean: int | None
) -> None:
    """One GPU over its capacity: an error, or a warning when only prompts or completions longer than the ordinary
    ones make it so (with that assumption)."""
    cfg = report.cfg
    term, gib = dominant_term(m)
    msg = (
        f'GPU {m.gpu} ({m.role}) needs {m.total_gib:.1f} GiB in the {m.phase} phase, more than its '
        f'{m.capacity_gib:.1f} GiB; the largest term is {term} ({gib:.1f} GiB)'
    )
    if m.role != 'rollout' and lim.short_mem is not None:
        # it OOMs even with the shortest prompts: quote that figure, not the one at the model context
        short = lim.short_mem[m.gpu]
        term, gib = dominant_term(short)
        msg = (
            f'GPU {m.gpu} ({m.role}) needs {short.total_gib:.1f} GiB in the {short.phase} phase even with '
            f'the shortest prompts, more than its {m.capacity_gib:.1f} GiB; the largest term is {term} '
            f'({gib:.1f} GiB)'
        )
    if m.role != 'rollout' and lim.conditional is not None:
        v.findings.append(_long_prompts_finding(report, inp, msg, lim.conditional))
        return
    if m.role != 'rollout' and lim.long_completion is not None:
        v.findings.append(_long_completions_finding(cfg, inp, msg, lim, why, bounded))
        C = cfg.max_completion_length
        v.assumptions.append(
            f'an OOM only at completions over {LONG_COMPLETION_SHARE:.0%} of max_completion_length is a '
            f'warning (memory.verdicts.LONG_COMPLETION_SHARE), not a refusal'
            if lim.ordinary <= LONG_COMPLETION_SHARE * C
            else f'an OOM only at completions over the {lim.ordinary:,}-token mean (--completion-mean) is a '
            f'warning, not a refusal'
        )
        return
    fix = None
    if m.phase == 'generate' and 'zero3_generation_gather' in m.phase_terms:
        msg += (
            f' (HF generation under ZeRO-3 gathers the whole model on every GPU, '
            f'{m.phase_terms["zero3_generation_gather"]:.1f} GiB: ds3_gather_for_generation is true)'
        )
        fix = (
            'ds3_gather_for_generation: false (each layer fetched as generation reaches it; slower), or '
            'use_vllm (colocate, or a rollout server)'
        )
    if m.role != 'rollout' and lim.refused_at is not None and (lim.reasoning or completion_mean is not None):
        msg += (
            f'; it fits only with completions under {lim.refused_at:,} tokens, shorter than '
            + (
                f'the {cfg.max_completion_length:,} a reasoning model reaches ({lim.reasoning})'
                if lim.reasoning
                else f'the {completion_mean:,}-token mean (--completion-mean)'
            )
            + f', so it is refused (max_completion_length: {lim.refused_at} would cut its answers there)'
        )
    v.findings.append(Finding(ERROR, 'memory.oom', [term.split(' ')[0]], msg, fix))


def _long_prompts_finding(report, inp: Inputs, msg: str, conditional: int) -> Finding:
    """The OOM needs prompts longer than ``conditional`` tokens, which nothing in the launch rules out."""
    filtered = not report.launch.fw.prompt_limit  # no max_length (TRL): the data is filtered
    return Finding(
        WARNING,
        'memory.oom-if-long-prompts',
        ['dataset' if filtered else 'max_length'],
        f'{msg} with prompts of {inp.prompt_len:,} tokens, which nothing in the launch rules out; it '
        f'fits with prompts of up to {conditional:,} tokens',
        (
            f'grpo-data filter DATA --max-length {conditional}, '
            if filtered
            else f'max_length: {conditional} (with truncation_strategy: delete after `grpo-data filter`), '
        )
        + "or --data-stats to plan with the data's real lengths",
    )


def _long_completions_finding(cfg, inp: Inputs, msg: str, lim: _Limits, why: str, bounded: bool) -> Finding:
    """The OOM needs a micro-batch padded to a completion longer than those reached as a rule."""
    bs, C = cfg.per_device_train_batch_size, cfg.max_completion_length
    long_completion, at_longest = lim.long_completion, lim.at_longest
    return Finding(
        WARNING,
        'memory.oom-if-long-completions',
        ['max_completion_length', 'per_device_train_batch_size'],
        f'{msg} when a micro-batch holds a completion of {C:,} tokens (GRPO pads '
        f'the micro-batch to its longest); it fits while every completion stays under '
        + (
            f'{long_completion:,} tokens ({long_completion / C:.0%} of the limit) '
            f'and the prompts are short (nothing in the launch limits them)'
            if not bounded
            else f'{at_longest:,} tokens ({at_longest / C:.0%} of the limit) with prompts '
            f'of {inp.prompt_len:,} tokens ({why}), {long_completion:,} with short prompts'
        ),
        f'max_completion_length: {at_longest or long_completion}'
        + (
            " (or max_length cut to the data's prompts: grpo-data stats)"
            if bounded and at_longest < long_completion
            else ''
        )
        + ', or a smaller micro-batch with more accumulation'
        + (
            f' (per_device_train_batch_size: {bs // 2}, gradient_accumulation_steps: '
            f'{(cfg.gradient_accumulation_steps or 1) * 2})'
            if bs > 1 and bs % 2 == 0
            else ''
        ),
        'swift/rlhf_trainers/grpo_trainer.py (completions padded per micro-batch); README, Memory',
    )


def _fixes(report, inp: Inputs, v: MemoryVerdict, lim: _Limits, want_fixes: bool) -> None:
    """Training GPUs that do not fit (not only with long prompts): the smallest changes that fit (search.py), as
    ``v.fixes`` and a memory.fix finding (else memory.no-fix); the fix every memory/vLLM error without one gets."""
    train_hard = [m for m in v.memory if m.role != 'rollout' and not m.fits]
    if lim.conditional is not None:
        train_hard = []
    if want_fixes and train_hard:
        v.fixes = search_fixes(report, inp)
        if v.fixes:
            best = v.fixes[0]
            v.findings.append(
                Finding(
                    INFO,
                    'memory.fix',
                    sorted(best.changes) + sorted(best.env),
                    f'a config that fits (peak {best.peak_fraction:.0%} of the GPU, same '
                    f'num_generations and prompts per optimizer step)',
                    best.text(report.launch),
                )
            )
        else:
            v.findings.append(
                Finding(
                    WARNING,
                    'memory.no-fix',
                    [],
                    'no change within the searched knobs (vLLM length and utilisation, sleep, '
                    'micro-batch split, checkpointing, offload, ZeRO stage, ZeRO-3 generation '
                    'gather, vLLM TP) makes the '
                    'training GPUs fit; use more or larger GPUs, or a smaller model',
                    None,
                )
            )
    v.hard_fix = (
        'the proposed fix (memory.fix) below'
        if v.fixes
        else 'more GPU memory per process (a larger card or more GPUs), or a smaller model'
    )
