"""The speed estimate in the report's outputs: the ``--json`` keys and the console's lines (plain text; cli/render.py
prints them)."""

from __future__ import annotations

PHASES = ('rollout', 'logprobs', 'train', 'weight_sync', 'other')
# GSM8K's train split: 7,473 rows (huggingface.co/datasets/openai/gsm8k, config "main", split "train"): the recipes'
# data set, so a header's GPU-hours are per GSM8K epoch
GSM8K_TRAIN_ROWS = 7473


def gpu_hours_per_epoch(est, rows: int = GSM8K_TRAIN_ROWS, num_iterations: int = 1) -> float:
    """GPU-hours of one pass over ``rows`` prompts: every prompt trained once (num_iterations times on its rollout),
    at the estimate's seconds per prompt, on all the launch's GPUs (a rollout server's included)."""
    return rows * est.seconds_per_prompt * max(1, num_iterations) * est.gpus / 3600


def speed_json(report) -> dict:
    """``{"speed": {...}}`` (null with ``speed_unchecked`` when not predicted); ``speed_ranking`` with --fastest."""
    est = getattr(report, 'speed', None)
    if est is None:
        out = {'speed': None}
        if getattr(report, 'speed_unchecked', None):
            out['speed_unchecked'] = report.speed_unchecked
        return out
    d = {
        'step_seconds': est.step_seconds,
        'step_seconds_low': est.step_seconds_low,
        'step_seconds_high': est.step_seconds_high,
        'phases': {k: est.phases.get(k, 0.0) for k in PHASES},
        'phase_shares': {k: round(v, 3) for k, v in est.shares.items()},
        'completion_tokens_assumed': {
            'mean': est.completion_tokens_assumed['mean'],
            'max': est.completion_tokens_assumed['max'],
        },
        'prompt_tokens_assumed': est.prompt_tokens_assumed,
        'tokens_per_second': est.tokens_per_second,
        'seconds_per_prompt': est.seconds_per_prompt,
        'gpus': est.gpus,
        'gpu_hours_per_epoch': est.gpu_hours_per_epoch,
        'hours_per_epoch': est.hours_per_epoch,
        'assumptions': est.assumptions,
        'detail': est.detail,
    }
    out = {'speed': d}
    ranking = getattr(report, 'speed_ranking', None)
    if ranking is not None:
        out['speed_ranking'] = ranking.to_dict()
    return out


def _fmt_s(x: float) -> str:
    return f'{x:.1f} s' if x < 600 else f'{x / 60:.1f} min'


def speed_lines(report) -> list[str]:
    """The console's throughput block, one line each (no markup)."""
    est = getattr(report, 'speed', None)
    if est is None:
        why = getattr(report, 'speed_unchecked', None)
        return [f'Predicted speed: not predicted ({why})'] if why else []
    shares = est.shares
    lines = [
        f'Predicted speed: {_fmt_s(est.step_seconds)} per optimizer step (band {_fmt_s(est.step_seconds_low)} - '
        f'{_fmt_s(est.step_seconds_high)}), {est.seconds_per_prompt:.2f} s per prompt, '
        f'{est.tokens_per_second:,.0f} completion tokens/s on {est.gpus} GPU(s)',
        '  phases: ' + ', '.join(f'{k} {shares.get(k, 0):.0%}' for k in PHASES if shares.get(k, 0) >= 0.005),
        f'  assumed: completions of {est.completion_tokens_assumed["mean"]:,} tokens on average, the longest '
        f'{est.completion_tokens_assumed["max"]:,}; prompts of {est.prompt_tokens_assumed["mean"]:,} tokens',
    ]
    d = est.detail
    if d.get('engine') == 'vllm':
        lines.append(
            f'  rollout: {d["sequences_per_engine"]:g} sequences per engine, {d["concurrency"]:g} at once '
            f'({d["waves"]} wave(s)), {d["decode_step_ms"]} ms per decode step'
        )
    elif d.get('engine') == 'hf_generate':
        lines.append(
            f'  rollout: HF generate, {d["sequences_per_engine"]} sequences per process, '
            f'{d["decode_step_ms"]} ms per token step (no paged attention or CUDA graphs)'
        )
    if est.gpu_hours_per_epoch is not None:
        lines.append(f'  one epoch: {est.hours_per_epoch:,.1f} h, {est.gpu_hours_per_epoch:,.1f} GPU-hours')
    for a in est.assumptions:
        lines.append(f'  - {a}')
    ranking = getattr(report, 'speed_ranking', None)
    if ranking is not None:
        lines += ranking.lines()
    return lines


def header_line(report) -> str | None:
    """A recipe header's line (recipes.plan_block): predicted seconds per step, band, phase shares, what was assumed."""
    est = getattr(report, 'speed', None)
    if est is None:
        return None
    shares = est.shares
    phases = ' '.join(f'{k} {shares[k]:.0%}' for k in PHASES if est.phases.get(k, 0) and shares[k] >= 0.005)
    mu = getattr(getattr(report, 'cfg', None), 'num_iterations', 1) or 1
    gpu_h = gpu_hours_per_epoch(est, num_iterations=mu)
    return (
        f'# speed (predicted, docs/throughput.md): {est.step_seconds:.0f} s/step (band {est.step_seconds_low:.0f}-'
        f'{est.step_seconds_high:.0f}), {est.seconds_per_prompt:.1f} s/prompt, {gpu_h:.0f} GPU-hours per GSM8K '
        f'epoch ({GSM8K_TRAIN_ROWS:,} prompts, {est.gpus} GPUs); {phases}; completions '
        f'{est.completion_tokens_assumed["mean"]} avg / {est.completion_tokens_assumed["max"]} max assumed'
    )
