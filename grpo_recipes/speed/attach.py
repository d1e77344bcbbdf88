"""The throughput model's inputs from a check that has run (its typed config, plan, hardware and the memory model's
vLLM KV cache), stated lengths (``--completion-mean``, ``--data-stats``), and the estimate attached to the report."""

from __future__ import annotations

from ..memory.arch import Arch
from . import constants as K
from .model import SpeedInputs, predict
from .specs import spec_for


def completion_lengths(report, completion_mean: int | None) -> tuple[int, int, str]:
    """(mean, longest, why): the longest is max_completion_length (a batch's long tail reaches the cap); the mean is
    the stated one, else the cap for a reasoning model (memory.verdicts.reasoning_model: the decision the memory verdict
    takes too), else DEFAULT_COMPLETION_SHARE of it."""
    from ..memory.verdicts import reasoning_model

    cfg = report.cfg
    cap = max(1, cfg.max_completion_length)
    if completion_mean is not None:
        mean = max(1, min(cap, int(completion_mean)))
        capped = f' (capped at {cap})' if completion_mean > cap else ''
        return mean, cap, f'--completion-mean {completion_mean}{capped}'
    why = reasoning_model(report)
    if why:
        return cap, cap, f'{why}: completions assumed to reach max_completion_length'
    mean = max(1, int(cap * K.DEFAULT_COMPLETION_SHARE))
    return (
        mean,
        cap,
        (
            f'completions assumed {K.DEFAULT_COMPLETION_SHARE:.0%} of max_completion_length on average '
            f'(pass --completion-mean N)'
        ),
    )


def prompt_lengths(cfg, data_stats: dict | None) -> tuple[int, int, str]:
    """(mean, padded, why): --data-stats' mean and p90 (a micro-batch pads to its longest prompt), else the stated
    default, never above max_length."""
    bound = cfg.max_length or None
    if data_stats and data_stats.get('mean'):
        mean = int(round(float(data_stats['mean'])))
        pad = int((data_stats.get('percentiles') or {}).get('p90') or data_stats.get('max') or mean)
        if bound:
            mean, pad = min(mean, bound), min(pad, bound)
        return mean, max(mean, pad), "prompt lengths from --data-stats (mean, p90 as a micro-batch's longest)"
    n = min(K.DEFAULT_PROMPT, bound) if bound else K.DEFAULT_PROMPT
    return n, n, f'prompts of {n} tokens assumed (no --data-stats)'


def speed_inputs(
    report, model_config: dict | None, data_stats: dict | None = None, completion_mean: int | None = None
) -> tuple[SpeedInputs | None, str | None, list[str]]:
    """(inputs, None, assumptions) or (None, why not, [])."""
    if model_config is None:
        return None, 'no config.json for the model', []
    card, _ = report.hardware.capacity()
    spec = spec_for(card)
    if spec is None:
        return None, f'GPU {card or "unknown"} has no throughput spec (pass --gpu-type with a catalogued card)', []
    try:
        arch = Arch.from_config(model_config)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        return None, f'cannot read the architecture ({e!r})', []
    cfg = report.cfg
    cm, cx, cwhy = completion_lengths(report, completion_mean)
    pm, pp, pwhy = prompt_lengths(cfg, data_stats)
    kv = None
    weights = None
    for m in report.memory:  # the rollout engine's KV cache: a server's GPU, or a colocated training GPU
        if m.vllm and m.vllm.get('kv_tokens') is not None and (m.role == 'rollout' or cfg.vllm_mode != 'server'):
            kv = m.vllm['kv_tokens']
            weights = m.vllm.get('weights_gib', 0) * 2**30 * max(1, cfg.vllm_tensor_parallel_size) or None
            break
    from ..memory.vllm import _vllm_large_card

    _, cap = report.hardware.capacity()
    notes = [cwhy, pwhy]
    if cfg.use_vllm and kv is None:
        notes.append("vLLM's KV cache not known (memory not planned): the rollout is counted in one wave")
    rows = data_stats.get('count') if data_stats else None
    return (
        SpeedInputs(
            arch=arch,
            spec=spec,
            gpu_name=card,
            prompt_mean=pm,
            prompt_pad=pp,
            completion_mean=cm,
            completion_max=cx,
            framework=report.launch.framework,
            kv_tokens=kv,
            vllm_weight_bytes=weights,
            dataset_rows=rows,
            vllm_large_card=_vllm_large_card(cap or 80, card),
        ),
        None,
        notes,
    )


def attach_speed(
    report,
    model_config: dict | None,
    data_stats: dict | None = None,
    completion_mean: int | None = None,
    fastest: bool = False,
) -> None:
    """Set ``report.speed`` (a SpeedEstimate, or None with ``report.speed_unchecked`` saying why) and, with ``fastest``,
    ``report.speed_ranking`` (fastest.Ranking)."""
    if report.launch.kind != 'train':
        return
    inp, why, notes = speed_inputs(report, model_config, data_stats, completion_mean)
    if inp is None:
        report.speed_unchecked = why
        return
    try:
        est = predict(report.cfg, report.plan, inp)
    except (ValueError, ZeroDivisionError) as e:  # a batch the rules already refuse
        report.speed_unchecked = f"the launch's batch settings do not give a step ({e})"
        return
    est.assumptions = notes
    report.speed = est
    if fastest:
        from .fastest import rank

        report.speed_ranking = rank(report, inp, model_config, data_stats)
