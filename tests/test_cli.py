"""CLI contract: help, exit codes, one clear line for bad input (no traceback)."""
import pytest

from conftest import run_cli


@pytest.mark.parametrize('module', ['grpo_recipes.cli.guard', 'grpo_recipes.cli.recipes', 'data_tools.cli'])
def test_help_works(module):
    proc = run_cli(module, '--help')
    assert proc.returncode == 0
    assert 'usage:' in proc.stdout


@pytest.mark.parametrize('text, expect', [
    (None, 'no such file'),
    ('rlhf_type: grpo\n  bad: [\n', 'invalid YAML'),
    ('ENV: 3\nrlhf_type: grpo\n', '`ENV:` must be a mapping'),
])
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


CLEAN = '''ENV:
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
'''


def test_run_execs_swift_with_the_same_argv(tmp_path):
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(CLEAN)
    env = fake_swift_on_path(tmp_path)
    proc = run_cli('grpo_recipes.cli.guard', 'run', str(cfg), '--gpus', '1', '--gpu-type', 'A100-80G', '--',
                   '--max_steps', '3', env=env)
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
    args = ['--rlhf_type', 'grpo', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--num_generations', '3',
            '--per_device_train_batch_size', '2', '--reward_funcs', 'format']
    proc = run_cli('grpo_recipes.cli.guard', '--', 'swift', 'rlhf', *args, env=env)
    assert proc.returncode == 1 and 'evenly divisible by num_generations (3)' in proc.stdout
    ok_args = [a if a != '3' else '4' for a in args]
    ok = run_cli('grpo_recipes.cli.guard', '--', 'swift', 'rlhf', *ok_args, env=env)
    assert ok.returncode == 0, ok.stdout
    assert 'FAKE-SWIFT rlhf --rlhf_type grpo' in ok.stdout


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
