#!/usr/bin/env python3
"""What the train step leaves cached for the next phase: `grpo-guard trace`'s allocator replay beside the fast path.

For each shape: the bytes the traced step leaves reserved but free at its end (``TraceResult.cached_after_step_gib``,
the step's events through ``allocator.handover``) and the fast path's ``train_cache`` term (``reserve.carried``: the
train phase's step terms with the allocator's reserve), which the rollout starts with at sleep level 0 (no
``empty_cache()`` runs there at any release). Then ms-swift's Qwen3-8B GRPO command from its docs
(BestPractices/Qwen3-Best-Practice.md, "# 70G*8") planned at each release row. Prints figures, asserts nothing.

    python bench/bench_handover.py        # about a minute on 2 cores (fake tensors, no GPU)
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = [  # (model, tuner, micro-batch, completion), 512-token prompts, checkpointing on
    ('Qwen/Qwen2.5-1.5B-Instruct', 'full', 8, 512),
    ('Qwen/Qwen2.5-1.5B-Instruct', 'full', 2, 2048),
    ('Qwen/Qwen2.5-7B-Instruct', 'lora', 8, 512),
]


def carried_vs_traced() -> None:
    from grpo_recipes.allocconf import DEFAULT
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.frontends.swift.handover import handover
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.memory.arch import Arch
    from grpo_recipes.memory.estimate import estimate
    from grpo_recipes.memory.inputs import Inputs
    from grpo_recipes.memory.trace import trace_launch
    from grpo_recipes.plan import build_plan

    models = json.loads((ROOT / 'grpo_recipes' / 'model_configs' / 'catalogue.json').read_text())['models']
    for name, tuner, bs, completion in SHAPES:
        path = ROOT / 'grpo_recipes' / 'model_configs' / f'{name.split("/")[1]}.json'
        mc = json.loads(path.read_text()) if path.exists() else models[name]['config']
        argv = ['--rlhf_type', 'grpo', '--tuner_type', tuner, '--per_device_train_batch_size', str(bs)]
        argv += ['--max_completion_length', str(completion), '--max_length', '512', '--gradient_checkpointing', 'true']
        argv += ['--torch_dtype', 'bfloat16', '--beta', '0', '--use_vllm', 'true', '--vllm_mode', 'colocate']
        cfg, _ = GRPOConfig.from_argv(argv + ['--sleep_level', '0'])
        plan = build_plan(cfg, {'NPROC_PER_NODE': '1', 'CUDA_VISIBLE_DEVICES': '0'}, Hardware(gpus=1))
        traced = trace_launch(cfg, plan, mc, 512, name, alloc_conf=DEFAULT).cached_after_step_gib
        inp = Inputs(Arch.from_config(mc), 80.0, prompt_len=512, alloc=DEFAULT, handover=handover({}))
        fast = estimate(cfg, plan, inp)[0].phase_parts['rollout'].get('train_cache', 0.0)
        print(
            f'{name} {tuner} {bs} x {completion}: traced cache {traced:.2f} GiB, fast path {fast:.2f} GiB '
            f'({fast / traced - 1:+.1%})'
        )


def docs_command() -> None:
    sys.path.insert(0, str(ROOT / 'tests'))
    from helpers import PACKAGES_OK, make
    from test_handover import DOCS_QWEN3_8B, ENV8, H100

    for release in ('3.5.0', '3.8.0', '3.10.0', '3.11.0', '4.6.0'):
        _, r = make(DOCS_QWEN3_8B, env=ENV8, hw=H100, packages={**PACKAGES_OK, 'ms-swift': release})
        m = r.memory[0]
        print(
            f'Qwen3-8B docs command, ms-swift {release}: {m.total_gib:.1f} GiB ({m.total_gib * 2**30 / 1e9:.1f} GB) '
            f'in the {m.phase} phase, train_cache {m.phase_parts[m.phase].get("train_cache", 0.0):.2f} GiB '
            f'(docs: 70 GB per card)'
        )


if __name__ == '__main__':
    carried_vs_traced()
    docs_command()
