"""Hypothesis: thousands of arbitrary launches; the guard reports findings, it never crashes."""

import pytest
from helpers import PACKAGES_OK
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_recipes.check import check_launch
from grpo_recipes.errors import GuardError
from grpo_recipes.frontends.swift.reader import launch_from_mapping
from grpo_recipes.hardware import Hardware

small = st.integers(min_value=-2, max_value=70)
VALUES = {
    'per_device_train_batch_size': small,
    'gradient_accumulation_steps': small,
    'num_generations': small,
    'steps_per_generation': small,
    'generation_batch_size': small,
    'per_device_eval_batch_size': small,
    'num_generations_eval': small,
    'vllm_tensor_parallel_size': small,
    'vllm_data_parallel_size': small,
    'max_length': st.integers(-5, 200000),
    'max_completion_length': st.integers(-5, 200000),
    'vllm_max_model_len': st.integers(-5, 200000),
    'vllm_gpu_memory_utilization': st.floats(-1, 2),
    'use_vllm': st.booleans(),
    'vllm_mode': st.sampled_from(['colocate', 'server']),
    'sleep_level': st.integers(0, 2),
    'offload_model': st.booleans(),
    'async_generate': st.booleans(),
    'tuner_type': st.sampled_from(['lora', 'full']),
    'beta': st.floats(0, 1),
    'deepspeed': st.sampled_from(['zero2', 'zero3', 'zero3_offload', 'ds.json']),
    'truncation_strategy': st.sampled_from(['left', 'delete', 'right', 'split']),
    'vllm_server_host': st.lists(st.sampled_from(['127.0.0.1', 'host-a', 'bad host', '::1']), max_size=3),
    'vllm_server_port': st.lists(st.integers(0, 70000), min_size=1, max_size=3),
    'vllm_server_group_port': st.lists(st.integers(0, 70000), min_size=1, max_size=3),
    'reward_funcs': st.lists(st.sampled_from(['accuracy', 'format', 'nope']), max_size=3),
    'model': st.sampled_from(
        [
            'Qwen/Qwen2.5-7B-Instruct',
            'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B',
            'Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4',
            'unknown/model',
        ]
    ),
    'quant_method': st.sampled_from(['bnb']),
    'eval_strategy': st.sampled_from(['no', 'steps']),
    'split_dataset_ratio': st.floats(0, 0.5),
    'ref_model': st.just('x'),
    'epsilon': st.floats(0, 1),
    'train_type': st.just('lora'),
    'max_model_len': st.integers(1, 10**6),
}
ids = st.lists(st.integers(0, 9), max_size=9).map(lambda xs: ','.join(map(str, xs)))
ENV = st.fixed_dictionaries(
    {},
    optional={
        'CUDA_VISIBLE_DEVICES': st.one_of(ids, st.sampled_from(['', 'a,b', '0,,1', ' 1'])),
        'NPROC_PER_NODE': st.one_of(st.integers(-1, 9).map(str), st.just('x')),
        'NNODES': st.one_of(st.integers(-1, 4).map(str), st.just('')),
        'NODE_RANK': st.integers(-1, 5).map(str),
        'MASTER_ADDR': st.sampled_from(['', '10.0.0.1']),
        'MASTER_PORT': st.sampled_from(['29500', 'abc']),
    },
)


@pytest.mark.long
@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cfg=st.fixed_dictionaries({'rlhf_type': st.just('grpo')}, optional=VALUES),
    env=ENV,
    gpus=st.one_of(st.none(), st.integers(1, 8)),
    rollout=st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=4).map(tuple)),
)
def test_check_never_crashes(cfg, env, gpus, rollout):
    launch = launch_from_mapping({**cfg, 'ENV': env}, [], environ={})
    try:
        report = check_launch(launch, Hardware(gpus=gpus, rollout_gpus=rollout), packages=PACKAGES_OK)
    except GuardError:
        return  # a clear one-line error is an acceptable outcome
    report.to_dict()
    assert all(f.severity in ('error', 'warning', 'info') and f.rule and f.message for f in report.findings)
