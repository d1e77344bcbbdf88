"""Build launches and checks in tests without touching files (pure paths) where possible."""

from grpo_recipes.check import check_launch
from grpo_recipes.frontends.swift.reader import launch_from_mapping
from grpo_recipes.hardware import Hardware

PACKAGES_OK = {'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': '0.9.0', 'msgspec': '0.22.0', 'deepspeed': '0.19.8'}

BASE = {
    'rlhf_type': 'grpo',
    'model': 'Qwen/Qwen2.5-7B-Instruct',
    'tuner_type': 'lora',
    'use_vllm': True,
    'vllm_mode': 'colocate',
    'vllm_max_model_len': 2048,
    'max_length': 512,
    'max_completion_length': 1024,
    'vllm_gpu_memory_utilization': 0.4,
    'per_device_train_batch_size': 8,
    'gradient_accumulation_steps': 1,
    'num_generations': 8,
    'reward_funcs': ['format'],
    'dataset': ['data.jsonl'],
}


def make(overrides=None, env=None, drop=(), hw=None, packages=None, data_stats=None, completion_mean=None):
    cfg = {k: v for k, v in {**BASE, **(overrides or {})}.items() if k not in drop and v is not None}
    cfg['ENV'] = {'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 1} if env is None else env
    launch = launch_from_mapping(cfg, [], environ={}, source='test.yaml')
    report = check_launch(
        launch,
        hw or Hardware(gpus=8, gpu_type='A100-80G', source='flags'),
        packages=PACKAGES_OK if packages is None else packages,
        data_stats=data_stats,
        completion_mean=completion_mean,
    )
    return launch, report


def rules_of(report, severity='error'):
    return {f.rule for f in report.findings if f.severity == severity}
