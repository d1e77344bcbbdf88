#!/usr/bin/env python3
"""Timings for the guard, each in a cold process (prints figures; asserts nothing).

1. ms-swift's own parse of the example config: ``swift.utils.parse_args(RLHFArguments, argv)``
   in a fresh Python, the way `swift rlhf` runs it (import + parse).
2. ``grpo-guard validate`` on the same config (target: at most (1) + 2 s).
3. ``grpo-guard check`` on the same config: the fast path that imports neither torch nor
   ms-swift (target: under 1 s wall).
4. ``grpo-guard check`` on the reported OOM case (Qwen2.5-7B full, 4x A100-80G, ZeRO-3, bs 8 x GA 8,
   vLLM colocate 0.6), which adds the fix search.
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / 'recipes' / 'examples' / 'qwen2.5-7b-lora-colocate.yaml'
REPEAT = 3
REPORTED = """ENV: {CUDA_VISIBLE_DEVICES: "0,1,2,3", NPROC_PER_NODE: 4}
rlhf_type: grpo
model: Qwen/Qwen2.5-7B-Instruct
tuner_type: full
deepspeed: zero3
per_device_train_batch_size: 8
gradient_accumulation_steps: 8
num_generations: 8
use_vllm: true
vllm_mode: colocate
vllm_gpu_memory_utilization: 0.6
vllm_max_model_len: 2048
max_length: 512
max_completion_length: 1536
reward_funcs: [accuracy]
dataset: data.jsonl
"""

SWIFT_PARSE = r"""
import sys, tempfile
from grpo_recipes.frontends import read_launch as load_launch
from grpo_recipes.models import config_only_dir
from pathlib import Path
tmp = tempfile.mkdtemp()
launch = load_launch([sys.argv[1]])
argv = launch.argv + ['--model', str(config_only_dir('Qwen/Qwen2.5-7B-Instruct', Path(tmp))),
                      '--output_dir', tmp + '/out', '--use_cpu', 'true']
from swift.arguments import RLHFArguments
from swift.utils import parse_args
parse_args(RLHFArguments, argv)
"""


def wall(cmd, **kw):
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        sys.exit(f'{cmd}: exit {proc.returncode}\n{proc.stderr[-2000:]}')
    return dt


def main():
    env_note = f'{sys.platform}, python {sys.version.split()[0]}'
    with tempfile.TemporaryDirectory() as tmp:
        swift = [wall([sys.executable, '-c', SWIFT_PARSE, str(CONFIG)], cwd=tmp) for _ in range(REPEAT)]
    validate = [wall([sys.executable, '-m', 'grpo_recipes.cli.guard', 'validate', str(CONFIG)]) for _ in range(REPEAT)]
    check = [wall([sys.executable, '-m', 'grpo_recipes.cli.guard', 'check', str(CONFIG)]) for _ in range(REPEAT)]
    with tempfile.TemporaryDirectory() as tmp:
        oom = Path(tmp) / 'reported.yaml'
        oom.write_text(REPORTED)
        fix = [
            wall(
                [
                    sys.executable,
                    '-m',
                    'grpo_recipes.cli.guard',
                    'check',
                    str(oom),
                    '--gpus',
                    '4',
                    '--gpu-type',
                    'A100-80G',
                ]
            )
            for _ in range(REPEAT)
        ]
    med = statistics.median
    print(f'machine: {env_note}; median of {REPEAT} cold runs each')
    print(f'ms-swift parse_args (import + parse)   {med(swift):6.2f} s')
    print(
        f'grpo-guard validate                    {med(validate):6.2f} s   '
        f'overhead {med(validate) - med(swift):+.2f} s (target <= +2.00 s)'
    )
    print(f'grpo-guard check (fast path)           {med(check):6.2f} s   (target < 1.00 s)')
    print(f'grpo-guard check, OOM case + fix search {med(fix):5.2f} s   (target < 1.00 s)')


if __name__ == '__main__':
    main()
