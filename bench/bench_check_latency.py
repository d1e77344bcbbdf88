#!/usr/bin/env python3
"""`grpo-guard check` wall time on torchrun / torch.distributed.launch / deepspeed / accelerate launches (and an
ms-swift YAML for reference), each in a cold process, for this tree and for the code at another git revision
(default ``main``; pass the commit before the launcher snapshot to see before/after). Prints figures; asserts
nothing.

    python bench/bench_check_latency.py [--before REV] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWIFT = ' --model Qwen/Qwen2.5-0.5B-Instruct --dataset AI-MO/NuminaMath-TIR#100 --reward_funcs accuracy'
LAUNCHES = {
    'torchrun': 'torchrun --nproc_per_node 2 -m swift.cli.rlhf --rlhf_type grpo' + SWIFT,
    'torch.distributed.launch': 'python -m torch.distributed.launch --nproc_per_node 2 --use-env '
    'swift/cli/rlhf.py --rlhf_type grpo' + SWIFT,
    'deepspeed': 'deepspeed --num_gpus 2 swift/cli/rlhf.py --rlhf_type grpo' + SWIFT,
    'accelerate launch': 'accelerate launch --num_processes 2 train_grpo.py --num_generations 4',
}
YAML = (
    'rlhf_type: grpo\nmodel: Qwen/Qwen2.5-0.5B-Instruct\ndataset: AI-MO/NuminaMath-TIR#100\nreward_funcs: [accuracy]\n'
)
PROBE = (
    'import sys\nfrom grpo_recipes.cli.guard import main\n'
    'sys.exit(main(["check", sys.argv[1], "--gpus", "2", "--gpu-type", "A100-80GB"]))\n'
)


def checkout(rev: str, into: Path) -> Path:
    data = subprocess.run(['git', 'archive', rev], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter='data')
    return into


def seconds(tree: Path, path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, '-c', PROBE, str(path)],
            cwd=path.parent,
            env={'PYTHONPATH': str(tree), 'PATH': '/usr/bin:/bin', 'HF_HUB_OFFLINE': '1', 'HOME': str(Path.home())},
            capture_output=True,
            text=True,
        )
        times.append(time.perf_counter() - t)
        if proc.returncode not in (0, 1):
            raise SystemExit(f'{path.name} under {tree}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}')
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--before', default='main', help='git revision to compare with (default: main)')
    ap.add_argument('--repeat', type=int, default=3)
    opts = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        before = checkout(opts.before, tmp / 'before')
        launches = tmp / 'launches'
        launches.mkdir()
        files = {'ms-swift YAML': launches / 'grpo.yaml'}
        files['ms-swift YAML'].write_text(YAML)
        for i, (name, line) in enumerate(LAUNCHES.items()):
            files[name] = launches / f'launch{i}.sh'
            files[name].write_text(line + '\n')
        print(f'grpo-guard check, median of {opts.repeat} cold processes (seconds); before = {opts.before}')
        print(f'{"launch":<26}{"before":>8}{"after":>8}')
        for name, path in files.items():
            print(f'{name:<26}{seconds(before, path, opts.repeat):>8.2f}{seconds(ROOT, path, opts.repeat):>8.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
