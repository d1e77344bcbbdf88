#!/usr/bin/env python3
"""The fast path's reserved and device figures (memory.estimate with reserve.py) against every row of a harness grid
(the shared H100 grid: bench/bench_gpu_memory.py on one H100 80GB, torch's reserved peak and NVML's device-used).
Each row is scored as a calibration case (beta 0, num_generations = micro-batch, the prompt at its stated length, the
row's PYTORCH_CUDA_ALLOC_CONF). Prints one line per row and the rows outside -3% / +12% of NVML; asserts nothing.

    python bench/bench_reserve_grid.py [--grid GRID.jsonl]          # a few seconds, no GPU
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / 'shared' / 'calibration' / 'gpu-h100-2026-11-24'


def model_config(name: str, grid_dir: Path) -> dict:
    own = ROOT / 'grpo_recipes' / 'model_configs' / f'{name}.json'
    if own.is_file():
        return json.loads(own.read_text())
    for line in (grid_dir / 'swift_runs.jsonl').read_text().splitlines():  # the 1.5B config.json, as the runs give it
        case = json.loads(line)
        if name in case.get('model', ''):
            return case['model_config']
    raise SystemExit(f'bench_reserve_grid: no config.json for {name}')


def grid_case(row: dict, config: dict, idle_gib: float) -> dict:
    """A grid row as a calibration case; ``idle_gib``: what the device held before the grid's first shape."""
    tuner, gc, bs, prompt, comp = row['shape'].split(':')
    cfg = {
        'rlhf_type': 'grpo',
        'torch_dtype': 'bfloat16',
        'use_vllm': False,
        'gradient_checkpointing': gc == '1',
        'max_length': int(prompt),
        'beta': 0.0,
        'tuner_type': tuner,
        'per_device_train_batch_size': int(bs),
        'num_generations': int(bs),
        'max_completion_length': int(comp),
        'model': 'm',
        'dataset': 'd.jsonl',
        'reward_funcs': 'format',
        'env': 'torch 2.11.0, transformers 5.19.0',
    }
    if tuner == 'lora':
        cfg.update(lora_rank=16, lora_alpha=32, target_modules='all-linear')
    return {
        'id': f'{row["model_config"]} {row["shape"]} {row["PYTORCH_CUDA_ALLOC_CONF"] or "default"}',
        'kind': 'grpo_train',
        'framework': 'ms-swift',
        'framework_version': '4.6.0',
        'step': 'harness',  # bench_gpu_memory.py's step: no trainer's no-grad passes (calibrate plans it so)
        'model_config': config,
        'gpu': row['device'],
        'num_gpus': 1,
        'gpu_total_gib': 79.19,
        'environ': {'PYTORCH_CUDA_ALLOC_CONF': row['PYTORCH_CUDA_ALLOC_CONF']},
        'config': cfg,
        'outcome': {
            'ran_ok': True,
            'peak_gib_per_gpu': row['reserved_peak_gib'],
            'measure': 'torch.cuda.max_memory_reserved',
            'nvidia_smi_used_mib': row['device_used_gib'] * 1024,
            # the grid read NVML's v1 used, which counts the driver's reserved memory: what the device held at idle,
            # before the grid's first shape (the least 'before' figure of its rows)
            'driver_reserved_mib': idle_gib * 1024,
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--grid', default=str(SHARED / 'harness_grid.jsonl'))
    args = ap.parse_args()
    from grpo_recipes.memory.scoring import score

    grid = Path(args.grid)
    rows = [json.loads(x) for x in grid.read_text().splitlines() if x.strip()]
    idle = min(r['device_used_before_gib'] for r in rows)  # the device at idle, before the first shape
    cases = [grid_case(r, model_config(r['model_config'], grid.parent), idle) for r in rows]
    result = score(cases)
    print(f'{"row":<58} {"reserved pred/meas":>19} {"device pred/meas":>17} {"error":>7}')
    out = []
    for r in result['per_case']:
        err = r['device']['signed_error']
        print(
            f'{r["id"]:<58} {r["peak"]["predicted"]:>8.2f}/{r["peak"]["observed"]:<8.2f} '
            f'{r["device"]["predicted"]:>7.2f}/{r["device"]["observed"]:<7.2f} {err:>+7.1%}'
        )
        if not -0.03 <= err <= 0.12:
            out.append((r['id'], err))
    print(f'# {len(result["per_case"])} rows; outside -3%/+12% of NVML: {len(out)}')
    for rid, err in out:
        print(f'#   {rid}: {err:+.1%}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
