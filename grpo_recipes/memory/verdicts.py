"""Glue between the check and the memory model: run it, turn its verdicts into findings, and
search for a fix when a GPU does not fit."""
from __future__ import annotations

import os
from dataclasses import replace

from ..findings import ERROR, INFO, WARNING, Finding, declare
from ..plan import prompt_bound as plan_prompt_bound
from .arch import Arch
from .envfix import candidate
from .estimate import dominant_term, estimate
from .inputs import VLLM_CUDA_GRAPHS, Inputs
from .search import largest_completion_that_fits, largest_prompt_that_fits, search_fixes
from .trainer import resolve_adamw
from .vllm import graphs_profiled, resolve_sampler

# vLLM's own start-up checks on each GPU (memory.vllm.vllm_checks) surface as findings under their check ids
declare(f'{__name__}.plan_memory', ('vllm.weights-exceed-gpu', 'vllm.startup-free-memory', 'vllm.no-kv-memory',
                                    'vllm.kv-one-sequence', 'vllm.kv-concurrency', 'memory.oom-if-long-prompts',
                                    'memory.oom-if-long-completions', 'memory.oom', 'memory.tight', 'memory.fix',
                                    'memory.no-fix'))

SAMPLER_ENV = 'VLLM_USE_FLASHINFER_SAMPLER'
GRAPHS_ENV = 'VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS'


def launch_adamw(report) -> tuple[str, str]:
    """The AdamW the launch's trainer steps with, and why (``memory.resolve_adamw`` on its ``--optim`` and the
    installed torch and transformers)."""
    return resolve_adamw(report.cfg.optim, report.packages.get('torch'), report.packages.get('transformers'))


def memory_inputs(report, model_config: dict | None) -> Inputs | None:
    name, cap = report.hardware.capacity()
    if model_config is None:
        return None
    if cap is None:
        report.memory_unchecked = ('GPU model unknown: pass --gpu-type (A100-40G, A100-80G, H100, ...) or '
                                   '--gpu-mem GIB')
        return None
    try:
        arch = Arch.from_config(model_config)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        report.memory_unchecked = f'cannot read the architecture from config.json ({e!r})'
        return None
    # as ms-swift applies an ENV block: a variable already in the environment wins
    env_sampler = os.environ.get(SAMPLER_ENV, report.launch.file_env.get(SAMPLER_ENV))
    pk = report.packages
    fi = None if 'flashinfer-python' not in pk else pk['flashinfer-python'] is not None
    sampler, why = resolve_sampler(env_sampler, pk.get('vllm'), fi)
    adamw, adamw_why = launch_adamw(report)
    env_graphs = os.environ.get(GRAPHS_ENV, report.launch.file_env.get(GRAPHS_ENV))
    return Inputs(arch=arch, capacity_gib=cap, gpu_name=name, vllm_sampler=sampler, vllm_sampler_why=why,
                  vllm_version=pk.get('vllm'), adamw=adamw, adamw_why=adamw_why,
                  vllm_graphs_env=None if env_graphs is None else str(env_graphs),
                  weight_sync=report.launch.fw.weight_sync)


def _structurally_ok(report) -> bool:
    return not any(f.severity == ERROR and f.rule.startswith(('batch.', 'args.', 'vllm.mode', 'launch.'))
                   for f in report.findings)


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
            template, where = hit[1], 'ms-swift\'s template for this model'
    if template in THINKING_TEMPLATES:
        return f'{cfg.model} is a reasoning model ({where} is {template}, a thinking one)'
    return None


def plan_memory(report, model_config: dict | None, want_fixes: bool = True, data_stats: dict | None = None,
                completion_mean: int | None = None) -> None:
    inp = memory_inputs(report, model_config)
    if inp is None:
        return
    cfg = report.cfg
    from .envfix import assumptions as alloc_assumptions
    from .envfix import with_alloc
    inp = with_alloc(inp, report.launch.alloc, cfg, report.launch.framework)
    report.assumptions += alloc_assumptions(report)
    inp.prompt_len, why, bounded = prompt_bound(report, inp.arch, data_stats)
    if inp.prompt_len == 0:
        report.assumptions.append(f'prompt + completion of up to {cfg.max_completion_length:,} tokens ({why} <= 0: '
                                  f'completions are capped at max_model_len - prompt)')
    else:
        report.assumptions.append(f'prompts of up to {inp.prompt_len:,} tokens ({why}), completions of up to '
                                  f'{cfg.max_completion_length:,}')
    if not _structurally_ok(report):
        report.memory_unchecked = 'the launch has errors that decide the batch or the processes; fix them first'
        from .as_written import memory_as_written
        memory_as_written(report, inp)  # the table is still shown when it can be computed; no verdict on it
        return
    if cfg.per_device_train_batch_size < 1 or cfg.max_completion_length < 1 or \
            not 0 < cfg.vllm_gpu_memory_utilization <= 1 or cfg.vllm_tensor_parallel_size < 1:
        report.memory_unchecked = 'a batch, length or vLLM setting is out of range (see the errors)'
        return
    report.memory = estimate(cfg, report.plan, replace(inp))
    extra = list(cfg.reward_model or []) + ([cfg.teacher_model] if cfg.teacher_model else [])
    if extra:
        report.assumptions.append(f'reward or teacher models ({", ".join(extra)}) are not in the plan: each training '
                                  f'process loads them too (unless offloaded), so the peaks above are low by their '
                                  f'weights')
    if not (cfg.deepspeed or '').endswith('offload'):
        report.assumptions.append(f'optimizer: {inp.adamw_why}')
    if cfg.use_vllm and not cfg.vllm_enforce_eager:
        where = ('inside gpu_memory_utilization (vLLM >= 0.21 profiles them)'
                 if graphs_profiled(inp.vllm_version, inp.vllm_graphs_env) else
                 'on top of gpu_memory_utilization (captured after the KV cache; vLLM before 0.21 or not known)')
        report.assumptions.append(f'vLLM\'s CUDA graphs: {VLLM_CUDA_GRAPHS / 2 ** 30:.1f} GiB {where}')
    if cfg.use_vllm:
        report.assumptions.append(f'vLLM\'s profiling run samples with the {inp.vllm_sampler} top-k/top-p sampler '
                                  f'({inp.vllm_sampler_why})')
    seen = set()
    train_oom = any(m.peak_fraction > 1.0 for m in report.memory if m.role != 'rollout')
    conditional = None
    if train_oom and not bounded:
        # the launch sets no prompt limit: the OOM happens only if the data has prompts that long
        conditional = largest_prompt_that_fits(cfg, report.plan, inp, inp.prompt_len)
    short_mem = None  # the plan with the shortest prompts, quoted when even they OOM and nothing bounds the prompts
    if train_oom and not bounded and conditional is None:
        short_mem = {x.gpu: x for x in estimate(cfg, report.plan, replace(inp, prompt_len=1))}
    long_completion = None
    at_longest = None  # the same with the longest prompts the launch allows (bounded launches)
    reasoning = reasoning_model(report) if completion_mean is None else None
    # completions the data and the model produce as a rule: a micro-batch is padded to its longest, so an OOM below
    # this length is expected on ordinary batches and refused. A reasoning model runs on to the limit; a stated mean
    # (--completion-mean) is the length they reach; else the share of the limit (LONG_COMPLETION_SHARE).
    C = cfg.max_completion_length
    ordinary = C if reasoning else max(LONG_COMPLETION_SHARE * C, min(completion_mean or 0, C))
    if reasoning:
        report.assumptions.append(f'completions reach max_completion_length ({C:,} tokens): {reasoning}; pass '
                                  f'--completion-mean TOKENS (e.g. completions/mean_length from a run\'s log) to plan '
                                  f'with shorter ones')
    elif completion_mean is not None:
        report.assumptions.append(f'completions of {completion_mean:,} tokens on average (--completion-mean): an OOM '
                                  f'below that length is a refusal')
    refused_at = None  # the longest completion that fits, when an OOM below the ordinary length refuses the launch
    if train_oom and conditional is None:
        # a refusal needs the OOM on ordinary batches: the shortest prompts and completions of the ordinary length
        # (the prompt and completion worst cases together are a warning's business)
        n = largest_completion_that_fits(cfg, report.plan, replace(inp, prompt_len=1))
        if n is not None and n >= ordinary:
            long_completion = n
            if bounded:
                at_longest = largest_completion_that_fits(cfg, report.plan, inp) or 0
        elif n is not None:
            refused_at = n
    for m in report.memory:
        for p in m.problems:
            key = (p['check'], m.role)
            if key in seen:
                continue
            seen.add(key)
            sev = p.get('severity', 'error')
            assumed = m.role == 'rollout' and report.launch.rollout is None and sev == 'error'
            if assumed:  # the server's own command is not known: its settings were assumed (check.with_rollout)
                sev = 'warning'
                p = {**p, 'message': p['message'] + ' (with the rollout server\'s settings assumed: pass --rollout '
                     '"CMD" to check its own)'}
            names = ['vllm_gpu_memory_utilization', 'vllm_max_model_len']
            if m.role == 'rollout' and report.launch.rollout is not None:
                names = [report.launch.rollout.flag('gpu_memory_utilization').lstrip('-'),
                         report.launch.rollout.flag('max_model_len').lstrip('-')]
            fix = None if sev != 'error' else (
                'change the rollout server\'s command (no trainer setting moves this GPU)' if m.role == 'rollout'
                else None)
            report.findings.append(Finding({'error': ERROR, 'info': INFO}.get(sev, WARNING), p['check'], names,
                                           f'GPU {m.gpu} ({m.role}): {p["message"]}', fix if sev == 'error' else
                                           'give the server\'s command: --rollout "CUDA_VISIBLE_DEVICES=... '
                                           '<server command>"' if assumed else
                                           'raise vllm_gpu_memory_utilization or lower the rollout batch'))
        if m.peak_fraction > 1.0 and ('oom', m.role) not in seen:
            seen.add(('oom', m.role))
            term, gib = dominant_term(m)
            msg = (f'GPU {m.gpu} ({m.role}) needs {m.total_gib:.1f} GiB in the {m.phase} phase, more than its '
                   f'{m.capacity_gib:.1f} GiB; the largest term is {term} ({gib:.1f} GiB)')
            if m.role != 'rollout' and short_mem is not None:
                # it OOMs even with the shortest prompts: quote that figure, not the one at the model context
                short = short_mem[m.gpu]
                term, gib = dominant_term(short)
                msg = (f'GPU {m.gpu} ({m.role}) needs {short.total_gib:.1f} GiB in the {short.phase} phase even with '
                       f'the shortest prompts, more than its {m.capacity_gib:.1f} GiB; the largest term is {term} '
                       f'({gib:.1f} GiB)')
            if m.role != 'rollout' and conditional is not None:
                trl = not report.launch.fw.prompt_limit  # no max_length: the data is filtered
                report.findings.append(Finding(
                    WARNING, 'memory.oom-if-long-prompts', ['dataset' if trl else 'max_length'],
                    f'{msg} with prompts of {inp.prompt_len:,} tokens, which nothing in the launch rules out; it '
                    f'fits with prompts of up to {conditional:,} tokens',
                    (f'grpo-data filter DATA --max-length {conditional}, ' if trl else
                     f'max_length: {conditional} (with truncation_strategy: delete after `grpo-data filter`), ') +
                    'or --data-stats to plan with the data\'s real lengths'))
                continue
            if m.role != 'rollout' and long_completion is not None:
                bs = cfg.per_device_train_batch_size
                report.findings.append(Finding(
                    WARNING, 'memory.oom-if-long-completions', ['max_completion_length',
                                                                'per_device_train_batch_size'],
                    f'{msg} when a micro-batch holds a completion of {cfg.max_completion_length:,} tokens (GRPO pads '
                    f'the micro-batch to its longest); it fits while every completion stays under '
                    + (f'{long_completion:,} tokens ({long_completion / cfg.max_completion_length:.0%} of the limit) '
                       f'and the prompts are short (nothing in the launch limits them)' if not bounded else
                       f'{at_longest:,} tokens ({at_longest / cfg.max_completion_length:.0%} of the limit) with '
                       f'prompts '
                       f'of {inp.prompt_len:,} tokens ({why}), {long_completion:,} with short prompts'),
                    f'max_completion_length: {at_longest or long_completion}'
                    + (' (or max_length cut to the data\'s prompts: grpo-data stats)' if bounded and
                       at_longest < long_completion else '') + ', or a smaller micro-batch with more accumulation'
                    + (f' (per_device_train_batch_size: {bs // 2}, gradient_accumulation_steps: '
                       f'{(cfg.gradient_accumulation_steps or 1) * 2})' if bs > 1 and bs % 2 == 0 else ''),
                    'swift/rlhf_trainers/grpo_trainer.py (completions padded per micro-batch); README, Memory'))
                report.assumptions.append(
                    f'an OOM only at completions over {LONG_COMPLETION_SHARE:.0%} of max_completion_length is a '
                    f'warning (memory.verdicts.LONG_COMPLETION_SHARE), not a refusal'
                    if ordinary <= LONG_COMPLETION_SHARE * C else
                    f'an OOM only at completions over the {ordinary:,}-token mean (--completion-mean) is a '
                    f'warning, not a refusal')
                continue
            fix = None
            if m.phase == 'generate' and 'zero3_generation_gather' in m.phase_terms:
                msg += (f' (HF generation under ZeRO-3 gathers the whole model on every GPU, '
                        f'{m.phase_terms["zero3_generation_gather"]:.1f} GiB: ds3_gather_for_generation is true)')
                fix = ('ds3_gather_for_generation: false (each layer fetched as generation reaches it; slower), or '
                       'use_vllm (colocate, or a rollout server)')
            if m.role != 'rollout' and refused_at is not None and (reasoning or completion_mean is not None):
                msg += (f'; it fits only with completions under {refused_at:,} tokens, shorter than '
                        + (f'the {C:,} a reasoning model reaches ({reasoning})' if reasoning else
                           f'the {completion_mean:,}-token mean (--completion-mean)')
                        + f', so it is refused (max_completion_length: {refused_at} would cut its answers there)')
            report.findings.append(Finding(ERROR, 'memory.oom', [term.split(' ')[0]], msg, fix))
        elif m.fits and m.total_gib + MODEL_ERROR * _uncertain_gib(m) > m.capacity_gib and \
                ('tight', m.role) not in seen:
            seen.add(('tight', m.role))
            env_fix = m.role != 'rollout' and candidate(report) is not None  # envfix: where it is compatible
            report.findings.append(Finding(
                WARNING, 'memory.tight', [],
                f'GPU {m.gpu} ({m.role}) is predicted at {m.peak_fraction:.1%} of its {m.capacity_gib:.1f} GiB; the '
                f'memory model\'s median error on training peaks is {MODEL_ERROR:.0%} (README, Calibration) and '
                f'{_uncertain_gib(m):.1f} GiB of this is the trainer\'s, so it may not fit',
                f'keep {MODEL_ERROR:.0%} headroom: ' + ('export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the '
                'caching allocator then reserves less; no training setting changes), or ' if env_fix else '') +
                'lower vllm_gpu_memory_utilization or the micro-batch'))
    hard = [f for f in report.findings if f.severity == ERROR and f.rule.startswith(('memory.', 'vllm.'))]
    train_hard = [m for m in report.memory if m.role != 'rollout' and not m.fits]
    if conditional is not None:
        train_hard = []
    if want_fixes and train_hard:
        report.fixes = search_fixes(report, inp)
        if report.fixes:
            best = report.fixes[0]
            for f in hard:
                if f.fix is None:
                    f.fix = 'the proposed fix (memory.fix) below'
            report.findings.append(Finding(INFO, 'memory.fix', sorted(best.changes) + sorted(best.env),
                                           f'a config that fits (peak {best.peak_fraction:.0%} of the GPU, same '
                                           f'num_generations and prompts per optimizer step)',
                                           best.text(report.launch)))
        else:
            report.findings.append(Finding(WARNING, 'memory.no-fix', [],
                                           'no change within the searched knobs (vLLM length and utilisation, sleep, '
                                           'micro-batch split, checkpointing, offload, ZeRO stage, ZeRO-3 generation '
                                           'gather, vLLM TP) makes the '
                                           'training GPUs fit; use more or larger GPUs, or a smaller model', None))
    for f in hard:
        if f.fix is None:
            f.fix = 'more GPU memory per process (a larger card or more GPUs), or a smaller model'
    report.findings.sort(key=lambda f: {'error': 0, 'warning': 1, 'info': 2}[f.severity])
