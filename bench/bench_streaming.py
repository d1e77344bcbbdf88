#!/usr/bin/env python3
"""Peak memory and speed of `grpo-data filter --streaming` on datasets read by ms-swift's loader (prints figures;
asserts nothing).

Two JSON-lines files of N/2 GSM8K rows each (../shared/data/gsm8k/train.jsonl repeated) are passed as two
datasets, which sends them through swift.dataset.load_dataset(streaming=True) and then the length filter.
Peak RSS is GNU time's %M of the whole command, at two sizes: flat means it does not grow with N.

    python bench/bench_streaming.py                 # 100k and 1M rows
    python bench/bench_streaming.py --rows 20000 200000
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GSM8K = ROOT.parent / 'shared' / 'data' / 'gsm8k' / 'train.jsonl'


def build(path: Path, rows: int) -> None:
    lines = GSM8K.read_bytes().splitlines(keepends=True)
    with open(path, 'wb') as f:
        for i in range(rows):
            f.write(lines[i % len(lines)])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--rows', type=int, nargs='+', default=[100_000, 1_000_000])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            a, b = Path(tmp) / 'a.jsonl', Path(tmp) / 'b.jsonl'
            build(a, n // 2)
            build(b, n - n // 2)
            t0 = time.time()
            proc = subprocess.run(
                [
                    '/usr/bin/time',
                    '-f',
                    'PEAK_RSS_KB %M',
                    sys.executable,
                    '-m',
                    'data_tools.cli',
                    'filter',
                    str(a),
                    str(b),
                    '--streaming',
                    '-o',
                    str(Path(tmp) / 'kept.jsonl'),
                    '--max-length',
                    '256',
                    '--mode',
                    'full',
                    '--quiet',
                    '--json',
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={'HF_HUB_OFFLINE': '1', 'PATH': '/usr/bin:/bin'},
            )
            wall = time.time() - t0
            if proc.returncode:
                print(proc.stderr[-2000:])
                return 1
            peak = next(int(ln.split()[1]) for ln in proc.stderr.splitlines() if ln.startswith('PEAK_RSS_KB'))
            print(
                f'{n:>9,} rows  streaming filter {wall:7.1f} s  {n / wall:8,.0f} rows/s  '
                f'peak RSS {peak / 1024:6.0f} MB',
                flush=True,
            )
    return 0


if __name__ == '__main__':
    sys.exit(main())
