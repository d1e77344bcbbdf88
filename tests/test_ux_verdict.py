"""UNCHECKED is one verdict everywhere: check --json, grpo-recipes plan's exit status, run's refusal line."""

import json
import shutil

from conftest import ROOT
from test_cli import CLEAN

from grpo_recipes.cli import guard
from grpo_recipes.cli import recipes as recipes_cli

UNKNOWN_MODEL = CLEAN.replace('model: Qwen/Qwen2.5-7B-Instruct', 'model: acme/never-seen-7b')  # no config.json


def _qwen_config_dir(tmp_path):
    from grpo_recipes.models import builtin_config

    d = tmp_path / 'qwen-config'
    d.mkdir()
    (d / 'config.json').write_text(json.dumps(builtin_config('Qwen2.5-7B-Instruct.json')))
    return d


def test_check_json_ok_follows_the_exit_status_on_unchecked(tmp_path, capsys):
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(UNKNOWN_MODEL)
    rc = guard.main(['check', str(cfg), '--gpus', '1', '--gpu-type', 'A100-80G', '--json'])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out['ok'] is False and out['verdict'] == 'UNCHECKED' and out['rules_ok'] is True
    rc = guard.main(['check', str(cfg), '--gpus', '1', '--gpu-type', 'A100-80G', '--json', '--allow-unchecked'])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out['ok'] is True and out['verdict'] == 'UNCHECKED'


def test_run_on_unchecked_only_does_not_say_fix_them_or_force(tmp_path, capsys):
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(UNKNOWN_MODEL)
    rc = guard.main(['run', str(cfg), '--gpus', '1', '--gpu-type', 'A100-80G'])
    err = capsys.readouterr().err
    assert rc == 1
    assert 'fix them or pass --force' not in err
    assert '--allow-unchecked' in err and '--model-config' in err


def _recipe_dir(tmp_path, model):
    root = tmp_path / 'recipes'
    src = ROOT / 'recipes' / 'qwen2.5-7b-instruct' / 'lora-2xa100-80g.yaml'
    (root / 'acme').mkdir(parents=True)
    text = src.read_text(encoding='utf-8').replace('model: Qwen/Qwen2.5-7B-Instruct', f'model: {model}')
    assert f'model: {model}' in text
    (root / 'acme' / 'lora.yaml').write_text(text, encoding='utf-8')
    shutil.copy(src.with_suffix('.sh'), root / 'acme' / 'lora.sh')
    return root


def test_plan_exits_like_check_on_unchecked_and_takes_model_config(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('GRPO_RECIPES_DIR', str(_recipe_dir(tmp_path, 'acme/never-seen-7b')))
    monkeypatch.setenv('COLUMNS', '120')
    assert recipes_cli.main(['plan', 'acme/lora']) == 1
    assert 'UNCHECKED' in capsys.readouterr().out
    assert recipes_cli.main(['plan', 'acme/lora', '--json']) == 1
    assert json.loads(capsys.readouterr().out)['ok'] is False
    assert recipes_cli.main(['plan', 'acme/lora', '--allow-unchecked']) == 0
    capsys.readouterr()
    assert recipes_cli.main(['plan', 'acme/lora', '--model-config', str(_qwen_config_dir(tmp_path))]) == 0
    assert 'OK: no errors' in capsys.readouterr().out
