"""Fixes in the launch's own syntax, and --verify for TRL launches (issue 21, 14)."""

import json
import re

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
    assert rc == 1 and '--per_device_train_batch_size' not in fix
    # the lines a user pastes into c.yaml: no diff markers, nothing indented
    lines = fix.splitlines()
    assert lines[0] == 'in c.yaml, set:' and any(ln.startswith('per_device_train_batch_size: ') for ln in lines)
    assert not any(ln.startswith(('+', '-', ' ')) for ln in lines)


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
    # one `key: value` line each, to paste into grpo.yaml (issue 31 item 3)
    lines = fix.splitlines()
    assert lines[0].startswith('in grpo.yaml, set') and lines[0].endswith(':') and len(lines) > 1
    assert all(re.fullmatch(r'\w+: \S+', ln) for ln in lines[1:]), lines


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


# --- issue 31 item 3: fixes a user pastes as they are ---


def _swift_yaml(tmp_path, extra=''):
    cfg = tmp_path / 'c.yaml'
    pairs = dict(zip(SWIFT_OOM[::2], SWIFT_OOM[1::2]))
    body = ''.join(f'{k[2:]}: {v}\n' for k, v in pairs.items())
    body = body.replace('vllm_gpu_memory_utilization: 0.7\n', 'vllm_gpu_memory_utilization: 0.7  # mine\n')
    cfg.write_text('# my launch\nENV:\n  CUDA_VISIBLE_DEVICES: "0,1"\n  NPROC_PER_NODE: 2\n' + body + extra)
    return cfg


def test_write_fix_edits_the_yaml_as_text(tmp_path, capsys):
    import yaml

    cfg = _swift_yaml(tmp_path)
    out = tmp_path / 'fixed.yaml'
    rc = guard.main(['check', str(cfg), '--gpus', '2', '--gpu-type', 'A100-80G', '--write-fix', str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and f'written to {out}' in err
    text = out.read_text()
    assert text.startswith('# my launch\nENV:\n  CUDA_VISIBLE_DEVICES: "0,1"\n')  # comments and other lines kept
    data = yaml.safe_load(text)
    before = yaml.safe_load(cfg.read_text())
    assert data['per_device_train_batch_size'] < 16 and data['num_generations'] == 8
    assert data['per_device_train_batch_size'] * data.get('gradient_accumulation_steps', 1) == 16
    assert 'gradient_accumulation_steps' not in before and text.rstrip().endswith(
        f'gradient_accumulation_steps: {data["gradient_accumulation_steps"]}'
    )  # a missing key appended at the end of the top-level mapping
    if data['vllm_gpu_memory_utilization'] != 0.7:
        assert f'vllm_gpu_memory_utilization: {data["vllm_gpu_memory_utilization"]}  # mine' in text
    # the fixed launch fits
    rc = guard.main(['check', str(out), '--gpus', '2', '--gpu-type', 'A100-80G', '--json'])
    assert not any(f['rule'] == 'memory.oom' for f in json.loads(capsys.readouterr().out)['findings'])


def test_write_fix_refuses_the_input_and_writes_a_command_line(tmp_path, capsys):
    import shlex

    cfg = _swift_yaml(tmp_path)
    before = cfg.read_text()
    rc = guard.main(['check', str(cfg), '--gpus', '2', '--gpu-type', 'A100-80G', '--write-fix', str(cfg)])
    err = capsys.readouterr().err
    assert rc == 2 and '--write-fix: ' in err and 'own input' in err and cfg.read_text() == before
    out = tmp_path / 'cmd.sh'
    line = ['CUDA_VISIBLE_DEVICES=0,1', 'NPROC_PER_NODE=2', 'swift', 'rlhf', *SWIFT_OOM[:-1], 'my data.jsonl']
    rc = guard.main(['check', '--gpus', '2', '--gpu-type', 'A100-80G', '--write-fix', str(out), '--', *line])
    capsys.readouterr()
    text = out.read_text()
    assert text.count('\n') == 1 and "'my data.jsonl'" in text  # one line, shell-quoted
    words = shlex.split(text)
    assert words[: len(line)] == line and '--per_device_train_batch_size' in words[len(line) :]
    assert not list(tmp_path.glob('.cmd.sh.*'))  # the temporary file was renamed


def test_edit_yaml_and_json_keep_the_rest():
    from grpo_recipes.write_fix import edit_json, edit_yaml

    text = 'a: 1  # one\nb:\n  - x\n  - y\n\nc: 3\n'
    assert edit_yaml(text, {'a': 2, 'b': 'z', 'd': True}) == 'a: 2  # one\nb: z\n\nc: 3\nd: true\n'
    assert edit_yaml('x: 1\n', {}, {'K': 'v'}) == 'x: 1\nENV:\n  K: "v"\n'
    assert edit_yaml('ENV:\n  K: "w"\nx: 1\n', {}, {'K': 'v', 'L': '1'}) == 'ENV:\n  L: "1"\n  K: "v"\nx: 1\n'
    assert json.loads(edit_json('{\n  "a": 1,\n  "s": "q"\n}\n', {'a': 2, 'n': 'v'})) == {'a': 2, 's': 'q', 'n': 'v'}
    assert edit_json('{\n  "a": 1,\n  "s": "q"\n}\n', {'a': 2}) == '{\n  "a": 2,\n  "s": "q"\n}\n'


def test_cli_fix_does_not_quote_an_unset_value_as_null():
    from grpo_recipes.frontends import read_launch
    from grpo_recipes.frontends.swift.wording import swift_cli_fix
    from grpo_recipes.memory.search import Fix

    launch = read_launch(['swift', 'rlhf', '--rlhf_type', 'grpo', '--model', 'm'], environ={})
    text = swift_cli_fix(Fix({'deepspeed': (None, 'zero3')}, 0.9, 'train'), launch)
    assert text == 'set --deepspeed zero3 on the command line' and 'null' not in text
    text = swift_cli_fix(Fix({'deepspeed': (None, 'zero3'), 'beta': (0.04, 0.0)}, 0.9, 'train'), launch)
    assert text.endswith('(was --beta 0.04)')


def test_write_fix_puts_accelerates_process_count_on_its_option(monkeypatch):
    from dataclasses import replace

    from grpo_recipes import fix_syntax
    from grpo_recipes.frontends import read_launch
    from grpo_recipes.memory.search import Fix
    from grpo_recipes.write_fix import _command_line

    args = [*ACCEL, *TRL_OOM]
    launch = read_launch(args, environ={})
    monkeypatch.setattr(
        fix_syntax, 'fixed_launch', lambda lau, fix: (replace(lau, env={**lau.env, 'NPROC_PER_NODE': '3'}), [])
    )
    line = _command_line(args, launch, Fix({}, 0.9, 'train'))
    assert line.startswith('accelerate launch --num_processes 3 ') and 'NPROC_PER_NODE' not in line
