"""Tuner and rewards."""

from __future__ import annotations

import json

from .. import swift_args
from ..findings import ERROR, INFO, WARNING, Finding
from .registry import Context, rule


@rule('tuner.ref-model', 'tuner.ref-model-loaded')
def ref_model_with_lora(ctx: Context) -> list[Finding]:
    """ms-swift refuses a ref_model with LoRA (swift/arguments/rlhf_args.py ``__post_init__``); ms-swift and TRL
    load a second full copy as reference for full training with beta != 0 (TRL's GRPOTrainer: no ref_model only when
    beta == 0.0 or with a PEFT model, trl/trainer/grpo_trainer.py)."""
    cfg = ctx.cfg
    if cfg.ref_model and cfg.is_lora:
        return [
            Finding(
                ERROR,
                'tuner.ref-model',
                ['ref_model', 'tuner_type'],
                'CPO/ORPO or LoRA training does not require a ref_model to be passed in.',
                'remove ref_model (LoRA disables the adapter to get reference log-probs)',
                'swift/arguments/rlhf_args.py::__post_init__',
            )
        ]
    if cfg.tuner_type == 'full' and cfg.beta != 0:
        return [
            Finding(
                INFO,
                'tuner.ref-model-loaded',
                ['beta', 'tuner_type'],
                f'full-parameter training with beta={cfg.beta}: {ctx.launch.fw.display} loads a second copy of the '
                'model as the reference',
                'beta: 0 drops it (examples/train/grpo/external/grpo_32b_full.sh)',
            )
        ]
    return []


@rule(
    'reward.none', 'reward.unknown', 'reward.plugin', 'reward.weights', 'reward.math-verify', 'reward.solution-column'
)
def reward_rules(ctx: Context) -> list[Finding]:
    """Rewards: ms-swift's GRPO trainer raises without reward_funcs/reward_model/gym env, on an unknown
    reward name and on a reward_weights count mismatch (swift/rlhf_trainers/grpo_trainer.py); the accuracy
    reward needs math_verify and a ``solution`` column (swift/rewards/orm.py)."""
    cfg = ctx.cfg
    if not ctx.launch.fw.rewards_by_name:
        return []  # TRL scripts pass their reward functions in code
    out = []
    # grpo_trainer.py: `if not self.reward_funcs and not self.use_gym_env and not self._has_teacher: raise`; in
    # server mode use_gym_env is the rollout server's unless the trainer sets it (rollout_mixin.py)
    teacher = cfg.teacher_model or cfg.teacher_model_server
    if (
        cfg.rlhf_type == 'grpo'
        and not cfg.reward_funcs
        and not cfg.reward_model
        and not teacher
        and not cfg.use_gym_env
    ):
        server = cfg.rollout_mode == 'server' and cfg.use_gym_env is None
        r = ctx.launch.rollout
        if server and r is not None and r.use_gym_env:
            pass  # the rollout server runs a gym environment: its rewards
        elif server and r is None:
            out.append(
                Finding(
                    WARNING,
                    'reward.none',
                    ['reward_funcs'],
                    'no reward_funcs or reward_model: ms-swift stops ("You must specify reward_funcs or '
                    'reward_model") unless the rollout server runs a gym environment (--use_gym_env true)',
                    "reward_funcs: [accuracy, format], or give the server's command with --rollout",
                    'swift/rlhf_trainers/grpo_trainer.py',
                )
            )
        else:
            out.append(
                Finding(
                    ERROR,
                    'reward.none',
                    ['reward_funcs'],
                    'You must specify reward_funcs or reward_model',
                    'reward_funcs: [accuracy, format]',
                    'swift/rlhf_trainers/grpo_trainer.py',
                )
            )
    builtin = set(swift_args.snapshot().get('builtin_reward_funcs', []))
    unknown = [r for r in cfg.reward_funcs if r not in builtin]
    if unknown and not cfg.external_plugins:
        for r in unknown:
            out.append(
                Finding(
                    ERROR,
                    'reward.unknown',
                    ['reward_funcs'],
                    f'reward_function {r} is not implemented in swift.rewards (built-ins: '
                    f'{", ".join(sorted(builtin))}); ms-swift only finds out when the trainer is built',
                    'fix the name, or register it in a file given with external_plugins',
                    'swift/rlhf_trainers/grpo_trainer.py',
                )
            )
    elif unknown:
        out.append(
            Finding(
                INFO,
                'reward.plugin',
                ['reward_funcs', 'external_plugins'],
                f'reward(s) {", ".join(unknown)} must be registered by external_plugins '
                f'({", ".join(cfg.external_plugins)}); not checked before launch',
                None,
            )
        )
    n_rewards = len(cfg.reward_funcs) + len(cfg.reward_model or [])
    if cfg.reward_weights is not None and len(cfg.reward_weights) != n_rewards:
        out.append(
            Finding(
                ERROR,
                'reward.weights',
                ['reward_weights'],
                f'Number of reward weights ({len(cfg.reward_weights)}) must match number of reward '
                f'functions ({n_rewards})',
                f'reward_weights: {[1.0] * n_rewards}',
                'swift/rlhf_trainers/grpo_trainer.py',
            )
        )
    if 'accuracy' in cfg.reward_funcs:
        if ctx.packages.get('math-verify') is None:
            out.append(
                Finding(
                    ERROR,
                    'reward.math-verify',
                    ['reward_funcs'],
                    'The math_verify package is required by the accuracy reward',
                    'pip install math-verify',
                    'swift/rewards/orm.py::MathAccuracy',
                )
            )
        for path, cols in ctx.dataset_columns.items():
            if cols is None:
                continue
            renamed = set(cols) | set(_column_renames(cfg.columns).get(c) for c in cols) - {None}
            if 'solution' not in renamed:
                out.append(
                    Finding(
                        ERROR,
                        'reward.solution-column',
                        ['dataset', 'columns'],
                        f'the accuracy reward needs a `solution` column; {path} has {", ".join(cols)}',
                        'columns: {"answer": "solution"} if `answer` holds the '
                        'final answer, or preprocess the data (the launchers do)',
                        'docs FAQ Q26; swift/rewards/orm.py',
                    )
                )
    return out


def _column_renames(columns: str | None) -> dict:
    if not columns:
        return {}
    try:
        v = json.loads(columns)
    except (ValueError, TypeError):
        return {}
    return v if isinstance(v, dict) else {}
