"""``check --replay``: torch's reserve above the allocated peak for the launch's own training step, from the traced
step replayed through the caching-allocator model (``trace.trace_launch``: the framework's no-grad passes and weight
loading, ``plan.old_logprobs_needed`` and ``plan.loads_with_device_map``), in place of the fast path's closed form
(``reserve.reserve_bytes``). The closed form stays for every other shape (a fix's). Imports torch, transformers and
peft: only when asked."""

from __future__ import annotations

from .inputs import GiB, Inputs
from .trainer import logits_rows

LOADS = {
    'device_map': 'loaded into one segment of their size (a device_map)',
    'moved': 'loaded on the CPU and moved',
    'init': 'made on the GPU',
}


def replay_key(cfg, inp: Inputs) -> tuple:
    """What the replayed step depends on: a fix that changes any of it is planned by the closed form."""
    return (
        cfg.per_device_train_batch_size,
        cfg.max_completion_length,
        inp.prompt_len,
        logits_rows(cfg, inp),
        cfg.gradient_checkpointing,
        cfg.tuner_type,
        cfg.lora_rank,
        cfg.target_modules,
        cfg.lora_dropout,
        cfg.beta,
        cfg.deepspeed,
        cfg.fsdp,
        cfg.torch_dtype,
        cfg.sequence_parallel_size,
        cfg.use_liger_kernel,
        inp.adamw,
        inp.alloc.text if inp.alloc is not None else None,
    )


def replayed_reserve(cfg, plan, model_config: dict, inp: Inputs, framework) -> tuple:
    """((``replay_key``, bytes) or None, the assumption line): the step as ``framework`` runs it. None where one
    process cannot show the step: DeepSpeed
    and FSDP keep flat sharded buffers the single-process trace does not allocate, and Ulysses sequence parallelism
    splits each sequence over a group."""
    if cfg.deepspeed or cfg.fsdp or cfg.sequence_parallel_size > 1:
        return None, (
            '--replay: the training step is not replayed under DeepSpeed, FSDP or sequence parallelism (one process '
            "cannot show the sharded step); torch's reserve is the closed form's"
        )
    from dataclasses import replace

    from .trace import trace_launch

    planned = inp.prompt_len or 0
    runs = []
    for prompt in sorted({planned, *(planned * k // 4 for k in (1, 2, 3))} - {0} or {0}, reverse=True):
        at = replace(inp, prompt_len=prompt)
        window = logits_rows(cfg, at)
        r = trace_launch(
            cfg,
            plan,
            model_config,
            prompt,
            str(cfg.model),
            inp.adamw,
            alloc_conf=inp.alloc,
            framework=framework,
            window=window,
        )
        runs.append((prompt, window, r))
    # the reserve is not monotonic in the shape (a segment never merges with another, so one block placed
    # differently early moves whole logits blocks later): the largest reserved figure over shorter prompts too, above
    # the planned shape's allocated peak
    _, _, top = runs[0]
    worst_prompt, window, worst = max(runs, key=lambda x: x[2].reserved_peak_gib)
    reserve = max(0.0, worst.reserved_peak_gib - top.traced_peak_gib) * GiB
    passes = ' and '.join(top.no_grad_passes) or 'none'
    tried = ', '.join(f'{p:,}' for p, _, _ in runs)
    return (replay_key(cfg, inp), reserve), (
        f"torch's reserve above the training step's allocated peak: {reserve / GiB:.2f} GiB, replayed (--replay): the "
        f'step traced on fake tensors and replayed through the caching-allocator model at prompts of {tried} tokens '
        f'(the reserve is not monotonic in the shape), the largest reserved at {worst_prompt:,} '
        f'({cfg.per_device_train_batch_size} x {window} logits positions); {top.allocator or "default allocator"}; '
        f'weights {LOADS[top.load]}; no-grad passes: {passes}; {sum(r.seconds for _, _, r in runs):.0f} s'
    )
