"""`grpo-guard validate --model-config DIR`: a model with no bundled config is validated without editing the launch
(as `check --model-config` plans it); validate's --help names every launch it takes."""

import json
import shutil

import pytest
from conftest import ROOT, run_cli

UNKNOWN_MODEL = [
    '--',
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'acme/Qwen2.5-7B-Instruct-ft',
    '--model_type',
    'qwen2',
    '--template',
    'qwen2_5',
    '--dataset',
    'AI-MO/NuminaMath-TIR#100',
    '--reward_funcs',
    'accuracy',
    '--num_generations',
    '4',
    '--per_device_train_batch_size',
    '4',
]


def test_validate_help_names_launchers_trl_and_model_config():
    proc = run_cli('grpo_recipes.cli.guard', 'validate', '--help')
    assert proc.returncode == 0
    text = ' '.join(proc.stdout.split())
    assert 'launcher .sh' in text and 'accelerate launch' in text and "TRL's TrlParser" in text
    assert '--model-config DIR' in text


def test_validate_model_config_that_is_not_there_is_one_line(tmp_path):
    proc = run_cli('grpo_recipes.cli.guard', 'validate', '--model-config', str(tmp_path / 'nope'), *UNKNOWN_MODEL)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert (
        proc.stderr.strip() == f'error: --model-config {tmp_path / "nope"}: no config.json there; pass the model '
        'dir or its config.json'
    )


def test_validate_without_a_config_says_to_pass_one():
    proc = run_cli('grpo_recipes.cli.guard', 'validate', *UNKNOWN_MODEL)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert 'no built-in config; pass --model-config DIR' in proc.stderr


@pytest.mark.slow
def test_validate_parses_against_the_given_config(tmp_path):
    shutil.copy(ROOT / 'grpo_recipes' / 'model_configs' / 'Qwen2.5-7B-Instruct.json', tmp_path / 'config.json')
    proc = run_cli('grpo_recipes.cli.guard', 'validate', '--json', '--model-config', str(tmp_path), *UNKNOWN_MODEL)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out['ok'], out['parser']
    assert out['parser']['resolved']['model_type'] == 'qwen2' and out['parser']['resolved']['max_length'] == 32768
