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

A window is the logits' positions per sequence (``logits_to_keep``; the model makes one more and drops it). Without
``--windows`` the case's recorded windows are used (``outcome.logits_windows``), each with its micro-batch's
shortest prompt. Where a case does not record them, they can be read off its logits-sized segments: a segment is the
fp32 block rounded up to 2 MiB, micro-batch x positions x vocabulary x 4 bytes.

The trace runs ms-swift's no-grad passes before each step (the old policy's log-probabilities, every micro-batch in
ms-swift 4.6, ``plan.old_logprobs_needed``; the reference's when beta > 0), not generation (HF ``generate`` when
``use_vllm`` is false). Where the case records the allocator at each phase boundary (``outcome.phases``), the
bench prints, per step, torch's reserve after the no-grad passes and after the backward, simulated beside measured;
the measured figures include what generation left (its first step's growth is printed).
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GiB = 2**30


def simulate(case: dict, cfg, shapes: list[tuple[int, int]]) -> dict:
    """The case's step (``cfg``: its GRPOConfig, an ms-swift run) traced at ``shapes`` (one (shortest prompt,
    window) per step) and replayed under the case's allocator setting."""
    from grpo_recipes.allocconf import conf_of
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.memory.allocator import replay
    from grpo_recipes.memory.trace import categorise, step_as_run, trace_step
    from grpo_recipes.plan import build_plan

    old, load = step_as_run(cfg, build_plan(cfg, {}, Hardware(gpus=1)), 'swift')
    counter, keys, _ = trace_step(
        cfg, case['model_config'], shapes[0][0], shapes=shapes, adamw='fused', unpadded=True, old_pass=old, load=load
    )
    conf = conf_of((case.get('environ') or {}).get('PYTORCH_CUDA_ALLOC_CONF') or '')
    st = replay(counter.events, conf, stages=counter.event_stages)
    # the frozen reference model of full training with beta > 0: its own weights, loaded before training
    ref = categorise(counter, keys)['parameters'] if not cfg.is_lora and cfg.beta else 0.0
    # reserved where each stage hands over to the next, keyed by the stage that ends there
    ends = {stage: n / GiB + ref for stage, n in st.reserved_at_stage_end.items()}
    return {
        'allocated': st.peak_allocated / GiB + ref,
        'reserved': st.peak_reserved / GiB + ref,
        'segments': [s / GiB for s in st.segment_sizes],
        'need': need(counter.events, conf, st) / GiB + ref,
        'stage_ends': ends,
        'old_pass': old,
    }


def step_phases(phases: list[dict]) -> list[dict]:
    """The measured reserve per step (GiB): after the no-grad passes (``loss_start``) and after the backward
    (``backward_end``), and generation's growth (``generate_end`` less ``generate_start``)."""
    steps: list[dict] = []
    for p in phases:
        if p['phase'] == 'generate_start':
            steps.append({'start': p['reserved'] / GiB})
        elif steps and p['phase'] in ('generate_end', 'loss_start', 'backward_end', 'step_end'):
            # step_end: the first recordings' name for backward_end
            steps[-1].setdefault(p['phase'].replace('step_end', 'backward_end'), p['reserved'] / GiB)
    return steps


def print_phases(sim: dict, measured: list[dict]) -> None:
    ends = sim['stage_ends']
    print(f'  {"step":<6} {"after no-grad passes":>22} {"after backward":>16}   (simulated / measured GiB reserved)')
    for i in range(len([k for k in ends if k.endswith('backward')])):
        m = measured[i] if i < len(measured) else {}
        no_grad = ends.get(f'step {i + 1} reference pass', ends.get(f'step {i + 1} old log-probs pass'))
        backward = ends.get(f'step {i + 1} backward')
        row = f'  {i + 1:<6} {_pair(no_grad, m.get("loss_start")):>22} {_pair(backward, m.get("backward_end")):>16}'
        if i == 0 and 'generate_end' in m:
            row += f'   generation grew the reserve {m["generate_end"] - m["start"]:.2f} (not simulated)'
        print(row)


def _pair(sim, meas) -> str:
    return f'{"-" if sim is None else f"{sim:.2f}"} / {"-" if meas is None else f"{meas:.2f}"}'


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
    ap.add_argument(
        '--windows', nargs='+', help="one order of windows per argument: 566,549 (default: the case's recorded ones)"
    )
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
    recorded = [(w['prompt_min'], w['logits_to_keep']) for w in out.get('logits_windows') or []]
    if args.windows:
        orders = [[(prompt, int(w)) for w in o.split(',')] for o in args.windows]
    elif recorded:
        orders = [recorded]
    else:
        raise SystemExit(f'bench_reserve_windows: {args.id} records no windows; give --windows')
    per_position = cfg.per_device_train_batch_size * case['model_config']['vocab_size'] * 4
    measured = [s / GiB for s, _ in out.get('torch_allocator', {}).get('at_reserved_peak', {}).get('segments', [])]
    block = per_position * max(w for o in orders for _, w in o) / GiB
    # torch's reserved peak; the first GPU cases record ms-swift's memory(GiB), the same figure
    reserved = out.get('torch_max_reserved_gib', out.get('peak_gib_per_gpu', float('nan')))
    print(f'# {case["id"]} on {case.get("gpu")}; logits-sized segments >= {block / 2:.2f} GiB')
    print(f'{"source":<24} {"allocated":>9} {"reserved":>9} {"needed":>7}  logits-sized segments (GiB)')
    print(
        f'{"measured":<24} {out.get("torch_max_allocated_gib", float("nan")):>9.2f} '
        f'{reserved:>9.2f} {"-":>7}  {logits_sized(measured, block)}'
    )
    for order in orders:
        sim = simulate(case, cfg, order)
        name = 'simulated ' + ','.join(str(w) for _, w in order)
        print(
            f'{name:<24} {sim["allocated"]:>9.2f} {sim["reserved"]:>9.2f} {sim["need"]:>7.2f}  '
            f'{logits_sized(sim["segments"], block)}',
            flush=True,
        )
        if out.get('phases') and (not args.windows or order == recorded):
            print(
                f'  no-grad passes before each step: {"old log-probs, " if sim["old_pass"] else ""}'
                f'{"reference" if cfg.beta else "none else"}'
            )
            print_phases(sim, step_phases(out['phases']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
