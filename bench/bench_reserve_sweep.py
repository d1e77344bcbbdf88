#!/usr/bin/env python3
"""The fast path's reserve (``reserve.reserve_bytes``) against the allocator simulator's, over ms-swift 4.6 GRPO
steps that are no measured run's: each shape's step traced as ms-swift runs it (the old policy's no-grad log-prob
pass, the reference's at beta 0.04, weights loaded with a device_map: ``trace.step_as_run``), two steps at one logits
window (the completion), replayed through ``allocator.py`` under torch's default allocator. The simulator has no free
constant; the closed form is held to it here, as ``bench/bench_allocator.py`` held the first one to the beta-0 step.
Prints, per shape, the simulated reserve (reserved peak less allocated peak) and the closed form's; asserts nothing.

    python bench/bench_reserve_sweep.py [--only 0.5b ...] [--json]       # minutes on CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'bench'))
GiB = 2**30

# (model id in the catalogue, tuner, micro-batch, completion), chosen before any was run; prompts of 128 tokens
SHAPES = (
    ('Qwen/Qwen2.5-0.5B-Instruct', 'full', 8, 2048),
    ('Qwen/Qwen2.5-0.5B-Instruct', 'full', 16, 512),
    ('Qwen/Qwen2.5-0.5B-Instruct', 'full', 32, 1024),
    ('Qwen/Qwen2.5-1.5B-Instruct', 'full', 8, 1024),
    ('Qwen/Qwen2.5-1.5B-Instruct', 'full', 16, 512),
    ('Qwen/Qwen2.5-1.5B-Instruct', 'full', 16, 2048),
    ('Qwen/Qwen2.5-1.5B-Instruct', 'full', 32, 256),
    ('Qwen/Qwen3-1.7B', 'full', 8, 512),
    ('Qwen/Qwen3-1.7B', 'full', 16, 1024),
    ('Qwen/Qwen3-1.7B', 'full', 32, 512),
    ('Qwen/Qwen2.5-3B-Instruct', 'full', 8, 512),
    ('Qwen/Qwen2.5-3B-Instruct', 'full', 16, 512),
    ('Qwen/Qwen2.5-3B-Instruct', 'lora', 16, 1024),
    ('Qwen/Qwen2.5-3B-Instruct', 'lora', 32, 512),
    ('Qwen/Qwen2.5-7B-Instruct', 'lora', 8, 1024),
)
PROMPT = 128


def case_of(model: str, tuner: str, mb: int, completion: int) -> dict:
    from grpo_recipes.models import load_model_config

    config = {
        'rlhf_type': 'grpo',
        'torch_dtype': 'bfloat16',
        'use_vllm': False,
        'gradient_checkpointing': True,
        'max_length': PROMPT,
        'beta': 0.04,
        'tuner_type': tuner,
        'per_device_train_batch_size': mb,
        'num_generations': 8,
        'max_completion_length': completion,
        'model': model,
        'dataset': 'd.jsonl',
        'reward_funcs': 'accuracy',
        'env': 'torch 2.11.0, transformers 5.19.0',
    }
    if tuner == 'lora':
        config.update(lora_rank=16, lora_alpha=32, target_modules='all-linear')
    return {
        'id': f'{model.split("/")[-1]} {tuner} {mb} x {completion}',
        'kind': 'grpo_train',
        'framework': 'ms-swift',
        'framework_version': '4.6.0',
        'model_config': dict(load_model_config(model)),
        'gpu': 'NVIDIA H100 80GB HBM3',
        'num_gpus': 1,
        'gpu_total_gib': 1000.0,
        'config': config,
        'prompt_tokens': {'min': PROMPT, 'max': PROMPT},
        'outcome': {},
    }


def closed_form(case: dict) -> dict:
    """The fast path's figures for the case (``calibrate.predict``): allocated, reserved, and the reserve's parts."""
    from grpo_recipes.memory import reserve
    from grpo_recipes.memory.calibrate import predict

    seen = []
    orig = reserve.segments_left_free

    def spy(cfg, block, parts):
        v = orig(cfg, block, parts)
        seen.append((block, dict(parts), v))
        return v

    reserve.segments_left_free = spy
    try:
        q = predict(case)['quantities']
    finally:
        reserve.segments_left_free = orig
    block, parts, free = seen[-1]
    return {
        'allocated': q['allocated_gib'],
        'reserve': q['reserved_gib'] - q['allocated_gib'],
        'block': block / GiB,
        'parts': {k: v if k == 'no_grad_pass' else round(v / GiB, 3) for k, v in parts.items()},  # bytes -> GiB
        'free': free / GiB,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--only', nargs='*', help='shapes whose id contains one of these')
    ap.add_argument('--json', action='store_true')
    args = ap.parse_args(argv)
    from bench_reserve_windows import simulate

    from grpo_recipes.memory.calibrate import _config

    rows = []
    print(f'{"shape":<34} {"sim alloc":>9} {"sim reserve":>11} {"closed":>7} {"block":>6}  parts (GiB)', flush=True)
    for model, tuner, mb, comp in SHAPES:
        case = case_of(model, tuner, mb, comp)
        if args.only and not any(o.lower() in case['id'].lower() for o in args.only):
            continue
        t0 = time.time()
        cfg, _ = _config(case)
        sim = simulate(case, cfg, [(PROMPT, comp)] * 2)
        cf = closed_form(case)
        row = {
            'shape': case['id'],
            'sim_allocated': round(sim['allocated'], 2),
            'sim_reserve': round(sim['reserved'] - sim['allocated'], 2),
            'closed_allocated': round(cf['allocated'], 2),
            'closed_reserve': round(cf['reserve'], 2),
            'block': round(cf['block'], 2),
            'parts': cf['parts'],
            'seconds': round(time.time() - t0, 1),
        }
        rows.append(row)
        print(
            f'{row["shape"]:<34} {row["sim_allocated"]:>9.2f} {row["sim_reserve"]:>11.2f} '
            f'{row["closed_reserve"]:>7.2f} {row["block"]:>6.2f}  {row["parts"]}  {row["seconds"]} s',
            flush=True,
        )
    if rows:
        errs = [r['closed_reserve'] - r['sim_reserve'] for r in rows]
        print(
            f'# {len(rows)} shapes: closed form - simulated reserve: mean |error| '
            f'{sum(map(abs, errs)) / len(errs):.2f} GiB, from {min(errs):+.2f} to {max(errs):+.2f} GiB'
        )
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
