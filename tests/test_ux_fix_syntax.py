"""Fixes in the launch's own syntax, and --verify for TRL launches (issue 21, 14)."""

import json

import pytest

from grpo_recipes.cli import guard

TRL_OOM = [
    '--model_name_or_path',
    'Qwen/Qwen2.5-7B-Instruct',
    '--dtype',
    'bfloat16',
    '--use_vllm',
    '--vllm_mode',
    'colocate',
    '--per_device_train_batch_size',
    '8',
    '--gradient_accumulation_steps',
    '8',
    '--num_generations',
    '8',
    '--max_completion_length',
    '2048',
    '--vllm_gpu_memory_utilization',
    '0.6',
    '--vllm_max_model_length',
    '2304',
]
ACCEL = ['accelerate', 'launch', '--num_processes', '4', '--use_deepspeed', '--zero_stage', '3', 'train_grpo.py']
SWIFT_OOM = [
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--tuner_type',
    'lora',
    '--use_vllm',
    'true',
    '--vllm_mode',
    'colocate',
    '--vllm_gpu_memory_utilization',
    '0.7',
    '--vllm_max_model_len',
    '2048',
    '--max_length',
    '512',
    '--max_completion_length',
    '1536',
    '--per_device_train_batch_size',
    '16',
    '--num_generations',
    '8',
    '--reward_funcs',
    'accuracy',
    '--dataset',
    'data.jsonl',
]


def _json(args, capsys):
    rc = guard.main(['check', '--json', *args])
    return rc, json.loads(capsys.readouterr().out)


def _memory_fix(out):
    return next(f for f in out['findings'] if f['rule'] == 'memory.fix')['fix']


def test_swift_command_line_gets_flags(capsys):
    rc, out = _json(
        [
            '--gpus',
            '2',
            '--gpu-type',
            'A100-80G',
            '--',
            'CUDA_VISIBLE_DEVICES=0,1',
            'NPROC_PER_NODE=2',
            'swift',
            'rlhf',
            *SWIFT_OOM,
        ],
        capsys,
    )
    assert rc == 1
    fix = _memory_fix(out)
    assert '--per_device_train_batch_size ' in fix and 'per_device_train_batch_size:' not in fix


def test_swift_yaml_gets_yaml_keys(tmp_path, capsys):
    cfg = tmp_path / 'c.yaml'
    pairs = dict(zip(SWIFT_OOM[::2], SWIFT_OOM[1::2]))
    cfg.write_text(
        'ENV:\n  CUDA_VISIBLE_DEVICES: "0,1"\n  NPROC_PER_NODE: 2\n'
        + ''.join(f'{k[2:]}: {v}\n' for k, v in pairs.items())
    )
    rc, out = _json([str(cfg), '--gpus', '2', '--gpu-type', 'A100-80G'], capsys)
    fix = _memory_fix(out)
    assert rc == 1 and '+ per_device_train_batch_size:' in fix and '--per_device_train_batch_size' not in fix


def test_trl_config_file_gets_yaml_keys_with_trl_names(tmp_path, capsys):
    cfg = tmp_path / 'grpo.yaml'
    pairs = {}
    i = 0
    while i < len(TRL_OOM):  # flags -> YAML (a bare flag is `true`)
        k = TRL_OOM[i][2:]
        if i + 1 < len(TRL_OOM) and not TRL_OOM[i + 1].startswith('--'):
            pairs[k], i = TRL_OOM[i + 1], i + 2
        else:
            pairs[k], i = 'true', i + 1
    cfg.write_text(''.join(f'{k}: {v}\n' for k, v in pairs.items()))
    rc, out = _json(['--gpus', '4', '--gpu-type', 'A100-80G', '--', *ACCEL, '--config', str(cfg)], capsys)
    fix = _memory_fix(out)
    assert rc == 1 and 'vllm_gpu_memory_utilization: ' in fix and '--vllm_gpu_memory_utilization' not in fix
    assert 'grpo.yaml' in fix


def test_trl_command_line_keeps_flags(capsys):
    rc, out = _json(['--gpus', '4', '--gpu-type', 'A100-80G', '--', *ACCEL, *TRL_OOM], capsys)
    assert rc == 1 and _memory_fix(out).startswith('add --')


@pytest.mark.slow
def test_verify_runs_trls_parser_on_a_trl_launch(capsys):
    rc, out = _json(['--verify', '--gpus', '4', '--gpu-type', 'A100-80G', '--', *ACCEL, *TRL_OOM], capsys)
    assert rc == 1  # the launch as written is still refused; the fix is what is verified
    fv = out['fix_verified']
    assert fv['ok'] is True and 'TrlParser' in fv['parser'], fv
    assert fv['world_size'] == 4
