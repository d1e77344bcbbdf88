"""Batch arithmetic (ms-swift 4.6 swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params, TRL
GRPOConfig.__post_init__)."""

from __future__ import annotations

import math

from ..divisors import divisors
from ..findings import ERROR, INFO, WARNING, Finding
from ..versions import version_tuple
from .registry import Context, rule

# Who checks the generation batch, by ms-swift release (read in each release's source):
# 4.2 on: swift/rlhf_trainers/args_mixin.py _init_generation_batch_params (the messages below by default);
# 3.5 to 4.1: GRPOConfig.check_num_generations (swift/trainers/rlhf_arguments.py in 3.x, swift/rlhf_trainers/
# arguments.py in 4.0/4.1); before 3.5: TRL's GRPOTrainer.__init__ (trl/trainer/grpo_trainer.py; TRL 0.17 is the
# newest ms-swift 3.4 allows), which counts gradient_accumulation_steps where later releases count
# steps_per_generation.
OWN_CHECK = (4, 2)
CHECK_NUM_GENERATIONS = (3, 5)


def swift_batch_check(ctx: Context) -> tuple[str, str]:
    """('own' | 'check_num_generations' | 'trl_trainer', the source to cite) for the ms-swift release the launch
    is judged by (the installed one, or --swift-version; unknown: 4.6)."""
    v = version_tuple((ctx.packages or {}).get('ms-swift'))
    v = (v + (0, 0))[:2] if v else None
    if v is None or v >= OWN_CHECK:
        return 'own', 'swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params'
    if v >= CHECK_NUM_GENERATIONS:
        path = 'swift/rlhf_trainers/arguments.py' if v >= (4, 0) else 'swift/trainers/rlhf_arguments.py'
        return 'check_num_generations', f'{path}::GRPOConfig.check_num_generations'
    return 'trl_trainer', (
        'trl/trainer/grpo_trainer.py::GRPOTrainer.__init__ (TRL 0.17; ms-swift < 3.5 leaves the check to TRL)'
    )


def effective_batch_message(world: int, bs: int, steps: int, G: int, valid: list[int]) -> str:
    """ms-swift 3.5-4.1's check_num_generations (and TRL 0.17's GRPOTrainer, with gradient_accumulation_steps)."""
    return (
        f'The effective train batch size ({world} x {bs} x {steps}) must be evenly divisible by the number of '
        f'generations per prompt ({G}). Given the current effective train batch size, the valid values for the '
        f'number of generations are: {valid}.'
    )


@rule(
    'batch.per-device',
    'batch.accumulation',
    'batch.num-generations',
    'batch.generation-batch',
    'batch.steps-per-generation',
    'batch.num-generations-divides',
    'batch.eval',
)
def batch_rules(ctx: Context) -> list[Finding]:
    """The GRPO batch arithmetic: ms-swift's ``_init_generation_batch_params``
    (swift/rlhf_trainers/args_mixin.py) and TRL's ``GRPOConfig.__post_init__`` (trl/trainer/grpo_config.py) raise
    ValueError when the generation batch is not a multiple of the global batch or of num_generations."""
    cfg, p = ctx.cfg, ctx.plan
    own = ctx.launch.fw.own_batch_source  # TRL checks its own batch; ms-swift's release decides who checks it
    trl = own is not None
    era, src = ('own', own) if trl else swift_batch_check(ctx)
    world = p.world_size
    bs = cfg.per_device_train_batch_size
    out = []
    if bs < 1:
        return [
            Finding(
                ERROR,
                'batch.per-device',
                ['per_device_train_batch_size'],
                f'per_device_train_batch_size must be >= 1 (got {bs})',
                'per_device_train_batch_size: 1',
            )
        ]
    if p.gradient_accumulation_steps < 1:
        return [accumulation_finding(p.gradient_accumulation_steps, cfg, p, trl, era, src)]
    G = cfg.num_generations
    opd = not trl and era == 'own' and (cfg.teacher_model or cfg.teacher_model_server)  # OPD-RL: the teacher's
    # log-ratio is the advantage, one generation is enough (rlhf_args.py::_check_teacher returns before the check)
    if G <= 1 and cfg.rlhf_type == 'grpo' and not opd:
        out.append(
            Finding(
                ERROR,
                'batch.num-generations',
                ['num_generations'],
                'GRPO requires at least 2 generations per prompt to calculate the advantages. You provided '
                f'{G}, which is less than the minimum required.'
                if trl or era != 'own'
                else 'num_generations must be greater than 1 for GRPO',
                'num_generations: 8',
                src if trl or era != 'own' else 'swift/arguments/rlhf_args.py::_check_teacher',
            )
        )
    global_bs = bs * world
    gbs, spg = cfg.generation_batch_size, cfg.steps_per_generation
    if gbs is not None and spg is None and gbs % global_bs:
        out.append(
            Finding(
                ERROR,
                'batch.generation-batch',
                ['generation_batch_size', 'per_device_train_batch_size'],
                f'generation_batch_size ({gbs}) must be divisible by the global batch size ({global_bs}).',
                f'generation_batch_size: {max(1, round(gbs / global_bs)) * global_bs} '
                f'(a multiple of per_device_train_batch_size × world = {global_bs})',
                src,
            )
        )
        return out
    if trl and gbs is not None and spg is not None:
        out.append(
            Finding(
                ERROR,
                'batch.generation-batch',
                ['generation_batch_size', 'steps_per_generation'],
                "'generation_batch_size' and 'steps_per_generation' can not be both configured at the same time",
                'set only one of generation_batch_size and steps_per_generation',
                src,
            )
        )
        return out
    if gbs is not None and spg is not None and gbs != global_bs * spg:
        out.append(
            Finding(
                ERROR,
                'batch.generation-batch',
                ['generation_batch_size', 'steps_per_generation'],
                f'generation_batch_size ({gbs}) must equal per_device_train_batch_size * world_size * '
                f'steps_per_generation = {global_bs * spg}.',
                'set only one of generation_batch_size and steps_per_generation',
                src,
            )
        )
        return out
    if p.steps_per_generation is not None and p.steps_per_generation <= 0:
        out.append(
            Finding(
                ERROR,
                'batch.steps-per-generation',
                ['steps_per_generation'],
                f'steps_per_generation must be > 0, got {p.steps_per_generation}.',
                'steps_per_generation: 1',
                src,
            )
        )
        return out
    gen = p.generation_batch
    if G > 1 and gen is not None and gen % G:
        found = divisors(gen)  # ms-swift lists them by a walk over 2..gen; here in sqrt(gen) steps
        valid = [n for n in found if n >= 2] if found is not None else f'[the divisors of {gen}]'
        # the smallest batch >= bs whose generation batch divides by G: a multiple of G / gcd(G, world x steps), found
        # in one step (a walk over candidate batches never ends on a num_generations of 10^400)
        unit = G // math.gcd(G, world * p.steps_per_generation) if world * p.steps_per_generation > 0 else None
        fix_bs = -(-bs // unit) * unit if unit and bs > 0 and unit <= 1_000_000 else None
        # no num_generations >= 2 divides a batch of 1: only the batch can change (the message keeps ms-swift's words)
        fixes = ([f'num_generations: one of {valid}'] if valid and found is not None else []) + (
            [f'per_device_train_batch_size: {fix_bs}'] if fix_bs else []
        )
        fix = ', or '.join(fixes) or None
        if trl:
            msg = f'generation_batch_size ({gen}) must be divisible by num_generations ({G}). (valid: {valid})'
        elif era == 'own':
            msg = (
                f'generation_batch_size ({gen}) must be evenly divisible by num_generations ({G}). '
                f'Valid values: {valid}.'
            )
        else:
            msg = effective_batch_message(
                world, bs, p.steps_per_generation if era != 'trl_trainer' else p.gradient_accumulation_steps, G, valid
            )
        out.append(
            Finding(
                ERROR,
                'batch.num-generations-divides',
                ['num_generations', 'per_device_train_batch_size', 'gradient_accumulation_steps'],
                msg,
                fix,
                src,
            )
        )
    if G > 1 and cfg.eval_strategy not in (None, 'no'):
        Ge = cfg.num_generations_eval or G
        geb = cfg.per_device_eval_batch_size * world
        if geb % Ge:
            found = divisors(geb)
            valid = found if found is not None else f'[the divisors of {geb}]'
            out.append(
                Finding(
                    ERROR,
                    'batch.eval',
                    ['per_device_eval_batch_size', 'num_generations_eval'],
                    f'The global eval batch size ({world} x {cfg.per_device_eval_batch_size}) must be '
                    f'evenly divisible by num_generations_eval ({Ge}). Valid values: {valid}.',
                    f'per_device_eval_batch_size: {Ge}, or num_generations_eval: one of {valid}',
                    src,
                )
            )
    return out


TRAINER_DIVISION = (
    'transformers/trainer.py::Trainer.set_initial_training_values: num_update_steps_per_epoch = '
    'len_dataloader // args.gradient_accumulation_steps'
)


def accumulation_finding(ga: int, cfg, plan, trl: bool, era: str = 'own', src: str | None = None) -> Finding:
    """gradient_accumulation_steps below 1, with the framework's own reason. ms-swift 4.2+ takes steps_per_generation
    from it when neither steps_per_generation nor generation_batch_size is given and stops in
    ``_init_generation_batch_params`` ("steps_per_generation must be > 0, got 0."); 3.5-4.1 stop in
    ``check_num_generations`` and TRL 0.17 (ms-swift < 3.5) in GRPOTrainer, both on an effective batch of 0 that no
    num_generations divides. Otherwise, and in current TRL (whose GRPOConfig accepts 0: steps_per_generation and
    generation_batch_size become 0), transformers' Trainer divides by it when it counts the update steps: a
    ZeroDivisionError for 0, a negative step count below."""
    derived = cfg.generation_batch_size is None and cfg.steps_per_generation is None
    if not trl and (derived or era == 'trl_trainer'):
        if era == 'own':
            msg = (
                f'gradient_accumulation_steps is {ga}: ms-swift takes steps_per_generation from it and stops with '
                f'"steps_per_generation must be > 0, got {ga}."'
            )
        else:
            batch = plan.world_size * cfg.per_device_train_batch_size * ga
            msg = (
                f'gradient_accumulation_steps is {ga}: the effective batch is {batch} completions, and '
                + ('ms-swift' if era == 'check_num_generations' else "TRL's GRPOTrainer")
                + ' stops with "'
                + effective_batch_message(plan.world_size, cfg.per_device_train_batch_size, ga, cfg.num_generations, [])
                + '"'
            )
        return Finding(
            ERROR,
            'batch.accumulation',
            ['gradient_accumulation_steps'],
            msg,
            'gradient_accumulation_steps: 1 (or more)',
            src,
        )
    if trl:
        who = "TRL's GRPOConfig accepts it" + (
            f' (steps_per_generation {plan.steps_per_generation}, generation_batch_size {plan.generation_batch})'
            if derived
            else ''
        )
    else:
        who = "ms-swift's parser accepts it (steps_per_generation or generation_batch_size is given)"
    msg = (
        f"gradient_accumulation_steps is {ga}: {who}, then transformers' Trainer divides by it "
        f'(len_dataloader // gradient_accumulation_steps): '
        + ('ZeroDivisionError: integer division or modulo by zero' if ga == 0 else 'a negative number of update steps')
    )
    return Finding(
        ERROR,
        'batch.accumulation',
        ['gradient_accumulation_steps'],
        msg,
        'gradient_accumulation_steps: 1 (or more)',
        TRAINER_DIVISION,
    )


@rule('batch.clipping-inert', 'batch.rollout-misaligned')
def batch_shape_warnings(ctx: Context) -> list[Finding]:
    """Batch shapes that run but behave unexpectedly: clipping that never acts (docs GRPO.md FAQ;
    swift/rlhf_trainers/grpo_trainer.py) or rollouts misaligned with optimizer steps."""
    cfg, p = ctx.cfg, ctx.plan
    G = cfg.num_generations
    if G <= 1 or cfg.per_device_train_batch_size < 1 or not p.steps_per_generation or p.steps_per_generation <= 0:
        return []
    out = []
    ga = p.gradient_accumulation_steps
    if ga < 1:
        return []  # batch.accumulation refuses it
    spg = p.steps_per_generation
    if cfg.num_iterations <= 1 and spg == ga and cfg.is_set('epsilon'):
        out.append(
            Finding(
                INFO,
                'batch.clipping-inert',
                ['epsilon', 'steps_per_generation', 'num_iterations'],
                f'steps_per_generation == gradient_accumulation_steps ({ga}) and num_iterations 1: every '
                f'update is on-policy, the importance ratio is 1 and epsilon={cfg.epsilon} never clips',
                'steps_per_generation: a multiple of gradient_accumulation_steps, or num_iterations: 2, '
                'if clipping is wanted',
                'docs GRPO.md FAQ; swift/rlhf_trainers/grpo_trainer.py',
            )
        )
    elif spg != ga and spg % ga and ga % spg:
        out.append(
            Finding(
                WARNING,
                'batch.rollout-misaligned',
                ['steps_per_generation', 'gradient_accumulation_steps'],
                f'steps_per_generation ({spg}) and gradient_accumulation_steps ({ga}) are not multiples: '
                f'rollouts and optimizer steps drift apart, so some steps mix two rollouts and clipping '
                f'acts unevenly',
                f'steps_per_generation: {ga} (or a multiple of it)',
            )
        )
    return out
