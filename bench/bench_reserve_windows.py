#!/usr/bin/env python3
"""A real ms-swift run's allocator segments against the simulator's, step by step at the logits windows it made.

ms-swift keeps logits from the micro-batch's earliest first label on (``memory.trainer.logits_rows``), so the fp32
logits block changes size from step to step with the micro-batch's prompts. The caching allocator never merges two
segments, so the sizes it has seen, and their order, decide what it holds. This bench traces the GRPO step of a case
(``trace.trace_step``: the case's own model config, tuner, micro-batch, beta; fake CPU tensors) once per order of
windows given, replays it through the simulator (``memory.allocator``) and prints, beside the case's measurement
(``bench/bench_swift_gpu.py`` records torch's peaks and the segments held when the reserve last grew):

- the allocated and reserved peaks (the frozen reference copy of full training with beta > 0, loaded before
  training into segments of its own, added to both);
- the logits-sized segments (at least half the largest block), the sizes that tell the windows apart.

    python bench/bench_reserve_windows.py bench/results/gpu-h200-2026-11-27-grid.jsonl \\
        --id bench-swift-gpu-grid-qwen2.5-1.5b-full-bs32-c512 --windows 566,549 549,566

A window is the logits' positions per sequence (``logits_to_keep``; the model makes one more and drops it). Where
a case does not record its windows, they can be read off its logits-sized segments: a segment is the fp32 block
rounded up to 2 MiB, micro-batch x positions x vocabulary x 4 bytes. The trace does not run generation (HF
``generate`` when ``use_vllm`` is false) or ms-swift's no-grad pass for the old log-probabilities, so segments
those phases leave are not simulated.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GiB = 2**30


def simulate(case: dict, cfg, windows: list[int], prompt: int) -> dict:
    """The case's step (``cfg``: its GRPOConfig) traced at ``windows`` (one per step) and replayed under the case's
    allocator setting."""
    from grpo_recipes.allocconf import conf_of
    from grpo_recipes.memory.allocator import replay
    from grpo_recipes.memory.trace import categorise, trace_step

    counter, keys, _ = trace_step(
        cfg, case['model_config'], prompt, shapes=[(prompt, w) for w in windows], adamw='fused', unpadded=True
    )
    conf = conf_of((case.get('environ') or {}).get('PYTORCH_CUDA_ALLOC_CONF') or '')
    st = replay(counter.events, conf)
    # the frozen reference model of full training with beta > 0: its own weights, loaded before training
    ref = categorise(counter, keys)['parameters'] if not cfg.is_lora and cfg.beta else 0.0
    return {
        'allocated': st.peak_allocated / GiB + ref,
        'reserved': st.peak_reserved / GiB + ref,
        'segments': [s / GiB for s in st.segment_sizes],
        'need': need(counter.events, conf, st) / GiB + ref,
    }


def need(events, conf, unlimited) -> float:
    """The fewest bytes the allocator may obtain (to 64 MiB) for the step to run without an out-of-memory error: under
    that cap it frees its cached segments and retries (``release_cached_blocks``) where on a larger card it would
    have kept them. Between the allocated peak and the reserved peak of the uncapped replay (``unlimited``)."""
    from grpo_recipes.memory.allocator import OutOfMemory, replay

    step = 64 * 2**20
    lo, hi = unlimited.peak_allocated // step, -(-unlimited.peak_reserved // step)
    while lo < hi:  # the smallest cap, in 64 MiB units, that runs through
        mid = (lo + hi) // 2
        try:
            replay(events, conf, capacity=mid * step)
            hi = mid
        except OutOfMemory:
            lo = mid + 1
    return hi * step


def logits_sized(segments: list[float], block: float) -> list[float]:
    return [round(s, 3) for s in segments if s >= block / 2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('cases', help='a JSON-lines case file with torch_allocator segments (bench_swift_gpu.py)')
    ap.add_argument('--id', required=True, help='the case to simulate')
    ap.add_argument('--windows', nargs='+', required=True, help='one order of windows per argument: 566,549')
    ap.add_argument(
        '--prompt', type=int, help="the micro-batch's shortest prompt (default: the case's prompt_tokens min, else 128)"
    )
    args = ap.parse_args(argv)
    from grpo_recipes.memory.calibrate import _config
    from grpo_recipes.memory.cases import load_cases

    case = next((c for c in load_cases(args.cases) if c['id'] == args.id), None)
    if case is None:
        raise SystemExit(f'bench_reserve_windows: no case {args.id!r} in {args.cases}')
    out = case['outcome']
    prompt = args.prompt or (case.get('prompt_tokens') or {}).get('min') or 128
    cfg, _ = _config(case)
    per_position = cfg.per_device_train_batch_size * case['model_config']['vocab_size'] * 4
    measured = [s / GiB for s, _ in out.get('torch_allocator', {}).get('at_reserved_peak', {}).get('segments', [])]
    orders = [[int(w) for w in o.split(',')] for o in args.windows]
    block = per_position * max(max(o) for o in orders) / GiB
    print(f'# {case["id"]} on {case.get("gpu")}, prompt {prompt}; logits-sized segments >= {block / 2:.2f} GiB')
    print(f'{"source":<24} {"allocated":>9} {"reserved":>9} {"needed":>7}  logits-sized segments (GiB)')
    print(
        f'{"measured":<24} {out.get("torch_max_allocated_gib", float("nan")):>9.2f} '
        f'{out["torch_max_reserved_gib"]:>9.2f} {"-":>7}  {logits_sized(measured, block)}'
    )
    for order in orders:
        sim = simulate(case, cfg, order, prompt)
        name = 'simulated ' + ','.join(map(str, order))
        print(
            f'{name:<24} {sim["allocated"]:>9.2f} {sim["reserved"]:>9.2f} {sim["need"]:>7.2f}  '
            f'{logits_sized(sim["segments"], block)}',
            flush=True,
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
