"""gradient_accumulation_steps below 1 is refused with the framework's own reason (it was read as 1 and passed).

ms-swift 4.6 takes steps_per_generation from it and stops (swift/rlhf_trainers/args_mixin.py
_init_generation_batch_params: "steps_per_generation must be > 0, got 0."; `grpo-guard validate` on the same launch
gives that error from the real parser). With steps_per_generation given, and in TRL (GRPOConfig accepts 0 and
derives steps_per_generation = generation_batch_size = 0), transformers' Trainer divides by it
(Trainer.set_initial_training_values: len_dataloader // args.gradient_accumulation_steps)."""

import json

import pytest
from conftest import run_cli

from grpo_recipes.config import GRPOConfig

HW = ['--gpus', '1', '--gpu-type', 'A100-80G']
SWIFT = [
    '--',
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--reward_funcs',
    'accuracy',
    '--num_generations',
    '8',
    '--per_device_train_batch_size',
    '8',
]
TRL = [
    '--',
    'CUDA_VISIBLE_DEVICES=0',
    'python',
    'train_grpo.py',
    '--model_name_or_path',
    'Qwen/Qwen2.5-7B-Instruct',
    '--per_device_train_batch_size',
    '8',
    '--num_generations',
    '8',
    '--max_completion_length',
    '512',
]


def check(*args):
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *HW, *args)
    assert 'Traceback' not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def accumulation(out):
    return next((f for f in out['findings'] if f['rule'] == 'batch.accumulation'), None)


@pytest.mark.parametrize('ga', ['0', '-2'])
def test_swift_accumulation_below_one_is_refused_with_ms_swift_s_message(ga):
    rc, out = check(*SWIFT, '--gradient_accumulation_steps', ga)
    f = accumulation(out)
    assert rc == 1 and f['severity'] == 'error' and not out['ok']
    assert f'stops with "steps_per_generation must be > 0, got {ga}."' in f['message']
    assert f['source'] == 'swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params'
    assert out['plan']['gradient_accumulation_steps'] == int(ga)  # never read as 1


def test_swift_accumulation_zero_with_steps_per_generation_is_the_trainer_s_division():
    rc, out = check(*SWIFT, '--gradient_accumulation_steps', '0', '--steps_per_generation', '1')
    f = accumulation(out)
    assert rc == 1 and 'ZeroDivisionError' in f['message'] and 'transformers/trainer.py' in f['source']


def test_trl_accumulation_zero_is_refused():
    rc, out = check(*TRL, '--gradient_accumulation_steps', '0')
    f = accumulation(out)
    assert rc == 1 and f['severity'] == 'error'
    assert "TRL's GRPOConfig accepts it (steps_per_generation 0, generation_batch_size 0)" in f['message']
    assert 'ZeroDivisionError' in f['message'] and out['config']['gradient_accumulation_steps'] == 0
    rc, out = check(*TRL, '--gradient_accumulation_steps', '2')
    assert accumulation(out) is None and out['plan']['gradient_accumulation_steps'] == 2


def test_accumulation_has_one_owner():
    assert GRPOConfig(gradient_accumulation_steps=None).accumulation_steps == 1  # unset: the GRPO default
    assert GRPOConfig(gradient_accumulation_steps=0).accumulation_steps == 0
    cfg, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo'])
    assert cfg.accumulation_steps == cfg.gradient_accumulation_steps == 1


@pytest.mark.parametrize(
    'version,words,source',
    [
        (
            '4.1.3',
            'ms-swift stops with "The effective train batch size (1 x 8 x 0) must be evenly divisible by the number '
            'of generations per prompt (8).',
            'swift/rlhf_trainers/arguments.py::GRPOConfig.check_num_generations',
        ),
        (
            '3.10.3',
            'ms-swift stops with "The effective train batch size (1 x 8 x 0)',
            'swift/trainers/rlhf_arguments.py::GRPOConfig.check_num_generations',
        ),
        (
            '3.4.1',
            'TRL\'s GRPOTrainer stops with "The effective train batch size (1 x 8 x 0)',
            'trl/trainer/grpo_trainer.py::GRPOTrainer.__init__ (TRL 0.17; ms-swift < 3.5 leaves the check to TRL)',
        ),
    ],
)
def test_releases_before_4_2_stop_in_their_own_check(version, words, source):
    # 3.5-4.1: GRPOConfig.check_num_generations (no num_generations divides an effective batch of 0); before 3.5 TRL's
    # GRPOTrainer (TRL 0.17 grpo_trainer.py counts gradient_accumulation_steps); "steps_per_generation must be > 0"
    # came with _init_generation_batch_params in 4.2
    rc, out = check('--swift-version', version, *SWIFT, '--gradient_accumulation_steps', '0')
    f = accumulation(out)
    assert rc == 1 and words in f['message'] and f['source'] == source
