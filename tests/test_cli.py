"""CLI contract: help, exit codes, one clear line for bad input (no traceback)."""

import pytest
from conftest import run_cli


@pytest.mark.parametrize('module', ['grpo_recipes.cli.guard', 'grpo_recipes.cli.recipes', 'data_tools.cli'])
def test_help_works(module):
    proc = run_cli(module, '--help')
    assert proc.returncode == 0
    assert 'usage:' in proc.stdout


@pytest.mark.parametrize(
    'text, expect',
    [
        (None, 'no such file'),
        ('rlhf_type: grpo\n  bad: [\n', 'invalid YAML'),
        ('ENV: 3\nrlhf_type: grpo\n', '`ENV:` must be a mapping'),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, text, expect):
    path = tmp_path / 'c.yaml'
    if text is not None:
        path.write_text(text)
    proc = run_cli('grpo_recipes.cli.guard', 'validate', str(path))
    assert proc.returncode == 2
    assert 'Traceback' not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0] and str(path) in lines[0]


def test_usage_error_exit_2():
    assert run_cli('grpo_recipes.cli.guard', 'validate').returncode == 2
    assert run_cli('grpo_recipes.cli.guard', 'frobnicate').returncode == 2


def test_unknown_model_is_a_clear_error(tmp_path):
    p = tmp_path / 'c.yaml'
    p.write_text('rlhf_type: grpo\nmodel: someone/NotAModel-7B\n')
    proc = run_cli('grpo_recipes.cli.guard', 'validate', str(p))
    assert proc.returncode == 2
    assert '--model someone/NotAModel-7B' in proc.stderr and 'Traceback' not in proc.stderr


def fake_swift_on_path(tmp_path):
    """A STAND-IN `swift` that only echoes its argv (no training happens here)."""
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    exe = bindir / 'swift'
    exe.write_text('#!/bin/sh\necho "FAKE-SWIFT $*"\n')
    exe.chmod(0o755)
    import os

    return {'PATH': f'{bindir}{os.pathsep}{os.environ["PATH"]}'}


CLEAN = """ENV:
  CUDA_VISIBLE_DEVICES: "0"
  NPROC_PER_NODE: 1
rlhf_type: grpo
model: Qwen/Qwen2.5-7B-Instruct
use_vllm: true
vllm_mode: colocate
vllm_gpu_memory_utilization: 0.4
vllm_max_model_len: 1536
max_length: 512
max_completion_length: 1024
per_device_train_batch_size: 8
num_generations: 8
reward_funcs: [format]
"""


def test_run_execs_swift_with_the_same_argv(tmp_path):
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(CLEAN)
    env = fake_swift_on_path(tmp_path)
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'run',
        str(cfg),
        '--gpus',
        '1',
        '--gpu-type',
        'A100-80G',
        '--',
        '--max_steps',
        '3',
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'FAKE-SWIFT rlhf {cfg} --max_steps 3' in proc.stdout


def test_run_refuses_on_errors_unless_forced(tmp_path):
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(CLEAN.replace('num_generations: 8', 'num_generations: 7'))
    env = fake_swift_on_path(tmp_path)
    proc = run_cli('grpo_recipes.cli.guard', 'run', str(cfg), '--gpus', '1', '--gpu-type', 'A100-80G', env=env)
    assert proc.returncode == 1 and 'FAKE-SWIFT' not in proc.stdout and 'not launching' in proc.stderr
    forced = run_cli('grpo_recipes.cli.guard', 'run', str(cfg), '--gpus', '1', '--force', env=env)
    assert forced.returncode == 0 and 'FAKE-SWIFT rlhf' in forced.stdout


def test_bare_command_line_is_checked_then_run(tmp_path):
    env = fake_swift_on_path(tmp_path)
    env.update({'NPROC_PER_NODE': '2', 'CUDA_VISIBLE_DEVICES': '0,1'})
    args = [
        '--rlhf_type',
        'grpo',
        '--model',
        'Qwen/Qwen2.5-7B-Instruct',
        '--num_generations',
        '3',
        '--per_device_train_batch_size',
        '2',
        '--reward_funcs',
        'format',
    ]
    hw = ['--gpus', '2', '--gpu-type', 'A100-80G']  # guard options before `--`, no subcommand
    proc = run_cli('grpo_recipes.cli.guard', *hw, '--', 'swift', 'rlhf', *args, env=env)
    assert proc.returncode == 1 and 'evenly divisible by num_generations (3)' in proc.stdout
    ok_args = [a if a != '3' else '4' for a in args]
    ok = run_cli('grpo_recipes.cli.guard', *hw, '--', 'swift', 'rlhf', *ok_args, env=env)
    assert ok.returncode == 0, ok.stdout
    assert 'FAKE-SWIFT rlhf --rlhf_type grpo' in ok.stdout


def test_unchecked_memory_is_not_a_clean_ok(tmp_path):
    # No GPU type known (this machine has no nvidia-smi): the rules pass but memory is not checked, so
    # `run` refuses unless the user accepts that explicitly.
    env = fake_swift_on_path(tmp_path)
    env.update({'NPROC_PER_NODE': '2', 'CUDA_VISIBLE_DEVICES': '0,1'})
    args = [
        '--rlhf_type',
        'grpo',
        '--model',
        'Qwen/Qwen2.5-7B-Instruct',
        '--num_generations',
        '4',
        '--per_device_train_batch_size',
        '2',
        '--reward_funcs',
        'format',
    ]
    proc = run_cli('grpo_recipes.cli.guard', '--', 'swift', 'rlhf', *args, env=env)
    assert proc.returncode == 1 and 'FAKE-SWIFT' not in proc.stdout
    assert 'UNCHECKED: rules OK; memory not checked: GPU model unknown' in ' '.join(proc.stdout.split())
    ok = run_cli('grpo_recipes.cli.guard', '--allow-unchecked', '--', 'swift', 'rlhf', *args, env=env)
    assert ok.returncode == 0 and 'FAKE-SWIFT rlhf --rlhf_type grpo' in ok.stdout


def test_unknown_model_is_unchecked_until_its_config_is_given(tmp_path):
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(CLEAN.replace('Qwen/Qwen2.5-7B-Instruct', 'acme/never-seen-7b'))
    hw = ['--gpus', '1', '--gpu-type', 'A100-80G']
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(cfg), *hw, env={'COLUMNS': '80'})
    text = ' '.join(proc.stdout.split())
    assert proc.returncode == 1 and 'no config.json for acme/never-seen-7b' in text and '--model-config' in text
    model_dir = tmp_path / 'never-seen-7b'
    model_dir.mkdir()
    import json

    from grpo_recipes.models import builtin_config

    (model_dir / 'config.json').write_text(json.dumps(builtin_config('Qwen2.5-7B-Instruct.json')))
    ok = run_cli('grpo_recipes.cli.guard', 'check', str(cfg), *hw, '--model-config', str(model_dir))
    assert ok.returncode == 0, ok.stdout


def test_modelscope_cache_layouts_are_searched(tmp_path, monkeypatch):
    import json

    from grpo_recipes.models import builtin_config, load_model_config

    cfg = builtin_config('Qwen2.5-7B-Instruct.json')
    monkeypatch.setenv('MODELSCOPE_CACHE', str(tmp_path / 'ms'))
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'hf'))
    new = tmp_path / 'ms' / 'models' / 'acme--m-1' / 'snapshots' / 'abc'
    new.mkdir(parents=True)
    (new / 'config.json').write_text(json.dumps({**cfg, 'hidden_size': 1111}))
    assert load_model_config('acme/m-1')['hidden_size'] == 1111
    old = tmp_path / 'ms' / 'hub' / 'models' / 'acme' / 'm2___5-7B'
    old.mkdir(parents=True)
    (old / 'config.json').write_text(json.dumps({**cfg, 'hidden_size': 2222}))
    assert load_model_config('acme/m2.5-7B')['hidden_size'] == 2222


def test_check_json_has_the_contract_fields(tmp_path):
    import json

    cfg = tmp_path / 'c.yaml'
    cfg.write_text(CLEAN)
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(cfg), '--gpus', '1', '--gpu-type', 'A100-80G', '--json')
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out['ok'] is True and out['fits'] is True
    for key in ('findings', 'plan', 'memory'):
        assert key in out
    for f in out['findings']:
        assert set(f) >= {'severity', 'rule', 'arguments', 'message', 'fix'}
