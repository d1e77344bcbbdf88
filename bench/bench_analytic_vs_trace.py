#!/usr/bin/env python3
"""The analytic trainer peak beside `grpo-guard trace`'s on the shapes where they disagreed: long prompts (up to
32,768 tokens per sequence, LoRA and full), small tied-embedding models without checkpointing (Qwen2.5-0.5B/1.5B,
Qwen3-0.6B), a DeepSpeed launch (16-bit logits) and a GPTQ base. Prints one line per shape: traced GiB, analytic GiB
and their difference, and for GPTQ whether the trace's categories add up to its peak. Asserts nothing.

    python bench/bench_analytic_vs_trace.py            # about 10 minutes on 2 cores (fake tensors, no GPU)
"""

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QWEN25_7B = json.loads((ROOT / 'grpo_recipes' / 'model_configs' / 'Qwen2.5-7B-Instruct.json').read_text())
GPTQ_32B = json.loads((ROOT / 'grpo_recipes' / 'model_configs' / 'Qwen2.5-32B-Instruct-GPTQ-Int4.json').read_text())
# config.json fields of Qwen/Qwen2.5-0.5B-Instruct, Qwen/Qwen2.5-1.5B-Instruct and Qwen/Qwen3-0.6B (tied embeddings)
QWEN25_05B = {
    'architectures': ['Qwen2ForCausalLM'],
    'model_type': 'qwen2',
    'hidden_size': 896,
    'intermediate_size': 4864,
    'num_hidden_layers': 24,
    'num_attention_heads': 14,
    'num_key_value_heads': 2,
    'vocab_size': 151936,
    'tie_word_embeddings': True,
    'max_position_embeddings': 32768,
    'torch_dtype': 'bfloat16',
}
QWEN25_15B = {
    **QWEN25_05B,
    'hidden_size': 1536,
    'intermediate_size': 8960,
    'num_hidden_layers': 28,
    'num_attention_heads': 12,
}
QWEN3_06B = {
    'architectures': ['Qwen3ForCausalLM'],
    'model_type': 'qwen3',
    'hidden_size': 1024,
    'intermediate_size': 3072,
    'num_hidden_layers': 28,
    'num_attention_heads': 16,
    'num_key_value_heads': 8,
    'head_dim': 128,
    'vocab_size': 151936,
    'tie_word_embeddings': True,
    'max_position_embeddings': 40960,
    'rms_norm_eps': 1e-6,
    'torch_dtype': 'bfloat16',
}
# (name, config, tuner, gradient checkpointing, micro-batch, prompt, completion, extra swift flags)
SHAPES = [
    ('7B LoRA 1x9,216', QWEN25_7B, 'lora', True, 1, 8192, 1024, []),
    ('7B LoRA 1x17,408', QWEN25_7B, 'lora', True, 1, 16384, 1024, []),
    ('7B LoRA 1x32,768', QWEN25_7B, 'lora', True, 1, 31744, 1024, []),
    ('7B LoRA 4x32,768', QWEN25_7B, 'lora', True, 4, 31744, 1024, []),
    ('1.5B full 1x32,768', QWEN25_15B, 'full', True, 1, 31744, 1024, []),
    ('0.5B full no-gc 4x1,280', QWEN25_05B, 'full', False, 4, 256, 1024, []),
    ('1.5B full no-gc 4x640', QWEN25_15B, 'full', False, 4, 128, 512, []),
    ('Qwen3-0.6B full no-gc 4x1,280', QWEN3_06B, 'full', False, 4, 256, 1024, []),
    ('Qwen3-0.6B LoRA no-gc 4x1,280', QWEN3_06B, 'lora', False, 4, 256, 1024, []),
    ('7B LoRA ZeRO-2 8x1,280', QWEN25_7B, 'lora', True, 8, 256, 1024, ['--deepspeed', 'zero2']),
    ('32B GPTQ LoRA 4x2,304', GPTQ_32B, 'lora', True, 4, 256, 2048, []),
]


def main() -> int:
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.memory.trace import trace_launch
    from grpo_recipes.plan import build_plan

    print(f'# analytic vs trace, {time.strftime("%Y-%m-%d")} (fake tensors; GiB allocated, no CUDA context)')
    print(f'{"shape":32} {"traced":>8} {"analytic":>9} {"diff":>7}  categories')
    for name, mc, tuner, gc, bs, prompt, completion, extra in SHAPES:
        cfg, _ = GRPOConfig.from_argv(
            [
                '--rlhf_type',
                'grpo',
                '--tuner_type',
                tuner,
                '--per_device_train_batch_size',
                str(bs),
                '--max_completion_length',
                str(completion),
                '--gradient_checkpointing',
                str(gc).lower(),
                '--torch_dtype',
                'bfloat16',
                '--beta',
                '0',
                *extra,
            ]
        )
        r = trace_launch(cfg, build_plan(cfg, {}, Hardware(gpus=1)), mc, prompt, name)
        cats = r.categories_gib
        total = sum(cats.values())
        sums = 'add up' if abs(total - r.traced_peak_gib) <= 0.01 * r.traced_peak_gib else f'sum {total:.2f} != peak'
        print(
            f'{name:32} {r.traced_peak_gib:8.2f} {r.model_peak_gib:9.2f} '
            f'{r.model_peak_gib / r.traced_peak_gib - 1:+7.1%}  parameters {cats["parameters"]:.2f}, {sums}',
            flush=True,
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
