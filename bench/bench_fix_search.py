#!/usr/bin/env python3
"""Timings of the memory check with its fix search (memory/search.py), in-process, on the shapes issue 28 names
(prints figures; asserts nothing):

1. 7B LoRA on 2 x A100-80G, micro-batch 16 x accumulation 4, 2,048-token completions, max_length unset (prompts up
   to the model context): the search must find a fix (vLLM queues part of the rollout there).
2. The same with --data-stats (300-token prompts).
3. per_device_train_batch_size 10**9 (the splits come from the factorisation).
4. Qwen2.5-32B full on 8 x H20, ZeRO-3, HF generation (the generation gather; fix ds3_gather_for_generation false).
"""

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / 'tests')]

from helpers import make  # noqa: E402

from grpo_recipes.hardware import Hardware  # noqa: E402

REPEAT = 5
TWO = {'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}
UNBOUNDED = {
    'per_device_train_batch_size': 16,
    'gradient_accumulation_steps': 4,
    'max_completion_length': 2048,
    'max_length': None,
    'vllm_max_model_len': None,
    'num_generations': 8,
}
GEN32 = {
    'model': 'Qwen/Qwen2.5-32B',
    'tuner_type': 'full',
    'deepspeed': 'zero3',
    'use_vllm': False,
    'vllm_mode': None,
    'vllm_max_model_len': None,
    'vllm_gpu_memory_utilization': None,
    'per_device_train_batch_size': 4,
    'gradient_accumulation_steps': 2,
    'num_generations': 8,
    'max_length': 1024,
    'max_completion_length': 1024,
    'beta': 0.0,
}
CASES = [
    ('7B LoRA, prompts unbounded', lambda: make(UNBOUNDED, env=TWO, hw=Hardware(gpus=2, gpu_type='A100-80G'))),
    (
        '7B LoRA, --data-stats',
        lambda: make(
            UNBOUNDED,
            env=TWO,
            hw=Hardware(gpus=2, gpu_type='A100-80G'),
            data_stats={'max': 300, 'percentiles': {}, 'histogram': []},
        ),
    ),
    ('micro-batch 10**9', lambda: make({'per_device_train_batch_size': 10**9})),
    (
        '32B full ZeRO-3, HF generation',
        lambda: make(
            GEN32,
            env={'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7', 'NPROC_PER_NODE': 8},
            hw=Hardware(gpus=8, gpu_type='H20'),
        ),
    ),
]

for name, run in CASES:
    times, report = [], None
    for _ in range(REPEAT):
        t = time.perf_counter()
        _, report = run()
        times.append(time.perf_counter() - t)
    fix = report.fixes[0] if report.fixes else None
    what = (
        ', '.join(f'{k} {o}->{n}' for k, (o, n) in fix.changes.items()) + f' ({fix.peak_fraction:.0%})'
        if fix
        else 'no fix'
    )
    print(f'{name:34s} median {statistics.median(times) * 1000:7.1f} ms  max {max(times) * 1000:7.1f} ms  {what}')
