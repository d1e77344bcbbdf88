"""Learning signal: how many prompts per optimizer step carry a non-zero advantage.

GRPO's advantage is a completion's reward minus its group's mean (ms-swift: ``rlhf_trainers/grpo_trainer.py``
``_compute_advantages``), so a group whose ``num_generations`` rewards are all equal contributes nothing to the
policy loss. For a prompt the model solves with probability p, a group of G independent completions is all equal
(all pass or all fail) with probability p**G + (1 - p)**G. Averaged over the prompts' pass rates, that is the
expected share of zero-advantage groups, which ms-swift logs as ``frac_reward_zero_std``.

The pass rates come from ``grpo-data stats DATA --completions completions.jsonl --json`` (``--data-stats``: its
``completions.pass_rates``, one per prompt seen in a run's log) or ``--pass-rate P`` (one rate for every prompt: a
model's benchmark score, e.g. 0.92 for Qwen2.5-7B-Instruct on GSM8K). A single rate understates the all-equal
share of real data, whose pass rates spread towards 0 and 1; the per-prompt rates are the better input.

With ``dynamic_sample`` ms-swift (``_dynamic_sampling``, DAPO arXiv:2503.14476 section 3.2) keeps the groups
with reward variance from up to ``1 + max_resample_times`` rollouts; when they do not fill the batch it trains on
the original batch. On average k rollouts yield k x (1 - share) informative groups per batch slot, so the batch is
filled when (1 + max_resample_times) x (1 - share) >= 1.
"""

from __future__ import annotations

from ..findings import INFO, WARNING, Finding
from .registry import Context, rule

MIN_INFORMATIVE_PROMPTS = 2
"""Fewer informative prompts per optimizer step than this and the step's gradient rests on one question (or none):
the advantage is a within-group comparison, so one group is one question's signal."""

SOURCE = 'swift/rlhf_trainers/grpo_trainer.py::_compute_advantages, _dynamic_sampling'


def all_equal_probability(p: float, g: int) -> float:
    """P(all G completions pass or all fail) for a prompt with pass rate p."""
    return p**g + (1.0 - p) ** g


def zero_variance_share(pass_rates: list[float], g: int) -> float:
    return sum(all_equal_probability(p, g) for p in pass_rates) / len(pass_rates)


def pass_rates_of(ctx: Context) -> tuple[list[float] | None, str]:
    if ctx.pass_rate is not None:
        return [float(ctx.pass_rate)], f'--pass-rate {ctx.pass_rate:g} for every prompt'
    comp = (ctx.data_stats or {}).get('completions') if isinstance(ctx.data_stats, dict) else None
    rates = comp.get('pass_rates') if isinstance(comp, dict) else None
    if isinstance(rates, list) and rates and all(isinstance(r, (int, float)) and 0 <= r <= 1 for r in rates):
        return [float(r) for r in rates], f"{len(rates):,} prompts' pass rates from --data-stats"
    return None, ''


@rule('signal.few-informative-prompts', 'signal.estimate')
def learning_signal(ctx: Context) -> list[Finding]:
    """Predicted share of all-equal groups and informative prompts per optimizer step (module docstring)."""
    rates, origin = pass_rates_of(ctx)
    cfg, plan = ctx.cfg, ctx.plan
    G = cfg.num_generations
    prompts = plan.prompts_per_optimizer_step
    if rates is None or G is None or G < 2 or not prompts:
        return []
    share = zero_variance_share(rates, G)
    informative = prompts * (1.0 - share)
    mean = sum(rates) / len(rates)
    estimate = (
        f'predicted share of groups with all {G} rewards equal (no advantage, frac_reward_zero_std): '
        f'{share:.0%} ({origin}; mean pass rate {mean:.0%}; p^G + (1-p)^G per prompt); '
        f'{informative:.1f} of {prompts:g} prompts per optimizer step carry signal'
    )
    rollouts = None
    if cfg.dynamic_sample:
        tries = 1 + max(cfg.max_resample_times, 0)
        if share < 1.0 and tries * (1.0 - share) >= 1.0:
            rollouts = 1.0 / (1.0 - share)
            informative = prompts
            estimate += (
                f'; dynamic_sample fills the batch with about {rollouts:.1f} rollouts per step on average '
                f'(at most {tries})'
            )
        else:
            estimate += (
                f"; dynamic_sample's {tries} rollouts find {tries * (1.0 - share):.2f} batches of "
                f'informative groups on average, so it usually falls back to the original batch'
            )
    out = [
        Finding(INFO, 'signal.estimate', ['num_generations'], estimate[0].upper() + estimate[1:] + '.', None, SOURCE)
    ]
    if informative < MIN_INFORMATIVE_PROMPTS:
        fixes = []
        if not cfg.dynamic_sample:
            fixes.append(
                'dynamic_sample: true (with max_resample_times so that (1 + max_resample_times) x '
                f'{1 - share:.2f} >= 1: max_resample_times: {_retries_needed(share)})'
            )
        elif rollouts is None:
            fixes.append(f'max_resample_times: {_retries_needed(share)}')
        fixes.append(
            f'more prompts per step (gradient_accumulation_steps or per_device_train_batch_size) or more '
            f'generations (num_generations: {2 * G})'
        )
        fixes.append(
            'a pass-rate filter: grpo-data filter DATA -o KEPT --completions completions.jsonl '
            '--keep-pass-rate 0.05:0.95'
        )
        out.append(
            Finding(
                WARNING,
                'signal.few-informative-prompts',
                ['num_generations', 'dynamic_sample', 'gradient_accumulation_steps'],
                f'Only {informative:.1f} of {prompts:g} prompts per optimizer step are predicted to carry '
                f'a learning signal (fewer than {MIN_INFORMATIVE_PROMPTS}): {share:.0%} of groups are '
                f'predicted to have all {G} rewards equal, so their advantage is 0.',
                '; or '.join(fixes),
                SOURCE,
            )
        )
    return out


def _retries_needed(share: float) -> int:
    """The smallest max_resample_times with (1 + n)(1 - share) >= 1 (capped at 50: beyond that filter the data)."""
    if share >= 1.0:
        return 50
    import math

    return min(50, max(0, math.ceil(1.0 / (1.0 - share) - 1e-9) - 1))
