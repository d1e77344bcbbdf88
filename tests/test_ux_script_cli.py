"""A TRL script that never parses its command line (issue 21, 6): its flags are ignored, so they are neither
applied nor validated, and fixes point at the script's own lines."""

import json

import pytest

from grpo_recipes.cli import guard
from grpo_recipes.frontends.trl.script_cli import parses_command_line

SCRIPT = """from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

dataset = load_dataset("trl-lib/tldr", split="train")


def reward_len(completions, **kwargs):
    return [-abs(20 - len(c)) for c in completions]

{parser}
training_args = GRPOConfig(
    output_dir="out",
    per_device_train_batch_size=8,
    gradient_accumulation_steps=8,
    num_generations=8,
    max_completion_length=2048,
    use_vllm=True,
    vllm_mode="colocate",
    vllm_gpu_memory_utilization=0.6,
    vllm_max_model_length=2304,
    bf16=True,
)
trainer = GRPOTrainer(model="Qwen/Qwen2.5-7B-Instruct", reward_funcs=reward_len, args=training_args,
                      train_dataset=dataset)
trainer.train()
"""
ACCEL = ['accelerate', 'launch', '--num_processes', '4', '--use_deepspeed', '--zero_stage', '3']


def _check(script, capsys):
    rc = guard.main(
        [
            'check',
            '--json',
            '--gpus',
            '4',
            '--gpu-type',
            'A100-80G',
            '--',
            *ACCEL,
            str(script),
            '--per_device_train_batch_size',
            '2',
            '--bogus_flag',
            '1',
        ]
    )
    return rc, json.loads(capsys.readouterr().out)


def test_flags_of_a_script_that_never_parses_them_are_ignored(tmp_path, capsys):
    script = tmp_path / 'train.py'
    script.write_text(SCRIPT.replace('{parser}', ''))
    lines = script.read_text().splitlines()
    util_line = next(i for i, ln in enumerate(lines, 1) if 'vllm_gpu_memory_utilization=' in ln)
    rc, out = _check(script, capsys)
    assert out['config']['per_device_train_batch_size'] == 8  # the script's value; the flag's 2 never applies
    rules = {f['rule']: f for f in out['findings']}
    assert 'args.unknown' not in rules  # --bogus_flag is not validated as if it applied
    note = rules['trl.script-ignores-command-line']
    assert note['severity'] == 'warning' and '--bogus_flag' in note['message']
    fix = rules['memory.fix']['fix']
    assert f'{script}:{util_line}: vllm_gpu_memory_utilization=' in fix and '--vllm_gpu_memory_utilization' not in fix


def test_a_script_that_parses_its_flags_gets_them(tmp_path, capsys):
    script = tmp_path / 'train.py'
    script.write_text(
        SCRIPT.replace('{parser}', 'from trl import TrlParser\nargs = TrlParser(GRPOConfig).parse_args()')
    )
    rc, out = _check(script, capsys)
    assert out['config']['per_device_train_batch_size'] == 2
    assert 'trl.script-ignores-command-line' not in {f['rule'] for f in out['findings']}
    assert any('--bogus_flag' in f['message'] for f in out['findings'])


@pytest.mark.parametrize(
    'code, parses',
    [
        ('import sys\nlr = float(sys.argv[1])', True),
        ('import argparse\np = argparse.ArgumentParser()', True),
        ('from transformers import HfArgumentParser', True),
        ('import fire\nfire.Fire(main)', True),
        ('from trl import GRPOConfig\nargs = GRPOConfig(output_dir="o")', False),
    ],
)
def test_parses_command_line(code, parses):
    assert parses_command_line(code) is parses
