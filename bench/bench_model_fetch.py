#!/usr/bin/env python3
"""Time of fetching config.json alone (model_fetch.py: a child process running huggingface_hub's hf_hub_download)
against a loopback stand-in for the Hugging Face hub (tests/test_model_fetch.py's), and of the offline answer
(prints figures; asserts nothing). The hub's own latency is not in these figures."""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / 'tests')]

from test_model_fetch import MODEL  # noqa: E402
from test_model_fetch import Hub as LoopbackHub  # noqa: E402

from grpo_recipes import model_fetch  # noqa: E402
from grpo_recipes.model_fetch import FetchError, Hub, fetch_config  # noqa: E402

REPEAT = 5
hub = LoopbackHub()
times = []
for i in range(REPEAT):
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, 'HF_ENDPOINT': hub.url, 'HF_HOME': home, 'HF_HUB_OFFLINE': '0'}
        model_fetch._FETCHED.clear()
        t = time.perf_counter()
        fetch_config(MODEL, Hub('hf'), env)
        times.append(time.perf_counter() - t)
print(
    f'fetch config.json (loopback hub)  median {statistics.median(times) * 1000:7.1f} ms  '
    f'max {max(times) * 1000:7.1f} ms  requests {len(hub.requests)} (all config.json: '
    f'{all(p.endswith("/config.json") for _, p, _ in hub.requests)})'
)
hub.close()
t = time.perf_counter()
try:
    fetch_config('acme/x', Hub('hf'), {**os.environ, 'HF_HUB_OFFLINE': '1'})
except FetchError:
    pass
print(f'HF_HUB_OFFLINE=1 answer            {(time.perf_counter() - t) * 1000:7.1f} ms')
