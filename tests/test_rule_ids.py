"""Every rule id the code can emit is exercised: each id the rules declare (``@rule(...)``, ``declare``) is either
asserted by another test or triggered here, through the public check API on a small launch."""

import pathlib

import pytest
from helpers import PACKAGES_OK, make

from grpo_recipes.check import check_launch
from grpo_recipes.findings import RULE_IDS
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware

A100_80 = Hardware(gpus=8, gpu_type='A100-80G', source='flags')
A100_40 = Hardware(gpus=8, gpu_type='A100-40G', source='flags')
SERVER = {
    'vllm_mode': 'server',
    'vllm_server_host': ['127.0.0.1'],
    'vllm_server_port': [8000],
    'vllm_max_model_len': None,
}
QWEN32 = 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B'


def swift(overrides=None, env=None, drop=(), hw=None, packages=None):
    return make(overrides, env=env, drop=drop, hw=hw, packages=packages)[1]


def rollout_server(*args, visible='0', hw=A100_80):
    """A `swift rollout` server checked on its own."""
    launch = read_launch(
        ['swift', 'rollout', '--model', 'Qwen/Qwen2.5-7B-Instruct', *args], environ={'CUDA_VISIBLE_DEVICES': visible}
    )
    return check_launch(launch, hw, packages=PACKAGES_OK)


def foreground_server():
    """A script that runs its `swift rollout` server without `&` before its trainer."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        script = pathlib.Path(d) / 'run.sh'
        script.write_text(
            '#!/bin/bash\nCUDA_VISIBLE_DEVICES=2 swift rollout --model Qwen/Qwen2.5-7B-Instruct\n'
            'CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=2 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct '
            '--use_vllm true --vllm_mode server --vllm_server_host 127.0.0.1 --reward_funcs accuracy\n'
        )
        return check_launch(read_launch([str(script)], environ={}), A100_80, packages=PACKAGES_OK)


def trl(*argv, hw=A100_40):
    return check_launch(read_launch(list(argv), environ={}), hw, packages=PACKAGES_OK)


# id -> a launch that makes it (a report), for every id no other test names
CASES = {
    'args.rlhf-type': lambda: swift({'rlhf_type': 'dpo'}),
    'batch.per-device': lambda: swift({'per_device_train_batch_size': 0}),
    'batch.accumulation': lambda: swift({'gradient_accumulation_steps': -1}),
    'batch.clipping-inert': lambda: swift({'epsilon': 0.2}),
    'batch.rollout-misaligned': lambda: swift({'gradient_accumulation_steps': 2, 'steps_per_generation': 3}),
    'device.bad-ids': lambda: swift(
        env={'CUDA_VISIBLE_DEVICES': 'gpu0', 'NPROC_PER_NODE': 1}, hw=Hardware(gpu_type='A100-80G')
    ),
    'device.duplicate-ids': lambda: swift(env={'CUDA_VISIBLE_DEVICES': '0,0', 'NPROC_PER_NODE': 2}),
    'device.missing': lambda: swift(env={'CUDA_VISIBLE_DEVICES': '9', 'NPROC_PER_NODE': 1}),
    'device.none-visible': lambda: swift(env={'CUDA_VISIBLE_DEVICES': '', 'NPROC_PER_NODE': 1}),
    'device.nproc-exceeds-visible': lambda: swift(env={'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 2}),
    'device.rollout-gpus-unknown': lambda: swift(SERVER),
    'device.rollout-gpus-unused': lambda: swift(
        hw=Hardware(gpus=8, gpu_type='A100-80G', source='flags', rollout_gpus=(1,))
    ),
    'launch.env-int': lambda: swift(env={'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 1, 'NNODES': 'two'}),
    'launch.nproc': lambda: swift(env={'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 0}),
    'length.completion': lambda: swift({'max_completion_length': 0}),
    'length.completion-exceeds-context': lambda: swift({'vllm_max_model_len': 1024}),
    'length.max-length-unset': lambda: swift(drop=('max_length',)),
    'length.max-model-len': lambda: swift({'max_model_len': 4096}, drop=('vllm_max_model_len',)),
    'memory.no-fix': lambda: swift({'model': QWEN32, 'tuner_type': 'full'}, hw=A100_40),
    'memory.oom-if-long-prompts': lambda: swift(
        {'use_vllm': False, 'per_device_train_batch_size': 16, 'num_generations': 16},
        drop=('max_length', 'vllm_mode', 'vllm_max_model_len'),
    ),
    'reward.plugin': lambda: swift({'reward_funcs': ['my_reward'], 'external_plugins': ['plugin.py']}),
    'reward.weights': lambda: swift({'reward_weights': [1.0, 2.0]}),
    'rollout.foreground': lambda: foreground_server(),
    'rollout.gpu-count': lambda: rollout_server('--vllm_tensor_parallel_size', '2'),
    'rollout.gpu-missing': lambda: rollout_server(visible='9'),
    'rollout.max-model-len': lambda: rollout_server('--vllm_max_model_len', '100000'),
    'rollout.tp-heads': lambda: rollout_server('--vllm_tensor_parallel_size', '3', visible='0,1,2'),
    'server.host': lambda: swift({**SERVER, 'vllm_server_host': ['not a host!']}),
    'server.url': lambda: swift(
        {**SERVER, 'vllm_server_host': None, 'vllm_server_port': None, 'vllm_server_base_url': ['ftp://10.0.0.1']}
    ),
    'trl.ds3-gather': lambda: trl(
        'accelerate',
        'launch',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        '--num_processes',
        '4',
        'train.py',
        '--model_name_or_path',
        QWEN32,
    ),
    'tuner.ref-model-loaded': lambda: swift({'tuner_type': 'full'}),
    'version.deepspeed': lambda: swift({'deepspeed': 'zero2'}, packages={**PACKAGES_OK, 'deepspeed': None}),
    'version.swift-3x': lambda: swift(packages={**PACKAGES_OK, 'ms-swift': '3.9.0'}),
    'version.swift-missing': lambda: swift(packages={**PACKAGES_OK, 'ms-swift': None}),
    # ms-swift before 4.6: nothing turns expandable segments off around its engine
    'vllm.expandable-segments': lambda: swift(
        {'sleep_level': 1},
        packages={**PACKAGES_OK, 'ms-swift': '4.5.0'},
        env={'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 1, 'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'},
    ),
    'vllm.kv-concurrency': lambda: swift(
        {
            'vllm_gpu_memory_utilization': 0.3,
            'per_device_train_batch_size': 64,
            'num_generations': 16,
            'max_completion_length': 2048,
            'vllm_max_model_len': 4096,
        }
    ),
    'vllm.no-kv-memory': lambda: swift({'vllm_gpu_memory_utilization': 0.1}),
    'vllm.off': lambda: swift({'use_vllm': False}, drop=('vllm_mode',)),
    'vllm.parallel-size': lambda: swift({'vllm_data_parallel_size': 0}),
    'vllm.weights-exceed-gpu': lambda: swift({'model': QWEN32, 'vllm_gpu_memory_utilization': 0.9}, hw=A100_40),
}


@pytest.mark.parametrize('rule_id', sorted(CASES))
def test_rule_id_is_emitted(rule_id):
    report = CASES[rule_id]()
    assert rule_id in {f.rule for f in report.findings}, [(f.rule, f.message) for f in report.findings]


def test_every_declared_rule_id_is_exercised():
    import grpo_recipes.check  # noqa: F401  (registers every rule)

    here = pathlib.Path(__file__)
    others = ''.join(p.read_text(encoding='utf-8') for p in here.parent.glob('test_*.py') if p != here)
    untested = sorted(i for i in RULE_IDS if i not in CASES and f"'{i}'" not in others and f'"{i}"' not in others)
    assert not untested, f'rule ids no test triggers: {untested}'
    assert set(CASES) <= set(RULE_IDS), sorted(set(CASES) - set(RULE_IDS))


def test_every_rule_declares_ids_and_says_what_fails():
    from grpo_recipes.rules import RULES

    for fn in RULES:
        assert fn.ids, fn.__name__
        assert fn.__doc__ and len(fn.__doc__.split()) >= 8, f'{fn.__module__}.{fn.__name__} has no docstring'


def test_the_reference_copy_is_named_for_the_launchs_framework():
    """A full TRL run with beta != 0 loads a reference copy too (trl/trainer/grpo_trainer.py): the finding names TRL,
    not ms-swift."""
    report = trl('trl', 'grpo', '--model_name_or_path', 'Qwen/Qwen2.5-0.5B-Instruct', '--beta', '0.04')
    (f,) = [f for f in report.findings if f.rule == 'tuner.ref-model-loaded']
    assert 'TRL loads a second copy' in f.message and 'ms-swift' not in f.message
    (g,) = [f for f in CASES['tuner.ref-model-loaded']().findings if f.rule == 'tuner.ref-model-loaded']
    assert 'ms-swift loads a second copy' in g.message
