"""Batch arithmetic (ms-swift 4.6 swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params, TRL
GRPOConfig.__post_init__)."""
from __future__ import annotations

from ..findings import ERROR, INFO, WARNING, Finding
from .registry import Context, rule


@rule('batch.per-device', 'batch.accumulation', 'batch.num-generations', 'batch.generation-batch', 'batch.steps-per-generation', 'batch.num-generations-divides', 'batch.eval')
def batch_rules(ctx: Context) -> list[Finding]:
    """The GRPO batch arithmetic: ms-swift's ``_init_generation_batch_params``
    (swift/rlhf_trainers/args_mixin.py) and TRL's ``GRPOConfig.__post_init__`` (trl/trainer/grpo_config.py) raise
    ValueError when the generation batch is not a multiple of the global batch or of num_generations."""
    cfg, p = ctx.cfg, ctx.plan
    trl = ctx.launch.framework == 'trl'
    src = ('trl/trainer/grpo_config.py::GRPOConfig.__post_init__' if trl else
           'swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params')
    world = p.world_size
    bs = cfg.per_device_train_batch_size
    out = []
    if bs < 1:
        return [Finding(ERROR, 'batch.per-device', ['per_device_train_batch_size'],
                        f'per_device_train_batch_size must be >= 1 (got {bs})', 'per_device_train_batch_size: 1')]
    if p.gradient_accumulation_steps < 1:
        return [accumulation_finding(p.gradient_accumulation_steps, cfg, p, trl)]
    G = cfg.num_generations
    if G <= 1 and cfg.rlhf_type == 'grpo':
        out.append(Finding(ERROR, 'batch.num-generations', ['num_generations'],
                           'GRPO requires at least 2 generations per prompt to calculate the advantages. You provided '
                           f'{G}, which is less than the minimum required.' if trl else
                           'num_generations must be greater than 1 for GRPO', 'num_generations: 8',
                           src if trl else 'swift/arguments/rlhf_args.py::_check_teacher'))
    global_bs = bs * world
    gbs, spg = cfg.generation_batch_size, cfg.steps_per_generation
    if gbs is not None and spg is None and gbs % global_bs:
        out.append(Finding(ERROR, 'batch.generation-batch', ['generation_batch_size', 'per_device_train_batch_size'],
                           f'generation_batch_size ({gbs}) must be divisible by the global batch size ({global_bs}).',
                           f'generation_batch_size: {max(1, round(gbs / global_bs)) * global_bs} '
                           f'(a multiple of per_device_train_batch_size × world = {global_bs})', src))
        return out
    if trl and gbs is not None and spg is not None:
        out.append(Finding(ERROR, 'batch.generation-batch', ['generation_batch_size', 'steps_per_generation'],
                           "'generation_batch_size' and 'steps_per_generation' can not be both configured at the "
                           "same time", 'set only one of generation_batch_size and steps_per_generation', src))
        return out
    if gbs is not None and spg is not None and gbs != global_bs * spg:
        out.append(Finding(ERROR, 'batch.generation-batch', ['generation_batch_size', 'steps_per_generation'],
                           f'generation_batch_size ({gbs}) must equal per_device_train_batch_size * world_size * '
                           f'steps_per_generation = {global_bs * spg}.',
                           'set only one of generation_batch_size and steps_per_generation', src))
        return out
    if p.steps_per_generation is not None and p.steps_per_generation <= 0:
        out.append(Finding(ERROR, 'batch.steps-per-generation', ['steps_per_generation'],
                           f'steps_per_generation must be > 0, got {p.steps_per_generation}.',
                           'steps_per_generation: 1', src))
        return out
    gen = p.generation_batch
    if G > 1 and gen is not None and gen % G:
        valid = [n for n in range(2, gen + 1) if gen % n == 0]
        fix_bs = next((b for b in range(bs, bs * G + 1) if (b * world * p.steps_per_generation) % G == 0), None)
        # no num_generations >= 2 divides a batch of 1: only the batch can change (the message keeps ms-swift's words)
        fixes = ([f'num_generations: one of {valid}'] if valid else []) + \
            ([f'per_device_train_batch_size: {fix_bs}'] if fix_bs else [])
        fix = ', or '.join(fixes) or None
        out.append(Finding(ERROR, 'batch.num-generations-divides', ['num_generations', 'per_device_train_batch_size',
                                                                     'gradient_accumulation_steps'],
                           (f'generation_batch_size ({gen}) must be divisible by num_generations ({G}). (valid: '
                            f'{valid})' if trl else
                            f'generation_batch_size ({gen}) must be evenly divisible by num_generations ({G}). '
                            f'Valid values: {valid}.'), fix, src))
    if G > 1 and cfg.eval_strategy not in (None, 'no'):
        Ge = cfg.num_generations_eval or G
        geb = cfg.per_device_eval_batch_size * world
        if geb % Ge:
            valid = [n for n in range(1, geb + 1) if geb % n == 0]
            out.append(Finding(ERROR, 'batch.eval', ['per_device_eval_batch_size', 'num_generations_eval'],
                               f'The global eval batch size ({world} x {cfg.per_device_eval_batch_size}) must be '
                               f'evenly divisible by num_generations_eval ({Ge}). Valid values: {valid}.',
                               f'per_device_eval_batch_size: {Ge}, or num_generations_eval: one of {valid}', src))
    return out


TRAINER_DIVISION = ('transformers/trainer.py::Trainer.set_initial_training_values: num_update_steps_per_epoch = '
                    'len_dataloader // args.gradient_accumulation_steps')


def accumulation_finding(ga: int, cfg, plan, trl: bool) -> Finding:
    """gradient_accumulation_steps below 1, with the framework's own reason. ms-swift 4.6 takes steps_per_generation
    from it when neither steps_per_generation nor generation_batch_size is given and stops in
    ``_init_generation_batch_params`` ("steps_per_generation must be > 0, got 0."); otherwise, and in TRL (whose
    GRPOConfig accepts 0: steps_per_generation and generation_batch_size become 0), transformers' Trainer divides by
    it when it counts the update steps, which is a ZeroDivisionError for 0 and a negative step count below."""
    derived = cfg.generation_batch_size is None and cfg.steps_per_generation is None
    if not trl and derived:
        msg = (f'gradient_accumulation_steps is {ga}: ms-swift takes steps_per_generation from it and stops with '
               f'"steps_per_generation must be > 0, got {ga}."')
        src = 'swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params'
    else:
        if trl:
            who = 'TRL\'s GRPOConfig accepts it' + (
                f' (steps_per_generation {plan.steps_per_generation}, generation_batch_size {plan.generation_batch})'
                if derived else '')
        else:
            who = 'ms-swift\'s parser accepts it (steps_per_generation or generation_batch_size is given)'
        msg = (f'gradient_accumulation_steps is {ga}: {who}, then transformers\' Trainer divides by it '
               f'(len_dataloader // gradient_accumulation_steps): '
               + ('ZeroDivisionError: integer division or modulo by zero' if ga == 0 else
                  'a negative number of update steps'))
        src = TRAINER_DIVISION
    return Finding(ERROR, 'batch.accumulation', ['gradient_accumulation_steps'], msg,
                   'gradient_accumulation_steps: 1 (or more)', src)


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
        out.append(Finding(INFO, 'batch.clipping-inert', ['epsilon', 'steps_per_generation', 'num_iterations'],
                           f'steps_per_generation == gradient_accumulation_steps ({ga}) and num_iterations 1: every '
                           f'update is on-policy, the importance ratio is 1 and epsilon={cfg.epsilon} never clips',
                           'steps_per_generation: a multiple of gradient_accumulation_steps, or num_iterations: 2, '
                           'if clipping is wanted', 'docs GRPO.md FAQ; swift/rlhf_trainers/grpo_trainer.py'))
    elif spg != ga and spg % ga and ga % spg:
        out.append(Finding(WARNING, 'batch.rollout-misaligned', ['steps_per_generation',
                                                                 'gradient_accumulation_steps'],
                           f'steps_per_generation ({spg}) and gradient_accumulation_steps ({ga}) are not multiples: '
                           f'rollouts and optimizer steps drift apart, so some steps mix two rollouts and clipping '
                           f'acts unevenly', f'steps_per_generation: {ga} (or a multiple of it)'))
    return out
