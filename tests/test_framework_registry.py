"""The front ends' frameworks (grpo_recipes/framework.py): one registered per framework, every hook names a function
that exists, and the memory model gives a value the report takes (plan_memory leaves the report as it was)."""

import copy
from dataclasses import fields

from helpers import make

from grpo_recipes.framework import framework_of, resolve
from grpo_recipes.frontends import FRAMEWORKS, read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.verdicts import MemoryVerdict, plan_memory

HOOKS = (
    'read_config',
    'post_read',
    'reword',
    'render_fixes',
    'fixed_launch',
    'fix_text',
    'server_command',
    'unknown_arguments',
    'validator',
    'registry_check',
    'fix_arguments',
)


def test_every_framework_is_registered_under_its_name_and_its_hooks_resolve():
    assert set(FRAMEWORKS) == {'swift', 'trl', 'megatron'}
    for name, fw in FRAMEWORKS.items():
        assert framework_of(name) is fw and fw.name == name
        assert {f.name for f in fields(fw)} >= set(HOOKS)
        for hook in HOOKS:
            target = getattr(fw, hook)
            assert target is None or callable(resolve(target)), (name, hook)


def test_a_launch_and_its_rollout_server_carry_their_frameworks_facts():
    trl = read_launch(
        ['--', 'accelerate', 'launch', 'train.py', '--use_vllm'],
        rollout='CUDA_VISIBLE_DEVICES=1 trl vllm-serve --model Qwen/Qwen2.5-0.5B',
    )
    assert trl.fw is FRAMEWORKS['trl'] and trl.rollout.fw.server == 'trl vllm-serve'
    assert trl.rollout.flag('tensor_parallel_size') == '--tensor_parallel_size'
    swift = read_launch(['--', 'swift', 'rlhf', '--rlhf_type', 'grpo', '--model', 'Qwen/Qwen2.5-7B-Instruct'])
    assert swift.fw.prompt_limit and not trl.fw.prompt_limit


def test_plan_memory_returns_a_value_and_leaves_the_report_alone():
    _, report = make({'per_device_train_batch_size': 64}, hw=Hardware(gpus=1, gpu_type='A100-40G'))
    from grpo_recipes.models import load_model_config

    before = copy.deepcopy((report.findings, report.assumptions, report.memory, report.fixes))
    verdict = plan_memory(report, load_model_config(report.cfg.model))
    assert isinstance(verdict, MemoryVerdict) and verdict.memory
    assert (report.findings, report.assumptions, report.memory, report.fixes) == before
