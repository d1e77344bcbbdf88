"""A TRL launch whose script is not where the guard runs: it is read as a TRL GRPOTrainer script, and the verdict
says so (the script's own settings are not seen); a launch that names no model says that, not `None`."""

import json

from grpo_recipes.cli.guard import main

HW = ['--gpus', '1', '--gpu-type', 'A100-80G']


def test_missing_script_is_an_assumption_said_aloud(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main(
        ['check', '--json', *HW, '--', 'python', 'train_grpo.py', '--model_name_or_path', 'Qwen/Qwen2.5-7B-Instruct']
    )
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1)
    assert any('train_grpo.py is not here to read' in n for n in out['launch']['notes'])


def test_a_launch_with_no_model_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main(['check', *HW, '--', 'python', 'train_grpo.py', '--learning_rate', '1e-6'])
    text = ' '.join(capsys.readouterr().out.split())
    assert 'the launch names no model' in text and 'for None' not in text


SERVER_BESIDE = """CUDA_VISIBLE_DEVICES=0,1 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 &
CUDA_VISIBLE_DEVICES=2,3 accelerate launch --num_processes 2 {entry} --per_device_train_batch_size 4 {extra}
"""


def _plan(tmp_path, monkeypatch, capsys, entry, extra=''):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'run.sh').write_text(SERVER_BESIDE.format(entry=entry, extra=extra))
    main(['check', '--json', '--gpus', '4', '--gpu-type', 'A100-80G', 'run.sh'])
    return json.loads(capsys.readouterr().out)


def test_a_script_not_here_beside_a_trl_server_is_planned_on_that_server(tmp_path, monkeypatch, capsys):
    """The project's own module (not here) takes its own flags and sets use_vllm in code; the `trl vllm-serve` beside
    it is the server it uses (TRL's client talks to nothing else), on that server's model."""
    out = _plan(tmp_path, monkeypatch, capsys, '-m envs.train_grpo_self_reward', '--model_name X')
    assert (out['config']['use_vllm'], out['config']['vllm_mode']) == (True, 'server')
    assert out['config']['model'] == 'Qwen/Qwen2.5-7B-Instruct'
    assert any('planned as the script using that server' in n for n in out['launch']['notes'])
    assert 'device.rollout-gpus-unused' not in {f['rule'] for f in out['findings']}


def test_a_script_here_or_a_launch_that_says_use_vllm_is_read_as_written(tmp_path, monkeypatch, capsys):
    (tmp_path / 'train.py').write_text('from trl import GRPOConfig, GRPOTrainer\n')
    out = _plan(tmp_path, monkeypatch, capsys, 'train.py', '--model_name_or_path Qwen/Qwen2.5-7B-Instruct')
    assert out['config']['use_vllm'] is False  # the script is here: what it sets is read, and it sets nothing
    out = _plan(tmp_path, monkeypatch, capsys, 'other.py', '--use_vllm false')
    assert out['config']['use_vllm'] is False
