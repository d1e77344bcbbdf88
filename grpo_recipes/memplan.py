"""Glue between the check and the memory model: run it, turn its verdicts into findings, and
search for a fix when a GPU does not fit."""
from __future__ import annotations

import os

from .arch import Arch
from .memory import Inputs, dominant_term, estimate, resolve_sampler
from .rules import ERROR, INFO, WARNING, Finding

SAMPLER_ENV = 'VLLM_USE_FLASHINFER_SAMPLER'


def memory_inputs(report, model_config: dict | None) -> Inputs | None:
    name, cap = report.hardware.capacity()
    if model_config is None:
        return None
    if cap is None:
        report.findings.append(Finding(INFO, 'memory.gpu-unknown', ['--gpu-type'],
                                       'GPU model unknown, so per-GPU memory was not predicted',
                                       'pass --gpu-type (A100-40G, A100-80G, H100, ...) or --gpu-mem GIB'))
        return None
    try:
        arch = Arch.from_config(model_config)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        report.findings.append(Finding(INFO, 'memory.arch-unknown', ['model'],
                                       f'cannot read the architecture from config.json ({e!r})', None))
        return None
    # as ms-swift applies an ENV block: a variable already in the environment wins
    env_sampler = os.environ.get(SAMPLER_ENV, report.launch.file_env.get(SAMPLER_ENV))
    pk = report.packages
    fi = None if 'flashinfer-python' not in pk else pk['flashinfer-python'] is not None
    sampler, why = resolve_sampler(env_sampler, pk.get('vllm'), fi)
    return Inputs(arch=arch, capacity_gib=cap, gpu_name=name, vllm_sampler=sampler, vllm_sampler_why=why)


def _structurally_ok(report) -> bool:
    return not any(f.severity == ERROR and f.rule.startswith(('batch.', 'args.', 'vllm.mode', 'launch.'))
                   for f in report.findings)


def plan_memory(report, model_config: dict | None, want_fixes: bool = True, data_stats: dict | None = None) -> None:
    inp = memory_inputs(report, model_config)
    if inp is not None and data_stats:
        # a micro-batch is padded to its longest prompt, which the data bounds more tightly than max_length
        ctx = inp.arch.context_len
        inp.prompt_len = min(report.cfg.max_length or ctx, data_stats['max'], ctx)
    if inp is None or not _structurally_ok(report):
        return
    cfg = report.cfg
    if cfg.per_device_train_batch_size < 1 or cfg.max_completion_length < 1 or \
            not 0 < cfg.vllm_gpu_memory_utilization <= 1 or cfg.vllm_tensor_parallel_size < 1:
        return
    report.memory = estimate(cfg, report.plan, inp)
    seen = set()
    for m in report.memory:
        for p in m.problems:
            key = (p['check'], m.role)
            if key in seen:
                continue
            seen.add(key)
            sev = p.get('severity', 'error')
            report.findings.append(Finding(ERROR if sev == 'error' else WARNING, p['check'],
                                           ['vllm_gpu_memory_utilization', 'vllm_max_model_len'],
                                           f'GPU {m.gpu} ({m.role}): {p["message"]}',
                                           'see the proposed fix below' if sev == 'error' else
                                           'raise vllm_gpu_memory_utilization or lower the rollout batch'))
        if m.peak_fraction > 1.0 and ('oom', m.role) not in seen:
            seen.add(('oom', m.role))
            term, gib = dominant_term(m)
            report.findings.append(Finding(
                ERROR, 'memory.oom', [term.split(' ')[0]],
                f'GPU {m.gpu} ({m.role}) needs {m.total_gib:.1f} GiB in the {m.phase} phase, more than its '
                f'{m.capacity_gib:.1f} GiB; the largest term is {term} ({gib:.1f} GiB)',
                'see the proposed fix below'))
    if want_fixes and report.memory and not all(m.fits for m in report.memory):
        from .fixes import search_fixes
        report.fixes = search_fixes(report, inp)
        if report.fixes:
            best = report.fixes[0]
            report.findings.append(Finding(INFO, 'memory.fix', sorted(best.changes),
                                           f'a config that fits (peak {best.peak_fraction:.0%} of the GPU, same '
                                           f'num_generations and prompts per optimizer step)', best.yaml_diff()))
        else:
            report.findings.append(Finding(WARNING, 'memory.no-fix', [],
                                           'no change within the searched knobs makes this launch fit; use more '
                                           'or larger GPUs, or a smaller model', None))
    report.findings.sort(key=lambda f: {'error': 0, 'warning': 1, 'info': 2}[f.severity])
