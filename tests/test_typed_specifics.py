"""What a front end cannot name on the command line is a typed, documented field, never a placeholder string in a
field that holds names: GRPOConfig.reward_funcs_in_script (a TRL script passes its rewards in code) and
GRPOConfig.vllm_in_trainer (TRL 0.14-0.15's vllm_device: vLLM inside a training process, on this machine)."""

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.frontends.trl.reader import to_config
from grpo_recipes.hardware import Hardware

TRAIN = [
    'accelerate',
    'launch',
    '--num_processes',
    '3',
    '--use_deepspeed',
    '--zero_stage',
    '3',
    'train_grpo.py',
    '--model_name_or_path',
    'Qwen/Qwen2.5-7B-Instruct',
    '--use_vllm',
    '--vllm_device',
    'auto',
    '--dtype',
    'bfloat16',
    '--per_device_train_batch_size',
    '4',
    '--num_generations',
    '6',
]


def test_a_trl_script_names_no_reward_function():
    cfg, _ = to_config(read_launch(TRAIN[:10], environ={}))
    assert cfg.reward_funcs == [] and cfg.reward_funcs_in_script


def test_trl_0_15_vllm_device_runs_here_not_on_another_machine():
    # TRL 0.15.2 GRPOTrainer: vllm_device "auto" with 3 processes and 4 visible GPUs puts vLLM on cuda:3 of this node
    launch = read_launch(['CUDA_VISIBLE_DEVICES=0,1,2,3', *TRAIN], environ={})
    report = check_launch(launch, Hardware(gpus=4, gpu_type='A100-80G'), packages={'trl': '0.15.2'}, fixes=False)
    assert report.cfg.vllm_in_trainer and report.cfg.vllm_mode == 'server' and report.cfg.vllm_server_host is None
    assert report.plan.rollout_remote is None and report.plan.rollout_gpus == [3]
    assert [m.gpu for m in report.memory if m.role == 'rollout'] == ['3']
    assert not any('another machine' in a for a in report.assumptions)


def test_an_older_trls_batch_semantics_make_a_new_config():
    # TRL 0.14 GRPOConfig: per_device_train_batch_size counts prompts (v0.14.0 trl/trainer/grpo_trainer.py)
    from grpo_recipes.frontends.trl.versions import apply_semantics

    cfg, _ = to_config(
        read_launch(
            TRAIN[:10]
            + ['--per_device_train_batch_size', '2', '--num_generations', '4', '--generation_batch_size', '16'],
            environ={},
        )
    )
    old, notes = apply_semantics(cfg, '0.14.0')
    assert (old.per_device_train_batch_size, old.steps_per_generation, old.generation_batch_size) == (8, 1, None)
    assert (cfg.per_device_train_batch_size, cfg.generation_batch_size) == (2, 16) and notes
    assert apply_semantics(cfg, None) == (cfg, [])


def test_trls_listening_address_is_the_clients_default_host():
    # trl vllm-serve listens on 0.0.0.0; the trainer's client reaches it at 127.0.0.1 (TRL's VLLMClient default)
    cfg, _ = to_config(read_launch(TRAIN[:10] + ['--vllm_mode', 'server', '--vllm_server_host', '0.0.0.0'], environ={}))
    assert cfg.vllm_server_host == ['127.0.0.1']


def test_a_trl_launchs_specifics_are_typed_fields():
    from grpo_recipes.launch import TrlSpecifics

    launch = read_launch(['CUDA_VISIBLE_DEVICES=0,1,2,3', *TRAIN], environ={})
    t = launch.trl
    assert isinstance(t, TrlSpecifics)
    assert (t.launcher, t.script, t.accelerate['num_processes'], t.accelerate['zero_stage']) == (
        'accelerate',
        'train_grpo.py',
        3,
        3,
    )
    assert t.script_args[:2] == ['--model_name_or_path', 'Qwen/Qwen2.5-7B-Instruct'] and t.vllm_device is None
    assert launch.to_dict()['trl']['launcher'] == 'accelerate' and 'vllm_device' not in launch.to_dict()['trl']
    report = check_launch(launch, Hardware(gpus=4, gpu_type='A100-80G'), packages={'trl': '0.15.2'}, fixes=False)
    r = report.launch.trl  # TRL 0.15: "auto" = cuda:3, recorded on the checked launch, a copy
    assert (r.vllm_device, r.vllm_device_index, r.vllm_device_gpu) == ('auto', 3, 3)
    assert (t.vllm_device, t.vllm_device_index, t.vllm_device_gpu) == (None, None, None)  # the read launch as read
    note = 'completions are generated at every micro-step'  # TRL 0.15's semantics, noted by the reader
    assert any(note in n for n in report.launch.notes) and not any(note in n for n in launch.notes)
    with pytest.raises(TypeError):  # a misspelt specific is refused, not carried along
        TrlSpecifics(launcher='accelerate', scrpit='x.py')
