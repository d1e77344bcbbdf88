"""Loading a launch must match ms-swift's own ``swift/cli/main.py`` byte for byte."""

import json
import os

import pytest
from conftest import run_cli

from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import read_launch as load_launch

CONFIG = """
ENV:
  CUDA_VISIBLE_DEVICES: "0,1"
  NPROC_PER_NODE: 2
  MASTER_PORT: 29501
rlhf_type: grpo
model: Qwen/Qwen2.5-7B-Instruct
reward_funcs: [accuracy, format]
use_vllm: true
vllm_gpu_memory_utilization: 0.5
columns: {"answer": "solution"}
max_completion_length: 1024
system: null
"""


def swift_reads(path, extra, monkeypatch, environ):
    """What ms-swift 4.6 itself makes of ``swift rlhf path *extra`` (argv, torchrun args)."""
    from swift.cli.main import get_torchrun_args, parse_yaml_args

    # parse_yaml_args writes os.environ directly: give it a private copy so nothing leaks.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ('CUDA_VISIBLE_DEVICES', 'NPROC_PER_NODE', 'NNODES', 'NODE_RANK', 'MASTER_ADDR', 'MASTER_PORT')
    }
    env.update(environ)
    monkeypatch.setattr(os, 'environ', env)
    argv = [str(path), *extra]
    parse_yaml_args(argv)
    return argv, get_torchrun_args(), os.environ.get('CUDA_VISIBLE_DEVICES')


@pytest.mark.parametrize('environ', [{}, {'NPROC_PER_NODE': '4', 'CUDA_VISIBLE_DEVICES': '0,1,2,3'}])
def test_yaml_matches_swift_parse_yaml_args(write_yaml, monkeypatch, environ):
    path = write_yaml(CONFIG)
    extra = ['--num_generations', '4']
    ours = load_launch([str(path), *extra], environ=environ)
    argv, torchrun, cvd = swift_reads(path, extra, monkeypatch, environ)
    assert ours.argv == argv
    assert ours.torchrun_args() == torchrun
    assert ours.env.get('CUDA_VISIBLE_DEVICES') == cvd


def test_json_config_matches_swift(tmp_path, monkeypatch):
    path = tmp_path / 'cfg.json'
    path.write_text(
        json.dumps(
            {'ENV': {'NNODES': 2}, 'rlhf_type': 'grpo', 'vllm_server_host': ['a', 'b'], 'use_vllm': True, 'beta': 0.0}
        )
    )
    ours = load_launch([str(path)], environ={})
    argv, torchrun, _ = swift_reads(path, [], monkeypatch, {})
    assert ours.argv == argv
    assert ours.torchrun_args() == torchrun


def test_env_already_set_wins_with_note(write_yaml):
    path = write_yaml(CONFIG)
    launch = load_launch([str(path)], environ={'NPROC_PER_NODE': '4'})
    assert launch.env['NPROC_PER_NODE'] == '4'
    assert launch.file_env['NPROC_PER_NODE'] == '2'
    assert any('NPROC_PER_NODE is already set' in n and '`4`' in n for n in launch.notes)


def test_list_dict_and_extra_args(write_yaml):
    launch = load_launch([str(write_yaml(CONFIG)), '--beta', '0'], environ={})
    argv = launch.argv
    i = argv.index('--reward_funcs')
    assert argv[i + 1 : i + 3] == ['accuracy', 'format']
    assert json.loads(argv[argv.index('--columns') + 1]) == {'answer': 'solution'}
    assert argv[-2:] == ['--beta', '0']


def test_bare_command_line():
    launch = load_launch(
        ['--', 'swift', 'rlhf', '--rlhf_type', 'grpo', '--num_generations', '4'], environ={'NPROC_PER_NODE': '2'}
    )
    assert launch.argv == ['--rlhf_type', 'grpo', '--num_generations', '4']
    assert launch.env == {'NPROC_PER_NODE': '2'}
    assert launch.uses_torchrun


@pytest.mark.parametrize(
    'text, expect',
    [
        ('rlhf_type: grpo\nmodel: a: b\n', 'cfg.yaml:2:9: invalid YAML'),
        ('ENV: [NPROC_PER_NODE]\nrlhf_type: grpo\n', '`ENV:` must be a mapping'),
        ('- rlhf_type\n- grpo\n', 'top level must be a mapping'),
        ('', 'the file is empty'),
    ],
)
def test_bad_files_give_one_line(write_yaml, text, expect):
    path = write_yaml(text)
    with pytest.raises(GuardError) as e:
        load_launch([str(path)], environ={})
    assert expect in str(e.value)
    assert str(path) in str(e.value)
    assert '\n' not in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(GuardError, match='no such file'):
        load_launch([str(tmp_path / 'nope.yaml')], environ={})


def test_invalid_json_names_line(tmp_path):
    p = tmp_path / 'c.json'
    p.write_text('{"rlhf_type": "grpo",\n "beta": }')
    with pytest.raises(GuardError, match=r'c\.json:2:'):
        load_launch([str(p)], environ={})


ROLLOUT_IN_COMMENT = """{note}# CUDA_VISIBLE_DEVICES=0,1 \\
# swift rollout \\
#     --model Qwen/Qwen2.5-7B-Instruct \\
#     --vllm_tensor_parallel_size 2

CUDA_VISIBLE_DEVICES=0,1,2,3 \\
NPROC_PER_NODE=4 \\
swift rlhf \\
    --rlhf_type grpo \\
    --model Qwen/Qwen2.5-7B-Instruct \\
    --reward_funcs accuracy \\
    --use_vllm true \\
    --vllm_mode server \\
    --vllm_server_host 127.0.0.1 \\
    --vllm_server_port 8000 \\
    --tuner_type lora \\
    --dataset AI-MO/NuminaMath-TIR#1000 \\
    --max_length 1024 \\
    --max_completion_length 1024 \\
    --per_device_train_batch_size 2 \\
    --num_generations 8
"""


@pytest.mark.parametrize(
    'note, remote',
    [
        ('# run in another node\n', True),
        ('# on the other machine\n', True),
        ('# node 0: start the server first\n', False),
        ('', False),
    ],
)
def test_a_comment_that_puts_the_rollout_on_another_node(tmp_path, note, remote):
    # ms-swift's external/grpo_32b_full.sh writes "# run in another node" above its commented `swift rollout`
    script = tmp_path / 'train.sh'
    script.write_text(ROLLOUT_IN_COMMENT.format(note=note))
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(script), '--gpus', '4', '--gpu-type', 'A100-80G', '--json')
    report = json.loads(proc.stdout)
    rules = {f['rule'] for f in report['findings'] if f['severity'] == 'error'}
    assert bool(report['launch']['rollout']['remote']) == remote
    assert ('device.rollout-overlap' in rules) == (not remote), rules
    assert proc.returncode == (0 if remote else 1), rules


def test_a_placeholder_left_in_an_example_is_named(tmp_path):
    # ms-swift's multi_node/server_multi_node.sh writes `--vllm_server_port <node1_port>`; swift rlhf rejects it
    script = tmp_path / 'train.sh'
    script.write_text(
        ROLLOUT_IN_COMMENT.format(note='').replace('--vllm_server_port 8000', "--vllm_server_port '<port>'")
    )
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(script), '--gpus', '4')
    assert proc.returncode != 0
    assert "invalid int value: '<port>'" in proc.stderr and 'placeholder' in proc.stderr


def test_a_launcher_that_starts_the_server_in_the_background(tmp_path):
    # TRL users' launchers: `nohup trl vllm-serve ... > vllm.log 2>&1 &`, then the trainer, then `wait`
    script = tmp_path / 'launch.sh'
    script.write_text(
        '#!/bin/bash\nset -e\nexport MODEL=Qwen/Qwen2.5-7B-Instruct\n'
        'CUDA_VISIBLE_DEVICES=3 nohup trl vllm-serve --model $MODEL --max-model-len 4096 '
        '> vllm.log 2>&1 &\n'
        'sleep 60 && echo started\n'
        'CUDA_VISIBLE_DEVICES=0,1,2 accelerate launch --num_processes 3 train.py '
        '--model_name_or_path $MODEL '
        '--use_vllm --vllm_mode server --max_completion_length 1024 2>&1 | tee train.log\nwait\n'
    )
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(script), '--gpus', '4', '--gpu-type', 'A100-80G', '--json')
    out = json.loads(proc.stdout)
    r = out['launch']['rollout']
    assert r['argv'] == ['--model', 'Qwen/Qwen2.5-7B-Instruct', '--max-model-len', '4096'] and r['gpus'] == [3]
    assert out['plan']['world_size'] == 3 and out['hardware']['rollout_gpus'] == [3]
    assert 'tee' not in out['launch']['argv'] and 'train.log' not in out['launch']['argv']


def test_shell_segments():
    from grpo_recipes.frontends.shell import segments

    assert segments(['a', '--x', '1', '>', 'log', '2>&1', '&']) == [['a', '--x', '1']]
    assert segments(['a', '&&', 'b', '|', 'c', ';', 'd']) == [['a'], ['b'], ['c'], ['d']]
    assert segments(['a', '--out', '>>log', '--y']) == [['a', '--out', '--y']]
