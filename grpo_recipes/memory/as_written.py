"""Per-GPU memory of a launch that has errors deciding its batch or processes.

Such a launch gets no memory verdict (an OOM finding or a fix would be about a launch that will not start as
written), but the figures can often still be computed, and a user fixing the batch wants to see them. This
gives the memory for display only: no findings, no fix, and an assumption line that says so.
"""

from __future__ import annotations

from dataclasses import replace


def memory_as_written(report, inp) -> tuple[list, str | None]:
    """(the per-GPU memory of the plan as written, the assumption line that says so), or ([], None) when the memory
    model cannot compute it."""
    from .estimate import estimate

    cfg = report.cfg
    if (
        cfg.per_device_train_batch_size < 1
        or cfg.max_completion_length < 1
        or cfg.num_generations < 1
        or not 0 < cfg.vllm_gpu_memory_utilization <= 1
        or cfg.vllm_tensor_parallel_size < 1
    ):
        return [], None  # out of range: there is nothing meaningful to compute
    try:
        memory = estimate(cfg, report.plan, replace(inp))
    except (ArithmeticError, ValueError, TypeError, KeyError, IndexError):
        return [], None  # the plan the errors describe cannot be sized (e.g. no processes)
    if not memory:
        return [], None
    for m in memory:  # no verdict on a launch that will not start as written
        m.verdict = 'withheld'
    return memory, (
        'memory is shown for the launch as written; no memory verdict or fix is given until the errors '
        'that decide the batch or the processes are fixed'
    )
