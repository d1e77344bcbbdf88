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
