#!/usr/bin/env python3
"""`grpo-data filter` on over-long rows: the byte bound against tokenizing every row (prints figures; asserts nothing).

A file of a few short rows and one very long line (default 10 MB, as tests/test_data_tools.py's huge-line case) is
filtered to --max-length 64 with the bundled Qwen2.5 tokenizer, in this process, twice: with the bound (a row whose
lower bound from its bytes exceeds the limit is rejected untokenized: ChatTokenizer.lower_bound) and with every row
tokenized (run_filter(bound=False)). Both keep the same rows; the figures are the seconds each takes.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--mb', type=float, default=10.0, help='size of the long line in MB')
    opts = ap.parse_args()
    from data_tools.pipeline import run_filter
    from data_tools.tokenize import ChatTokenizer

    tok = ChatTokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = tmp / 'rows.jsonl'
        long_row = json.dumps({'question': 'y ' * int(opts.mb * 500_000)})
        src.write_text('{"question": "first"}\n' + long_row + '\n{"question": "last"}\n')
        times = {}
        for bound in (True, False):
            t = time.perf_counter()
            s = run_filter(src, tmp / f'out{bound}.jsonl', tok, max_length=64, bound=bound)
            times[bound] = time.perf_counter() - t
            print(
                f'bound={bound!s:5}  {times[bound]:6.2f} s   kept {s.kept}, rejected {s.rejected} '
                f'({s.rejected_unmeasured} on the bound alone)'
            )
        same = (tmp / 'outTrue.jsonl').read_bytes() == (tmp / 'outFalse.jsonl').read_bytes()
    print(
        f'machine: {os.cpu_count()} CPU(s), python {sys.version.split()[0]}; one {opts.mb:g} MB line; '
        f'max_token_bytes {tok.max_token_bytes}; same kept rows: {same}; speed-up {times[False] / times[True]:.1f}x'
    )


if __name__ == '__main__':
    main()
