#!/usr/bin/env python3
"""The caching-allocator model (grpo_recipes/memory/allocator.py) against torch's measured reserved peak on a real GPU.

For every row of a harness grid (the shared H100 grid: ``bench/bench_gpu_memory.py`` run on one H100 80GB,
torch 2.11, default allocator and ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``), the same training step is
traced on fake CPU tensors (``trace.trace_step``, the shape ``bench_gpu_memory.py`` runs: tuner, checkpointing,
micro-batch, prompt, completion; LoRA r16 with dropout 0.05, beta 0, fused AdamW, two steps), its allocations and
frees are replayed through the simulator under the row's own ``PYTORCH_CUDA_ALLOC_CONF``, and the predicted
reserved peak is printed beside the measured one. One trace serves every row of the same shape. Nothing is fitted:
the simulator has no free constant.

    python bench/bench_allocator.py --grid GRID.jsonl [--only lora:1:8:256:1024 ...] [--json]

Where the simulation and the measurement differ, and why:
- The instrument itself: any Python dispatch mode (the trace's counter, FakeTensorMode) makes autograd take the
  out-of-place paths it keeps for tensor subclasses (``areAnyTensorSubclassLike``). ``gather``'s backward is the
  one that matters here: ``new_zeros`` then ``scatter_add`` instead of ``scatter_add_`` (FunctionsManual.cpp
  ``gather_backward``), a second full-size fp32 logits buffer the GPU never allocates. The trace records it as
  in place (``trace.LiveBytes``); before that correction the simulator was 7-16% high on the grid's rows.
  Autograd's gradient accumulation (``InputBuffer::accumulate``: in place when the buffer is not shared) is also
  out of place under a mode; it is left as traced (at the dispatch level it cannot be told apart from a formula's
  own out-of-place ``add``), so the simulation may keep one extra gradient-sized block for a moment.
- What the allocator is never asked for: the CUDA context (device-used minus reserved: 1.22 GiB on the grid, which
  read NVML's v1 used with the driver's 0.47 GiB reserve in it; memory/reserve.py DEVICE_CONTEXT), and
  cuBLAS/cuBLASLt handles' own state.
- What the allocator is asked for but the trace does not see: kernels' workspaces taken from the caching allocator
  inside an op (cuBLAS's workspace, held from the first matmul on; flash-attention's and cub's scratch buffers;
  the fused AdamW's). They are small next to the segments here (MiB against GiB).
- The event order: the trace runs the real model code on CPU fake tensors; the CUDA kernels of a few ops (SDPA,
  dropout) allocate their outputs in a slightly different order or form (the trace already keeps CUDA's bool
  dropout mask). Model creation differs: the harness creates the weights on the GPU with ``from_config`` and then
  adds PEFT (adapters made, cast to fp32), the trace builds on the meta device and materialises with ``to_empty``.
- One stream: the autograd engine runs CUDA backward on the forward's stream, so no cross-stream reuse is
  delayed; ``record_stream`` (used by NCCL and by copies to side streams) does not occur in this step. Under
  DeepSpeed/NCCL it would hold blocks until their events complete; not modelled.
- Addresses: ``cudaMalloc``'s addresses only break ties between free blocks of equal size; the model hands out
  increasing addresses.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GiB = 2**30
SHARED = ROOT.parent / 'shared' / 'calibration' / 'gpu-h100-2026-11-24'


def model_config(name: str, grid_dir: Path) -> dict:
    own = ROOT / 'grpo_recipes' / 'model_configs' / f'{name}.json'
    if own.is_file():
        return json.loads(own.read_text())
    runs = grid_dir / 'swift_runs.jsonl'  # the 1.5B config.json values, as the real runs give them
    for line in runs.read_text().splitlines():
        case = json.loads(line)
        if name in case.get('model', ''):
            return case['model_config']
    raise SystemExit(f'bench_allocator: no config.json for {name}; put it in grpo_recipes/model_configs/')


def trace_events(config: dict, shape: str):
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.memory.trace import trace_step

    tuner, gc, bs, prompt, C = shape.split(':')
    cfg, _ = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--tuner_type',
            tuner,
            '--per_device_train_batch_size',
            bs,
            '--max_completion_length',
            C,
            '--gradient_checkpointing',
            'true' if gc == '1' else 'false',
            '--torch_dtype',
            'bfloat16',
            '--beta',
            '0',
            '--lora_rank',
            '16',
        ]
    )  # what bench_gpu_memory.run_shape runs
    # the harness's micro-batches have no padding: attention as real tensors run it (trace.py _unpadded_masks)
    counter, _, _ = trace_step(cfg, config, int(prompt), adamw='fused', unpadded=True)
    return counter.peak, list(counter.events)


def fast_reserve(config: dict, shape: str) -> float:
    """The fast path's default-allocator reserve for the shape (reserve.reserve_bytes with trainer.reserve_inputs)."""
    from grpo_recipes.allocconf import conf_of
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.memory.arch import Arch
    from grpo_recipes.memory.inputs import Inputs
    from grpo_recipes.memory.reserve import reserve_bytes
    from grpo_recipes.memory.trainer import reserve_inputs
    from grpo_recipes.plan import build_plan

    tuner, gc, bs, prompt, C = shape.split(':')
    cfg, _ = GRPOConfig.from_argv(
        ['--rlhf_type', 'grpo', '--tuner_type', tuner, '--per_device_train_batch_size', bs]
        + ['--max_completion_length', C, '--gradient_checkpointing', 'true' if gc == '1' else 'false']
        + ['--torch_dtype', 'bfloat16', '--beta', '0', '--lora_rank', '16', '--use_vllm', 'false']
    )
    arch = Arch.from_config(config)
    inp = Inputs(arch=arch, capacity_gib=79.19, prompt_len=int(prompt), adamw='fused', alloc=conf_of(''))
    return reserve_bytes(cfg, arch, conf_of(''), reserve_inputs(cfg, build_plan(cfg, {}, Hardware(gpus=1)), inp))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--grid', default=str(SHARED / 'harness_grid.jsonl'))
    ap.add_argument('--only', nargs='*', help='shapes to run (default: every row)')
    ap.add_argument('--json', action='store_true')
    args = ap.parse_args()
    from grpo_recipes.allocconf import conf_of as parse_alloc_conf
    from grpo_recipes.memory.allocator import replay

    grid = Path(args.grid)
    rows = [json.loads(x) for x in grid.read_text().splitlines() if x.strip()]
    if args.only:
        rows = [r for r in rows if r['shape'] in args.only]
    shapes: dict = {}
    for r in rows:
        shapes.setdefault((r['model_config'], r['shape']), []).append(r)
    print(f'# {len(rows)} rows, {len(shapes)} shapes traced on CPU; {time.strftime("%Y-%m-%d")}')
    print(
        f'{"model":<22} {"shape":<20} {"allocator":<26} {"alloc meas":>10} {"alloc sim":>9} '
        f'{"reserved meas":>13} {"reserved sim":>12} {"error":>7}'
    )
    errs: dict = {}
    ratios: dict = {'default': [], 'expandable': []}
    for (name, shape), group in shapes.items():
        t0 = time.time()
        config = model_config(name, grid.parent)
        traced_peak, events = trace_events(config, shape)
        _, _, bs, _, C = shape.split(':')
        block = int(bs) * int(C) * config['vocab_size'] * 4  # the fp32 logits (reserve.largest_transient)
        for kind, text in (('default', ''), ('expandable', 'expandable_segments:True')):
            st = replay(events, parse_alloc_conf(text))
            ratios[kind].append((st.peak_reserved - st.peak_allocated) / block)
            reserve = (st.peak_reserved - st.peak_allocated) / GiB
            fast = f'; fast path {fast_reserve(config, shape) / GiB:.2f} GiB' if kind == 'default' else ''
            print(
                f'#   sweep {name} {shape} {kind}: simulated reserve {reserve:.2f} '
                f'GiB = {ratios[kind][-1]:.2f} x the fp32 logits block ({block / GiB:.2f} GiB){fast}',
                flush=True,
            )
        for r in group:
            conf_text = r.get('PYTORCH_CUDA_ALLOC_CONF') or ''
            st = replay(events, parse_alloc_conf(conf_text))
            pred, meas = st.peak_reserved / GiB, r['reserved_peak_gib']
            err = pred / meas - 1
            errs.setdefault(conf_text or 'default', []).append(err)
            print(
                f'{name:<22} {shape:<20} {conf_text or "default":<26} {r["allocated_peak_gib"]:>10.2f} '
                f'{st.peak_allocated / GiB:>9.2f} {meas:>13.2f} {pred:>12.2f} {err:>+7.1%}',
                flush=True,
            )
            if args.json:
                print(
                    json.dumps(
                        {
                            'shape': shape,
                            'model': name,
                            'allocator': conf_text,
                            'reserved_measured_gib': meas,
                            'reserved_simulated_gib': round(pred, 3),
                            'allocated_simulated_gib': round(st.peak_allocated / GiB, 3),
                            'traced_gib': round(traced_peak / GiB, 3),
                            'segments_at_end': st.segments,
                            'trace_seconds': round(time.time() - t0, 1),
                        }
                    ),
                    flush=True,
                )
    import statistics

    for kind, v in ratios.items():
        print(
            f'# reserve.RESERVE_PER_BLOCK[{kind!r}] from the simulator (median over {len(v)} shapes): '
            f'{statistics.median(v):.2f} (range {min(v):.2f}-{max(v):.2f})'
        )
    print('# summary (simulated reserved / measured reserved - 1)')
    for k, v in errs.items():
        within = sum(abs(e) <= 0.10 for e in v)
        print(
            f'#   {k:<26} {len(v):>2} rows, within 10%: {within}/{len(v)}, worst {max(v, key=abs):+.1%}, '
            f'mean |error| {sum(abs(e) for e in v) / len(v):.1%}'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
