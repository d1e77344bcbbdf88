"""A launch script that changes directory before its launch (`cd src`, as TheElicitors' run_train_V100.sh does:
`cd src` then `accelerate launch --config_file configs/deepspeed_zero3.yaml train/train_grpo.py --config ...`): its
relative paths are read from that directory, as the launch reads them, and the guard's own directory is left as it
was."""

import json
import os

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.models import builtin_config

ACCELERATE = 'compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n'
ACCELERATE += 'num_machines: 1\nnum_processes: 3\nmixed_precision: bf16\n'
RECIPE = 'model_name_or_path: ./ckpt\nper_device_train_batch_size: 4\nnum_generations: 6\nmax_completion_length: 768\n'
SCRIPT = """#!/bin/bash
cd src
export CUDA_VISIBLE_DEVICES=1,2,3
accelerate launch --config_file configs/zero3.yaml --num_processes 3 train/train_grpo.py --config recipes/grpo.yaml
"""


def test_relative_paths_are_read_where_the_script_changes_to(tmp_path, monkeypatch):
    src = tmp_path / 'src'
    for rel, text in {
        'configs/zero3.yaml': ACCELERATE,
        'recipes/grpo.yaml': RECIPE,
        'train/train_grpo.py': 'from trl import GRPOConfig, GRPOTrainer, TrlParser\n',
        'ckpt/config.json': json.dumps(builtin_config('Qwen2.5-7B-Instruct.json')),
    }.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    (tmp_path / 'run.sh').write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    launch = read_launch(['run.sh'], environ={})
    assert os.getcwd() == str(tmp_path) and launch.workdir == str(src)
    report = check_launch(launch, Hardware(gpus=4, gpu_type='H100', source='flags'), packages={'trl': '0.29.1'})
    assert os.getcwd() == str(tmp_path)
    cfg = report.cfg
    assert (cfg.per_device_train_batch_size, cfg.num_generations, cfg.max_completion_length) == (4, 6, 768)
    assert report.plan.world_size == 3 and report.stop is None
    assert report.memory and not report.memory_unchecked  # ./ckpt is src/ckpt: its config.json planned the memory
    # the same script with no src/ here: read from the guard's own directory, which lacks the config it names
    (tmp_path / 'elsewhere').mkdir()
    (tmp_path / 'elsewhere' / 'run.sh').write_text(SCRIPT)
    monkeypatch.chdir(tmp_path / 'elsewhere')
    with pytest.raises(GuardError, match='configs/zero3.yaml: no such file'):
        read_launch(['run.sh'], environ={})
