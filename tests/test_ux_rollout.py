"""The rollout side (issue 21, items 11 and 20): a server that cannot start and a port the trainer does not
connect to are errors; a server checked alone prints no trainer lines."""

import importlib.util

import pytest

from grpo_recipes.cli import guard

HW = ['--gpus', '4', '--gpu-type', 'A100-80G']
TRAIN = [
    '--',
    'CUDA_VISIBLE_DEVICES=0,1',
    'NPROC_PER_NODE=2',
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--tuner_type',
    'lora',
    '--use_vllm',
    'true',
    '--vllm_mode',
    'server',
    '--num_generations',
    '8',
    '--per_device_train_batch_size',
    '8',
    '--max_length',
    '512',
    '--max_completion_length',
    '512',
    '--reward_funcs',
    'accuracy',
    '--vllm_server_host',
    '127.0.0.1',
]


def _check(args, capsys):
    rc = guard.main(['check', *HW, *args])
    return rc, ' '.join(capsys.readouterr().out.split())


def test_rollout_command_that_cannot_start_refuses_the_launch(capsys):
    # --gpu_memory_utilization is not swift rollout's name (it is --vllm_gpu_memory_utilization): it stops
    roll = 'CUDA_VISIBLE_DEVICES=2 swift rollout --model Qwen/Qwen2.5-7B-Instruct --gpu_memory_utilization 0.8'
    rc, out = _check(['--rollout', roll, *TRAIN], capsys)
    assert rc == 1 and 'rollout.unknown-argument' in out and 'REFUSED' in out
    ok = 'CUDA_VISIBLE_DEVICES=2 swift rollout --model Qwen/Qwen2.5-7B-Instruct --vllm_gpu_memory_utilization 0.8'
    rc, out = _check(['--rollout', ok, *TRAIN], capsys)
    assert rc == 0, out


@pytest.mark.parametrize(
    'roll, trainer_port, expect_ok',
    [
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct --port 8001', None, False),  # trainer: default 8000
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct', ['--vllm_server_port', '8001'], False),  # server: default
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct --port 8001', ['--vllm_server_port', '8001'], True),
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct', None, True),
    ],
)
def test_trainer_port_must_be_the_servers(roll, trainer_port, expect_ok, capsys):
    rc, out = _check(['--rollout', 'CUDA_VISIBLE_DEVICES=2 ' + roll, *TRAIN, *(trainer_port or [])], capsys)
    assert (rc == 0) == expect_ok, out
    assert ('rollout.port' in out) == (not expect_ok)


def test_trl_port_mismatch_is_an_error(capsys):
    roll = 'CUDA_VISIBLE_DEVICES=2 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct --port 8011'
    rc, out = _check(
        [
            '--rollout',
            roll,
            '--',
            'CUDA_VISIBLE_DEVICES=0',
            'accelerate',
            'launch',
            '--num_processes',
            '1',
            'train.py',
            '--model_name_or_path',
            'Qwen/Qwen2.5-7B-Instruct',
            '--use_peft',
            '--use_vllm',
            '--vllm_mode',
            'server',
            '--max_completion_length',
            '256',
            '--max_prompt_length',
            '256',
            '--dtype',
            'bfloat16',
        ],
        capsys,
    )
    assert rc == 1 and 'rollout.port' in out and '--vllm_server_port 8011' in out


def test_both_servers_default_to_port_8000():
    # the default the rule assumes is the one in the frameworks' own argument classes
    from swift.arguments import RolloutArguments

    from grpo_recipes.rules.rollout_port import DEFAULT_PORT

    fields = {f.name: f.default for f in __import__('dataclasses').fields(RolloutArguments)}
    assert fields['port'] == DEFAULT_PORT
    spec = importlib.util.find_spec('trl.scripts.vllm_serve')
    assert spec is not None
    from trl.scripts.vllm_serve import ScriptArguments

    assert {f.name: f.default for f in __import__('dataclasses').fields(ScriptArguments)}['port'] == DEFAULT_PORT


@pytest.mark.parametrize(
    'server',
    [
        ['swift', 'rollout', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--vllm_data_parallel_size', '2'],
        ['trl', 'vllm-serve', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--data_parallel_size', '2'],
    ],
)
def test_server_alone_prints_no_trainer_lines(server, capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '100')
    rc = guard.main(['check', '--gpus', '8', '--gpu-type', 'A100-80G', '--', 'CUDA_VISIBLE_DEVICES=6,7', *server])
    out = capsys.readouterr().out
    assert rc == 0, out
    for trainer_line in ('(lora)', '(full)', 'world ', 'prompts', 'micro-batch', 'optimizer step', 'a rollout needs'):
        assert trainer_line not in out, trainer_line
    assert 'Rollout server plan' in out and 'TP 1 × DP 2 = 2' in out and 'port 8000' in out
