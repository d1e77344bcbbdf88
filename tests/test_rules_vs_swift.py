"""The guard's batch rules agree with ms-swift 4.6's real parser (one subprocess for all cases).

Configs: the batch settings of ms-swift's GRPO example scripts (examples/train/grpo/**, adapted to
4.6 names; see ../shared/reference/ms-swift.md §3), plus invalid variants of them. On a CPU machine
the world size is simulated (NNODES × NPROC_PER_NODE patched onto swift's GRPOConfig) and the
rollout-server connection is skipped; everything else is ms-swift's own code.
"""

import pytest
from helpers import make, rules_of

from grpo_recipes.hardware import Hardware
from grpo_recipes.realparse import validate_many

pytestmark = pytest.mark.slow

SERVER = {'vllm_mode': 'server', 'vllm_server_host': ['127.0.0.1'], 'vllm_server_port': [8000]}


def env(nproc, nnodes=None):
    e = {'NPROC_PER_NODE': nproc, 'CUDA_VISIBLE_DEVICES': ','.join(str(i) for i in range(nproc))}
    if nnodes:
        e.update(NNODES=nnodes, NODE_RANK=0, MASTER_ADDR='10.0.0.1')
    return e


# (name, overrides, env): batch settings from the example scripts.
EXAMPLES = [
    (
        'external/grpo_7b',
        {**SERVER, 'per_device_train_batch_size': 2, 'gradient_accumulation_steps': 2, 'num_generations': 8},
        env(6),
    ),
    ('external/grpo_32b_full', {**SERVER, 'per_device_train_batch_size': 1, 'num_generations': 8}, env(8)),
    (
        'external/moe_lora',
        {**SERVER, 'per_device_train_batch_size': 2, 'gradient_accumulation_steps': 4, 'num_generations': 14},
        env(7),
    ),
    ('external/agent', {**SERVER, 'per_device_train_batch_size': 7, 'num_generations': 49}, env(7)),
    (
        'external/vllm_gym',
        {
            **SERVER,
            'per_device_train_batch_size': 2,
            'gradient_accumulation_steps': 2,
            'steps_per_generation': 2,
            'num_generations': 6,
        },
        env(6),
    ),
    (
        'external/vllm_multi_turn',
        {
            **SERVER,
            'per_device_train_batch_size': 2,
            'gradient_accumulation_steps': 4,
            'steps_per_generation': 8,
            'num_generations': 8,
        },
        env(2),
    ),
    (
        'internal/transformers',
        {'use_vllm': False, 'vllm_mode': None, 'per_device_train_batch_size': 4, 'num_generations': 4},
        env(1),
    ),
    (
        'internal/qlora',
        {'per_device_train_batch_size': 4, 'gradient_accumulation_steps': 4, 'num_generations': 8},
        env(4),
    ),
    (
        'internal/vllm_72b_4gpu',
        {'per_device_train_batch_size': 1, 'num_generations': 4, 'vllm_tensor_parallel_size': 4},
        env(4),
    ),
    (
        'internal/vllm_multi_turn',
        {'per_device_train_batch_size': 4, 'num_generations': 32, 'vllm_tensor_parallel_size': 4},
        env(8),
    ),
    (
        'internal/gspo',
        {
            'per_device_train_batch_size': 2,
            'gradient_accumulation_steps': 8,
            'steps_per_generation': 32,
            'num_generations': 16,
        },
        env(8),
    ),
    (
        'internal/chord',
        {'per_device_train_batch_size': 4, 'gradient_accumulation_steps': 8, 'num_generations': 8},
        env(8),
    ),
    (
        'internal/moe_lora',
        {
            'per_device_train_batch_size': 2,
            'gradient_accumulation_steps': 4,
            'num_generations': 16,
            'vllm_tensor_parallel_size': 2,
        },
        env(8),
    ),
    ('qwen3-best-practice', {'per_device_train_batch_size': 2, 'num_generations': 16}, env(8)),
    (
        'multi_node/colocate_multi_node',
        {'per_device_train_batch_size': 1, 'gradient_accumulation_steps': 2, 'num_generations': 8},
        env(4, nnodes=2),
    ),
    (
        'multi_node/server_multi_node',
        {**SERVER, 'per_device_train_batch_size': 1, 'num_generations': 4},
        env(4, nnodes=2),
    ),
    (
        'multi_node/train_dlc',
        {'per_device_train_batch_size': 4, 'num_generations': 48, 'vllm_tensor_parallel_size': 4},
        env(8),
    ),
    (
        'docs-faq',
        {
            'per_device_train_batch_size': 4,
            'gradient_accumulation_steps': 8,
            'generation_batch_size': 512,
            'num_generations': 64,
        },
        env(8),
    ),
    # invalid variants
    ('G7', {'num_generations': 7}, env(1)),
    ('G1', {'num_generations': 1}, env(1)),
    ('gbs-not-multiple', {'generation_batch_size': 20, 'per_device_train_batch_size': 8}, env(1)),
    ('gbs-and-spg-disagree', {'generation_batch_size': 64, 'steps_per_generation': 2}, env(2)),
    ('G3-on-2procs', {'per_device_train_batch_size': 2, 'num_generations': 3}, env(2)),
    (
        'eval-indivisible',
        {'per_device_eval_batch_size': 3, 'split_dataset_ratio': 0.1, 'eval_strategy': 'steps'},
        env(1),
    ),
]

BATCH_RULES = {
    'batch.num-generations',
    'batch.generation-batch',
    'batch.steps-per-generation',
    'batch.num-generations-divides',
    'batch.eval',
}


def test_batch_rules_agree_with_ms_swift():
    launches, verdicts = [], []
    for name, over, e in EXAMPLES:
        launch, report = make(over, env=e, hw=Hardware(gpus=8))
        launches.append(launch)
        verdicts.append(not (rules_of(report) & BATCH_RULES))
    results = validate_many(launches)
    disagree = [(name, ours, r.message) for (name, _, _), ours, r in zip(EXAMPLES, verdicts, results) if ours != r.ok]
    assert not disagree
    assert sum(verdicts) >= 15 and sum(not v for v in verdicts) >= 5  # both sides are exercised


def test_fixed_configs_from_reported_cases_pass_ms_swift():
    """The fixes the guard proposes in tests/test_rules.py, put through the real parser."""
    cases = [
        (
            {'model': 'Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4', 'per_device_train_batch_size': 4, 'num_generations': 4},
            {'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2},
            Hardware(gpus=2),
        ),
        (SERVER, {'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}, Hardware(gpus=3, rollout_gpus=(2,))),
        (SERVER, {'CUDA_VISIBLE_DEVICES': '0,2,3,4', 'NPROC_PER_NODE': 4}, Hardware(gpus=6, rollout_gpus=(5,))),
        (
            {**SERVER, 'vllm_tensor_parallel_size': 2},
            {'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2},
            Hardware(gpus=4, rollout_gpus=(2, 3)),
        ),
        ({'num_generations': 8}, env(1), Hardware(gpus=1)),
        ({'max_length': 1536, 'max_completion_length': 1024, 'vllm_max_model_len': 2560}, env(1), Hardware(gpus=1)),
        ({'vllm_tensor_parallel_size': 4}, env(8), Hardware(gpus=8)),
    ]
    launches = []
    for over, e, hw in cases:
        launch, report = make(over, env=e, hw=hw)
        assert report.ok, [f.message for f in report.findings if f.severity == 'error']
        launches.append(launch)
    results = validate_many(launches)
    assert [r.message for r in results if not r.ok] == []
