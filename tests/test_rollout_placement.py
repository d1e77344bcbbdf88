"""Which GPUs a rollout server started by the launch script takes.

- No CUDA_VISIBLE_DEVICES on its command: vLLM takes the first TP x DP GPUs it sees (TRL's vllm_serve gives data-
  parallel rank r the TP GPUs after r x TP), so a trainer on some of those GPUs overlaps it.
- Started through a job launcher (`srun --gres=gpu:1 trl vllm-serve ...`, or inside `srun ... bash -c`): Slurm numbers
  a job step's GPUs from 0 on whatever GPUs it gives the step, so its ids are not the trainer's and nothing is compared.
- `python -m trl.scripts.vllm_serve --help | grep -q -- --group-port` (maxent-grpo's train.slurm) asks the program a
  question: it is no server."""

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware

TRAIN = (
    'CUDA_VISIBLE_DEVICES={train} accelerate launch --num_processes {n} train.py --model_name_or_path '
    'Qwen/Qwen2.5-1.5B-Instruct --use_vllm true --vllm_mode server --per_device_train_batch_size 8 '
    '--num_generations 8\n'
)
PKGS = {'trl': '0.29.1', 'math-verify': '0.9.0', 'deepspeed': '0.19.8'}


def _check(tmp_path, monkeypatch, server: str, train: str, n: int, head: str = ''):
    (tmp_path / 'train.py').write_text('from trl import GRPOTrainer, TrlParser\n')
    (tmp_path / 'run.sh').write_text(head + server + TRAIN.format(train=train, n=n))
    monkeypatch.chdir(tmp_path)
    launch = read_launch(['run.sh'], environ={})
    return check_launch(launch, Hardware(gpus=8, gpu_type='H100', source='flags'), packages=PKGS)


@pytest.mark.parametrize(
    'server, train, n, overlap',
    [
        ('trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct --tensor_parallel_size 4 &\n', '4,5,6,7', 4, False),
        ('trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct --tensor_parallel_size 4 &\n', '2,3,4,5', 4, True),
        (
            'trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct --tensor_parallel_size 1 --data_parallel_size 2 &\n',
            '1,2',
            2,
            True,
        ),
    ],
)
def test_a_server_without_visible_devices_takes_the_first_gpus(tmp_path, monkeypatch, server, train, n, overlap):
    report = _check(tmp_path, monkeypatch, server, train, n)
    assert ('device.rollout-overlap' in {f.rule for f in report.findings}) is overlap
    assert any('sets no CUDA_VISIBLE_DEVICES' in a for a in report.assumptions)


def test_a_server_a_job_launcher_places_is_not_compared(tmp_path, monkeypatch):
    head = '#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:8\n'
    server = 'srun --nodes=1 --ntasks=1 --gres=gpu:1 trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct &\n'
    report = _check(tmp_path, monkeypatch, server, '0,1,2,3', 4, head)
    assert report.launch.rollout.launcher == 'srun' and report.hardware.rollout_gpus is None
    assert 'device.rollout-overlap' not in {f.rule for f in report.findings}


def test_a_help_probe_is_not_the_server(tmp_path, monkeypatch):
    probe = 'if python -m trl.scripts.vllm_serve --help 2>&1 | grep -q -- "--group-port"; then echo y; fi\n'
    server = 'CUDA_VISIBLE_DEVICES=7 trl vllm-serve --model Qwen/Qwen2.5-1.5B-Instruct --port 8000 &\n'
    report = _check(tmp_path, monkeypatch, probe + server, '0,1', 2)
    assert report.launch.rollout.gpus == [7] and '--help' not in report.launch.rollout.argv
