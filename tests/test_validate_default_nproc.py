"""`grpo-guard validate` on a TRL launch with no --num_processes and no accelerate config simulates the process
count `check` plans: one per visible GPU (CUDA_VISIBLE_DEVICES, else --gpus), as accelerate 1.x starts them. The
verdict is TRL's own TrlParser's (GRPOConfig checks the generation batch against num_generations); the GPUs are
simulated (this machine has none)."""

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware

pytestmark = pytest.mark.slow
ARGV = [
    'accelerate',
    'launch',
    'train_grpo.py',
    '--model_name_or_path',
    'Qwen/Qwen2.5-7B-Instruct',
    '--per_device_train_batch_size',
    '2',
    '--num_generations',
    '8',
]
PKGS = {'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': '0.9.0', 'msgspec': '0.22.0'}


@pytest.mark.parametrize(
    'env,flags,world',
    [({'CUDA_VISIBLE_DEVICES': '0,1,2,3'}, [], 4), ({}, ['--gpus', '4'], 4), ({'CUDA_VISIBLE_DEVICES': '0'}, [], 1)],
)
def test_validate_uses_checks_process_count(tmp_path, monkeypatch, env, flags, world):
    # the session's own HF_HOME (conftest): empty, so accelerate finds no default config, and the pool serves the parse
    assert not (Path(os.environ['HF_HOME']) / 'accelerate' / 'default_config.yaml').exists()
    environ = dict(env)
    monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)  # only the case's own
    proc = run_cli('grpo_recipes.cli.guard', 'validate', '--json', *flags, '--', *ARGV, env=environ)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out['parser']['world_size'] == world
    # 2 prompts per process x world processes must divide by 8 generations (TRL's own check)
    assert out['ok'] == (2 * world % 8 == 0)
    launch = read_launch(['--', *ARGV], environ=environ)
    r = check_launch(launch, Hardware(gpus=4, gpu_type='A100-80G', source='flags'), packages=PKGS, memory=False)
    assert r.plan.world_size == world
