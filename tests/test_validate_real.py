"""`grpo-guard validate` puts real configs through ms-swift 4.6's real parser (in a subprocess).

Nothing is mocked except what a CPU machine cannot have: the worker hides GPUs, adds
``--use_cpu true``, and patches the trainer world size to NNODES × NPROC_PER_NODE (see
grpo_recipes/frontends/swift/worker.py). Each case costs one ms-swift import (about 10 s).
"""

import json

import pytest
from conftest import EXAMPLE, run_cli

pytestmark = pytest.mark.slow

BASE = """
ENV:
  CUDA_VISIBLE_DEVICES: "0"
  NPROC_PER_NODE: 1
rlhf_type: grpo
model: Qwen/Qwen2.5-7B-Instruct
tuner_type: lora
use_vllm: true
vllm_mode: colocate
vllm_max_model_len: 2048
per_device_train_batch_size: 8
gradient_accumulation_steps: 1
num_generations: 8
reward_funcs: [accuracy, format]
dataset: data.jsonl
"""


def validate(path, *extra):
    proc = run_cli('grpo_recipes.cli.guard', 'validate', '--json', str(path), *(['--', *extra] if extra else []))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def test_valid_yaml_with_env_block_passes(write_yaml):
    rc, out = validate(write_yaml(BASE))
    assert rc == 0 and out['ok'], out
    resolved = out['parser']['resolved']
    assert resolved['model_type'] == 'qwen2' and resolved['template'] == 'qwen2_5'
    assert resolved['beta'] == 0.04 and resolved['truncation_strategy'] == 'left'
    assert out['launch']['env'] == {'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': '1'}


def test_train_type_fails_naming_tuner_type(write_yaml):
    rc, out = validate(write_yaml(BASE.replace('tuner_type: lora', 'train_type: lora')))
    assert rc == 1
    assert "remaining_argv: ['--train_type', 'lora']" in out['parser']['message']
    assert out['parser']['unknown'][0]['suggestion'] == '--tuner_type'


def test_indivisible_num_generations_gives_swift_message(write_yaml):
    rc, out = validate(write_yaml(BASE.replace('num_generations: 8', 'num_generations: 7')))
    assert rc == 1
    assert out['parser']['message'] == (
        'generation_batch_size (8) must be evenly divisible by num_generations (7). Valid values: [2, 4, 8].'
    )


def test_use_vllm_without_mode(write_yaml):
    rc, out = validate(write_yaml(BASE.replace('vllm_mode: colocate\n', '')))
    assert rc == 1
    assert out['parser']['message'] == 'vllm_mode is required when use_vllm is true'


def test_world_size_comes_from_env(write_yaml):
    # 2 processes × bs 4 = 8 completions per rollout: 8 divides it; on one process (4) it would not.
    text = BASE.replace('NPROC_PER_NODE: 1', 'NPROC_PER_NODE: 2').replace('"0"', '"0,1"')
    text = text.replace('per_device_train_batch_size: 8', 'per_device_train_batch_size: 4')
    rc, out = validate(write_yaml(text))
    assert rc == 0, out
    rc, out = validate(write_yaml(text), '--num_generations', '16')
    assert (
        rc == 1
        and 'generation_batch_size (8) must be evenly divisible by num_generations (16)' in out['parser']['message']
    )


def test_shipped_example_is_valid():
    rc, out = validate(EXAMPLE)
    assert rc == 0, out


def test_a_port_held_by_another_job_does_not_stop_validate():
    # a training job on this machine holds the launch's MASTER_PORT (here: the caller's): the parse-only worker
    # runs its simulated world on a port of its own (realparse._free_port), not on the held one
    import socket

    with socket.socket() as held:
        held.bind(('127.0.0.1', 0))
        held.listen()
        port = str(held.getsockname()[1])
        proc = run_cli(
            'grpo_recipes.cli.guard',
            'validate',
            '--json',
            str(EXAMPLE),
            env={'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': port},
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)['parser']['ok']
