"""An OOM that needs completions shorter than the model will produce is a refusal (memory.oom), not the
memory.oom-if-long-completions warning. A reasoning model (ms-swift's thinking templates: deepseek_r1, qwq,
qwen3_thinking and the hybrid qwen3, swift/template/templates/{deepseek,qwen}.py is_thinking=True) is planned with
completions that reach max_completion_length unless --completion-mean says otherwise, and the assumption is stated.

The shape is ms-swift's external/grpo_32b_full.sh (32B full, ZeRO-3 over 8 GPUs, no max_length, a rollout server),
with 4096-token completions: it fits with short prompts only while completions stay under about 2,300 tokens."""

import importlib.util
from pathlib import Path

from helpers import make

from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.verdicts import THINKING_TEMPLATES

OVER = {
    'model': 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B',
    'tuner_type': 'full',
    'deepspeed': 'zero3',
    'vllm_mode': 'server',
    'vllm_server_host': ['10.0.0.2'],
    'vllm_tensor_parallel_size': 2,
    'vllm_gpu_memory_utilization': 0.9,
    'vllm_max_model_len': None,
    'max_length': None,
    'max_completion_length': 4096,
    'per_device_train_batch_size': 1,
    'num_generations': 8,
    'beta': 0.0,
}
ENV = {'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7', 'NPROC_PER_NODE': 8}
HW = Hardware(gpus=8, gpu_type='A100-80G', rollout_gpus=(0, 1))


def _rules(report):
    return {f.rule: f for f in report.findings}


def test_the_thinking_templates_are_ms_swifts():
    root = Path(importlib.util.find_spec('swift').origin).parent / 'template' / 'templates'
    src = (root / 'qwen.py').read_text() + (root / 'deepseek.py').read_text()
    for name in THINKING_TEMPLATES:
        assert any(
            f'LLMTemplateType.{name},' in line or f'LLMTemplateType.{name})' in line
            for line in src.splitlines()
            if 'is_thinking=True' in line or 'Qwen3MixedTemplateMeta' in line
        ), name


def test_a_reasoning_model_is_refused_when_full_length_completions_oom():
    _, r = make(OVER, env=ENV, hw=HW)
    f = _rules(r).get('memory.oom')
    assert f is not None and not r.ok and 'memory.oom-if-long-completions' not in _rules(r)
    assert 'reasoning model' in f.message and 'deepseek_r1' in f.message
    assert 'fits only with completions under' in f.message
    assert any('completions reach max_completion_length' in a and '--completion-mean' in a for a in r.assumptions)


def test_a_stated_mean_decides_it():
    _, r = make(OVER, env=ENV, hw=HW, completion_mean=1024)  # the OOM needs completions far above the mean
    assert r.ok and 'memory.oom-if-long-completions' in _rules(r)
    assert any('--completion-mean' in a for a in r.assumptions)
    _, r = make(OVER, env=ENV, hw=HW, completion_mean=3500)  # it OOMs below the mean: refused
    assert not r.ok and '3,500-token mean' in _rules(r)['memory.oom'].message


def test_thinking_turned_off_or_a_plain_model_keeps_the_warning():
    _, r = make({**OVER, 'template': 'qwen2_5'}, env=ENV, hw=HW)
    assert r.ok and 'memory.oom-if-long-completions' in _rules(r)
    _, r = make(OVER, env=ENV, hw=HW, completion_mean=None, drop=())
    assert not r.ok
    _, r = make({**OVER, 'model': 'Qwen/Qwen3-32B', 'enable_thinking': False}, env=ENV, hw=HW)
    assert not any('reasoning model' in a for a in r.assumptions)
    _, r = make({**OVER, 'model': 'Qwen/Qwen3-32B'}, env=ENV, hw=HW)
    assert any('reasoning model' in a and 'qwen3' in a for a in r.assumptions)


def test_the_cli_takes_completion_mean_and_refuses_a_bad_one():
    from conftest import run_cli

    base = ['grpo_recipes.cli.guard', 'check', '--gpus', '1', '--gpu-type', 'A100-80G', '--json']
    launch = [
        '--',
        'swift',
        'rlhf',
        '--rlhf_type',
        'grpo',
        '--model',
        'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B',
        '--reward_funcs',
        'format',
        '--dataset',
        'AI-MO/NuminaMath-TIR',
        '--per_device_train_batch_size',
        '8',
    ]
    p = run_cli(*base, '--completion-mean', '300', *launch, timeout=120)
    import json

    assert any('--completion-mean' in a for a in json.loads(p.stdout)['assumptions']), p.stderr
    p = run_cli(*base, '--completion-mean', '-3', *launch, timeout=120)
    assert p.returncode != 0 and 'not a positive number of tokens' in p.stderr and 'Traceback' not in p.stderr
