#!/usr/bin/env python3
"""Throughput and memory of `grpo-data filter` (prints figures; asserts nothing).

Builds N rows (default 200k) by repeating ../shared/data/gsm8k/train.jsonl and measures, with the real
Qwen2.5 tokenizer (../shared/data/qwen2.5-tokenizer, else the bundled copy):

  filter     end-to-end `run_filter` (read, parse, map, render, encode, write kept + rejects)
  raw limit  chat template rendering + Rust encode_batch over the same rows, already parsed, in this process
  naive      transformers' apply_chat_template(tokenize=True), one row at a time (on a subset)
  peak RSS   of `grpo-data filter` in a child process at 200k and 1M rows (targets: <= 500 MB, flat)

Targets: filter >= 0.8x raw limit, >= 2.5x naive.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / 'shared' / 'data'
GSM8K = SHARED / 'gsm8k' / 'train.jsonl'
TOKENIZER = (
    SHARED / 'qwen2.5-tokenizer' if (SHARED / 'qwen2.5-tokenizer').is_dir() else ROOT / 'data_tools' / 'tokenizer'
)


def build(path: Path, rows: int) -> None:
    lines = GSM8K.read_bytes().splitlines(keepends=True)
    with open(path, 'wb') as f:
        for i in range(rows):
            f.write(lines[i % len(lines)])


def child_peak_rss_mb(cmd) -> float:
    """Peak RSS of the command itself (GNU time's %M; ru_maxrss of a fork would count this process)."""
    proc = subprocess.run(['/usr/bin/time', '-f', 'PEAK_RSS_KB %M', *cmd], check=True, capture_output=True, text=True)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith('PEAK_RSS_KB')][-1]
    return int(line.split()[1]) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rows', type=int, default=200_000)
    ap.add_argument('--rss-rows', type=int, default=1_000_000)
    ap.add_argument('--naive-rows', type=int, default=5_000)
    opts = ap.parse_args()
    from data_tools.pipeline import run_filter
    from data_tools.tokenize import ChatTokenizer

    tok = ChatTokenizer(TOKENIZER)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / 'rows.jsonl'
        build(src, opts.rows)

        t = time.perf_counter()
        s = run_filter(src, tmp / 'kept.jsonl', tok, max_length=160)
        filt = time.perf_counter() - t
        tokens = s.tokens_measured

        rows = [json.loads(line) for line in src.read_text().splitlines()]
        t = time.perf_counter()
        n_tok = 0
        for i in range(0, len(rows), 2048):
            texts = [tok.render([{'role': 'user', 'content': r['question']}], True) for r in rows[i : i + 2048]]
            n_tok += sum(len(e.ids) for e in tok.backend.encode_batch(texts, add_special_tokens=False))
        raw = time.perf_counter() - t
        assert n_tok == tokens, (n_tok, tokens)

        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(TOKENIZER))
        subset = rows[: opts.naive_rows]
        t = time.perf_counter()
        for r in subset:
            hf.apply_chat_template(
                [{'role': 'user', 'content': r['question']}], add_generation_prompt=True, tokenize=True
            )
        naive = (time.perf_counter() - t) * len(rows) / len(subset)
        del rows, subset

        rss = {}
        for n in sorted({opts.rows, opts.rss_rows}):
            big = tmp / f'rss{n}.jsonl'
            build(big, n)
            rss[n] = child_peak_rss_mb(
                [
                    sys.executable,
                    '-m',
                    'data_tools.cli',
                    'filter',
                    str(big),
                    '-o',
                    str(tmp / f'k{n}.jsonl'),
                    '--max-length',
                    '160',
                    '--quiet',
                    '--tokenizer',
                    str(TOKENIZER),
                ]
            )
            big.unlink()

    n = opts.rows
    print(
        f'machine: {os.cpu_count()} CPU(s), python {sys.version.split()[0]}; {n:,} GSM8K rows, '
        f'{tokens:,} prompt tokens; tokenizer {TOKENIZER}'
    )
    print(f'filter (end to end)      {n / filt:10,.0f} rows/s {tokens / filt:12,.0f} tokens/s')
    print(
        f'raw limit (render+encode){n / raw:10,.0f} rows/s {tokens / raw:12,.0f} tokens/s   '
        f'filter/raw = {raw / filt:.2f}x (target >= 0.8)'
    )
    print(
        f'naive per-row HF loop    {n / naive:10,.0f} rows/s {tokens / naive:12,.0f} tokens/s   '
        f'filter/naive = {naive / filt:.2f}x (target >= 2.5)'
    )
    for k, v in rss.items():
        print(f'peak RSS, filter CLI, {k:>9,} rows: {v:6.0f} MB (target <= 500, flat in rows)')


if __name__ == '__main__':
    main()
