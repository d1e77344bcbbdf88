"""A colocated vLLM engine's max_num_seqs is per_device_train_batch_size x TP x steps_per_generation (ms-swift
rollout_mixin), with the steps_per_generation ms-swift derives from generation_batch_size (args_mixin
_init_generation_batch_params): memory.vllm.vllm_terms takes it from the Plan, so the two spellings of one rollout
size give one vLLM profiling peak."""

import json
from pathlib import Path

import pytest

from grpo_recipes.config import GRPOConfig
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.inputs import Inputs
from grpo_recipes.memory.vllm import vllm_terms
from grpo_recipes.plan import build_plan

ROOT = Path(__file__).resolve().parents[1]
ARCH = Arch.from_config(json.loads((ROOT / 'grpo_recipes/model_configs/Qwen2.5-7B-Instruct.json').read_text()))
ENV = {'NPROC_PER_NODE': '2', 'CUDA_VISIBLE_DEVICES': '0,1'}


def _terms(*extra):
    argv = [
        '--rlhf_type',
        'grpo',
        '--use_vllm',
        'true',
        '--vllm_mode',
        'colocate',
        '--num_generations',
        '4',
        '--per_device_train_batch_size',
        '4',
        '--gradient_accumulation_steps',
        '1',
        *extra,
    ]
    cfg, _ = GRPOConfig.from_argv(argv)
    plan = build_plan(cfg, ENV, Hardware(gpus=2))
    return vllm_terms(cfg, Inputs(arch=ARCH, capacity_gib=79.15, gpu_name='A100-80G'), plan), plan


def test_generation_batch_size_and_steps_per_generation_size_vllm_alike():
    by_gbs, plan = _terms('--generation_batch_size', '2048')  # 2048 / (4 x 2) = 256 steps per generation
    assert plan.steps_per_generation == 256
    by_spg, _ = _terms('--steps_per_generation', '256')
    one_step, _ = _terms()  # gradient_accumulation_steps 1: one step per generation, 4 x 1 sequences per engine
    assert by_gbs['activation'] == by_spg['activation']
    assert by_gbs['activation'] != one_step['activation']


def test_colocate_needs_the_plan():
    cfg, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo', '--use_vllm', 'true', '--vllm_mode', 'colocate'])
    with pytest.raises(ValueError, match='Plan'):
        vllm_terms(cfg, Inputs(arch=ARCH, capacity_gib=79.15, gpu_name='A100-80G'))
