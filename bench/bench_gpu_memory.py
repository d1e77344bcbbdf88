#!/usr/bin/env python3
"""Measure one GRPO training step on a real CUDA GPU, with random weights built from config.json (no download),
and print, per shape: the trace's figure (grpo-guard trace's fake-tensor count, when this package and TRL are
importable), torch's allocated peak, torch's reserved peak and the device's used memory from NVML. Their
differences are the allocator's reserve and the CUDA context, measured instead of taken from a constant.

Runs with torch, transformers, peft and accelerate only (what the lent GPU machine has): the step is written
here as ms-swift's GRPO trainer runs it (bf16 weights, PEFT LoRA with fp32 adapters, gradient checkpointing,
accelerate's fp32 upcast of the logits, logits_to_keep, in-place temperature, the fp32 gather - per-row logsumexp
log-probs, the GRPO loss, backward, AdamW (fused, or foreach with --adamw foreach: transformers' default below
torch 2.8), two steps). Asserts nothing; prints a table and, with --json,
one JSON line per shape.

    python bench/bench_gpu_memory.py                           # the recipes' training shapes on Qwen2.5-7B
    python bench/bench_gpu_memory.py --config path/config.json --shapes lora:1:8:256:1024 full:1:2:256:1024

A shape is tuner:checkpointing(0/1):micro-batch:prompt:completion.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30
DEFAULT_SHAPES = [
    'lora:1:4:256:1024',
    'lora:1:8:256:1024',
    'lora:1:16:256:1024',
    'lora:0:1:256:1024',
    'full:1:2:256:1024',
    'lora:1:4:256:2048',
]


def logps(model, ids, C):
    import torch

    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), logits_to_keep=C + 1, use_cache=False)
    logits = out.logits.float()  # accelerate convert_outputs_to_fp32 under bf16 mixed precision
    del out
    logits = logits[:, -(C + 1) : -1, :]
    logits.div_(1.0)
    comp = ids[:, -C:].unsqueeze(-1)
    picked = torch.gather(logits, -1, comp).squeeze(-1)
    lse = torch.stack([torch.logsumexp(row, dim=-1) for row in logits])  # trl selective_log_softmax, fp32 path
    return picked - lse


def nvml_used() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch_device_index())
        # v2: the used memory nvidia-smi shows, without the driver's reserved memory that v1 counts (bench_swift_gpu
        # PeakPoller); the shared grid (harness_grid.jsonl) was read with v1
        return pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used / GiB
    except Exception:  # noqa: BLE001 - NVML is optional; fall back to torch's device-wide view
        import torch

        free, total = torch.cuda.mem_get_info()
        return (total - free) / GiB


def torch_device_index() -> int:
    import torch

    return torch.cuda.current_device()


def run_shape(config: dict, shape: str, adamw: str = 'fused') -> dict:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    tuner, gc, bs, prompt, C = shape.split(':')
    gc, bs, prompt, C = gc == '1', int(bs), int(prompt), int(C)
    mc = {k: v for k, v in config.items() if k != 'quantization_config'}
    hf = AutoConfig.for_model(mc.pop('model_type'), **mc)
    hf._attn_implementation = 'sdpa'
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base_used = nvml_used()
    with torch.device('cuda'):
        model = AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16)
    if tuner == 'lora':
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules='all-linear', task_type='CAUSAL_LM'),
        )
        for n, p in model.named_parameters():
            if 'lora_' in n:
                p.data = p.data.float()
    if gc:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})
        if tuner == 'lora':
            model.enable_input_require_grads()
    model.train()
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=1e-6,
        **({'fused': True} if adamw == 'fused' else {'foreach': True}),
    )
    ids = torch.randint(0, config['vocab_size'], (bs, prompt + C), device='cuda')
    adv = torch.randn(bs, device='cuda')
    t0 = time.time()
    for step in range(2):
        lp = logps(model, ids, C)
        loss = -(torch.exp(lp - lp.detach()) * adv.unsqueeze(1)).mean()
        loss.backward()
        del lp, loss
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    out = {
        'shape': shape,
        'allocated_peak_gib': round(torch.cuda.max_memory_allocated() / GiB, 3),
        'reserved_peak_gib': round(torch.cuda.max_memory_reserved() / GiB, 3),
        'device_used_gib': round(nvml_used(), 3),
        'device_used_before_gib': round(base_used, 3),
        'seconds': round(time.time() - t0, 2),
    }
    del model, opt
    torch.cuda.empty_cache()
    return out


def traced(config: dict, shape: str, adamw: str = 'fused') -> float | None:
    """grpo-guard trace's figure for the same shape (None where this package or TRL is not importable)."""
    try:
        sys.path.insert(0, str(ROOT))
        from grpo_recipes.config import GRPOConfig
        from grpo_recipes.hardware import Hardware
        from grpo_recipes.memory.trace import trace_launch
        from grpo_recipes.plan import build_plan
    except ImportError:
        return None
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
    )  # the rank run_shape uses
    try:
        return trace_launch(
            cfg, build_plan(cfg, {}, Hardware(gpus=1)), config, int(prompt), 'bench', adamw
        ).traced_peak_gib
    except ImportError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--config', default=str(ROOT / 'grpo_recipes' / 'model_configs' / 'Qwen2.5-7B-Instruct.json'))
    ap.add_argument('--shapes', nargs='+', default=DEFAULT_SHAPES)
    ap.add_argument('--json', action='store_true')
    ap.add_argument('--adamw', choices=('fused', 'foreach'), default='fused')
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print('bench_gpu_memory: no CUDA device here; run it on a GPU machine', file=sys.stderr)
        return 2
    config = json.loads(Path(args.config).read_text())
    name = torch.cuda.get_device_name()
    print(f'# {name}, torch {torch.__version__}, {Path(args.config).name}, {time.strftime("%Y-%m-%d")}')
    print(f'{"shape":<22} {"traced":>8} {"allocated":>10} {"reserved":>9} {"device":>8}  (GiB)')
    for shape in args.shapes:
        try:
            r = run_shape(config, shape, args.adamw)
        except torch.cuda.OutOfMemoryError:
            print(f'{shape:<22} OOM on {name}')
            torch.cuda.empty_cache()
            continue
        r['traced_gib'] = traced(config, shape, args.adamw)
        r['adamw'] = args.adamw
        r['device'] = name
        tr = f'{r["traced_gib"]:.2f}' if r['traced_gib'] is not None else '-'
        print(
            f'{shape:<22} {tr:>8} {r["allocated_peak_gib"]:>10.2f} {r["reserved_peak_gib"]:>9.2f} '
            f'{r["device_used_gib"]:>8.2f}',
            flush=True,
        )
        if args.json:
            print(json.dumps(r), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
