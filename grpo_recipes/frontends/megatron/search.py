"""The fix search for a Megatron-SWIFT GRPO launch that does not fit: the smallest set of changes to Megatron's and
ms-swift's knobs after which the guard's own check (rules + memory model) accepts the launch.

The data shapes are the ZeRO search's (memory/search.py): a ``Fix`` of ``{argument: (old, new)}``, its peak fraction
and phase. What never changes: ``global_batch_size`` (completions per optimizer step), ``num_generations`` and
``steps_per_generation`` / ``generation_batch_size`` -- so the prompts per optimizer step and per rollout stay equal.
A change of tensor or pipeline parallel size changes the data-parallel size, and with it the micro-batches per step,
not the batch.

Moves (one value per knob; the cheapest first, as a move's cost is its rank in ``MOVES``):
  vllm_gpu_memory_utilization  the colocated engine's share (0.3-0.9): vLLM's start-up check, the KV cache
  sleep_level 1/2              the engine's weights (and KV) released while Megatron trains (rollout_mixin.py)
  offload_model / offload_optimizer   Megatron's weights/grads and optimizer states on the CPU during rollout
  vllm_tensor_parallel_size    x2, x4, x8 within a node: the colocated engine's weights split over more GPUs, more
                               of its share left for the KV cache (the rules check the world and vLLM's heads divide)
  optimizer_cpu_offload        Megatron-LM's HybridDeviceOptimizer, fraction 1, with use_precision_aware_optimizer
                               (Megatron-LM's validate_args requires it on 3.x; on 4.x, without it, the fp32 main
                               copies stay on the GPU): the optimizer states on the CPU in every
                               phase (memory.py counts what stays on the GPU)
  micro_batch_size             halved: fewer tokens per forward, more micro-batches per step
  recompute_granularity full   with recompute_method uniform, recompute_num_layers 1 (Megatron-LM's full recompute)
  tensor_model_parallel_size   x2, x4 within a node (with sequence_parallel), as far as heads and the world divide
  pipeline_model_parallel_size x2, x4 as far as the layers and the world divide
Every candidate is checked by ``check`` itself (frontends/megatron/__init__.py): Megatron-LM's and ms-swift's layout
rules decide what is allowed (heads divisible by TP, layers by PP, the world by TP x PP x CP, the batches by DP), so
the search never restates them. Candidates: up to ``MAX_CHANGES`` moves, smallest sets first; bounded by
``MAX_CANDIDATES`` and a time limit, and the fixes returned are re-read from their argv (the flags after the launch's
own, as ms-swift's parser takes the later value) and checked again.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

from ...findings import ERROR
from ...memory.search import Fix, _yaml

MAX_CHANGES = 3
MAX_CANDIDATES = 4000
TIME_LIMIT_S = 5.0
MEMORY_RULES = frozenset(
    {
        'megatron.memory',
        'megatron.vllm-startup-memory',
        'megatron.vllm-no-kv',
        'megatron.vllm-kv-one-sequence',
        'megatron.vllm-kv-concurrency',
    }
)
UTILIZATIONS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)


def _moves(launch) -> list[tuple[str, list[dict]]]:
    """(knob, [its alternative settings]) for this launch, cheapest knob first."""
    a = launch.args
    colocate = a.get('vllm_mode') == 'colocate'
    out: list[tuple[str, list[dict]]] = []
    if colocate:
        cur = a.get('vllm_gpu_memory_utilization')
        out.append(
            ('vllm_gpu_memory_utilization', [{'vllm_gpu_memory_utilization': u} for u in UTILIZATIONS if u != cur])
        )
        level = int(a.get('sleep_level') or 0)
        out.append(('sleep_level', [{'sleep_level': s} for s in (1, 2) if s > level]))
        out.append(('offload_model', [] if a.get('offload_model') else [{'offload_model': True}]))
        out.append(('offload_optimizer', [] if a.get('offload_optimizer') else [{'offload_optimizer': True}]))
        # each colocated engine spans vllm_tensor_parallel_size ranks of one node (its weights split that many ways)
        vtp, node = a.get('vllm_tensor_parallel_size') or 1, launch.nproc_per_node
        vtps = [vtp * k for k in (2, 4, 8) if vtp * k <= node and node % (vtp * k) == 0]
        out.append(('vllm_tensor_parallel_size', [{'vllm_tensor_parallel_size': t} for t in vtps]))
    if not a.get('optimizer_cpu_offload'):
        # with use_precision_aware_optimizer: Megatron-LM's validate_args asserts the pair (ms-swift 3.x runs it), and
        # without it megatron-core keeps an fp32 main copy of the offloaded shards on the GPU (memory.py)
        off = {'optimizer_cpu_offload': True, 'optimizer_offload_fraction': 1.0, 'use_precision_aware_optimizer': True}
        out.append(('optimizer_cpu_offload', [off]))
    mbs = a.get('micro_batch_size') or 1
    out.append(('micro_batch_size', [{'micro_batch_size': m} for m in range(mbs - 1, 0, -1) if mbs % m == 0]))
    if a.get('recompute_granularity') != 'full':
        full = {'recompute_granularity': 'full', 'recompute_method': 'uniform', 'recompute_num_layers': 1}
        out.append(('recompute', [full]))
    tp = a.get('tensor_model_parallel_size') or 1
    tps = [tp * k for k in (2, 4, 8) if tp * k <= launch.nproc_per_node and launch.nproc_per_node % (tp * k) == 0]
    out.append(
        ('tensor_model_parallel_size', [{'tensor_model_parallel_size': t, 'sequence_parallel': True} for t in tps])
    )
    pp = a.get('pipeline_model_parallel_size') or 1
    pps = [pp * k for k in (2, 4) if launch.world_size % (pp * k) == 0]
    out.append(('pipeline_model_parallel_size', [{'pipeline_model_parallel_size': p} for p in pps]))
    return [(k, v) for k, v in out if v]


def _errors(findings) -> set[str]:
    return {f.rule for f in findings if f.severity == ERROR}


def _accepted(findings, before: set[str]) -> bool:
    """No memory error, and no error the launch did not already have."""
    errs = _errors(findings)
    return not (errs & MEMORY_RULES) and errs <= (before - MEMORY_RULES)


def _changes(launch, settings: dict) -> dict:
    """{key: (old, new)} for the settings that differ from the launch's."""
    return {k: (launch.args.get(k), v) for k, v in settings.items() if launch.args.get(k) != v}


def fixed_argv(launch, fix: Fix) -> list[str]:
    """The launch's own arguments and the fix's flags after them (ms-swift's parser keeps the later value)."""
    return list(launch.argv) + fix.argv()


def search(
    launch,
    hw,
    model: dict,
    vllm_version: str | None = None,
    prompt_len: int | None = None,
    limit: int = 3,
    time_limit_s: float = TIME_LIMIT_S,
) -> list[Fix]:
    """Up to ``limit`` fixes, fewest changes first, then the cheapest knobs, then the lowest peak; [] when the launch
    has no memory error or nothing within ``MAX_CHANGES`` moves fits."""
    from . import check, read

    findings, _, mem = check(launch, hw, model, vllm_version, prompt_len)
    before = _errors(findings)
    if mem is None or not (before & MEMORY_RULES):
        return []
    knobs = _moves(launch)
    start, tried = time.monotonic(), 0
    found: list[tuple[tuple, Fix]] = []
    for size in range(1, MAX_CHANGES + 1):
        for combo in itertools.combinations(range(len(knobs)), size):
            for choice in itertools.product(*(knobs[i][1] for i in combo)):
                if tried >= MAX_CANDIDATES or time.monotonic() - start > time_limit_s:
                    break
                tried += 1
                settings = {k: v for c in choice for k, v in c.items()}
                changes = _changes(launch, settings)
                if not changes:
                    continue
                cand = replace(launch, args={**launch.args, **settings})
                f2, _, m2 = check(cand, hw, model, vllm_version, prompt_len)
                if m2 is None or not _accepted(f2, before):
                    continue
                fix = Fix(
                    changes=changes,
                    peak_fraction=round(m2['peak_gib'] / m2['capacity_gib'], 3),
                    phase=m2['peak_phase'],
                )
                found.append(((size, sum(combo), fix.peak_fraction), fix))
        if found:
            break
    found.sort(key=lambda x: x[0])
    out: list[Fix] = []
    for _, fix in found:
        # the fix as the user applies it: its flags after the launch's, re-read and checked from scratch
        again = read(fixed_argv(launch, fix), launch.env, launch.source, launch.release)
        f3, _, m3 = check(again, hw, model, vllm_version, prompt_len)
        if m3 is not None and _accepted(f3, before):
            out.append(fix)
        if len(out) >= limit:
            break
    return out


def fixed_launch(launch, fix: Fix):
    """The launch with the fix's flags after its own, read again as ms-swift reads it (the ``fixed_launch`` hook of
    framework.py's MEGATRON: ``--verify`` and ``--write-fix``), and the parts of the fix that are no flag (none)."""
    from . import read

    return read(fixed_argv(launch, fix), launch.env, launch.source, launch.release), []


def fix_text(fix: Fix, launch) -> str:
    """A fix as the user pastes it: ``megatron rlhf`` flags for a command line, or ``in CONFIG, set:`` and one
    ``key: value`` line per setting for a YAML/JSON launch."""
    from pathlib import Path

    if launch.config_file:
        return f'in {Path(launch.config_file).name}, set:\n' + '\n'.join(fix.yaml_lines())
    new = ' '.join(f'--{k} {_yaml(v)}' for k, (_, v) in fix.changes.items())
    # what the user wrote: a default the launch never set is not quoted back
    old = ', '.join(f'--{k} {_yaml(o)}' for k, (o, _) in fix.changes.items() if k in launch.explicit)
    return f'set {new} on the megatron rlhf command line' + (f' (was {old})' if old else '')


def with_fixes(findings: list, fixes: list[Fix], launch) -> list:
    """The findings with the first fix as the memory findings' fix (their one-line hints where none was found)."""
    if not fixes:
        return findings
    text = fix_text(fixes[0], launch)
    return [replace(f, fix=text) if f.rule in MEMORY_RULES and f.severity == ERROR else f for f in findings]
