#!/usr/bin/env python3
"""Trace the trainer step over a grid of models and shapes and write tests/data/trace_grid.json, the oracle that
tests/test_trace.py holds the analytic memory model to (within 5%). About 15 s per point on the 2-core CI machine.

    python scripts/gen_trace_grid.py            # regenerate after changing grpo_recipes/memory/trace.py
"""

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / 'tests' / 'data' / 'trace_grid.json'

# config.json fields of public checkpoints (Qwen/Qwen3-8B, meta-llama/Llama-3.1-8B-Instruct) beside the bundled ones
MODELS = {
    'Qwen2.5-7B-Instruct': json.loads((ROOT / 'grpo_recipes/model_configs/Qwen2.5-7B-Instruct.json').read_text()),
    'Qwen2.5-32B-Instruct': json.loads(
        (ROOT / 'grpo_recipes/model_configs/DeepSeek-R1-Distill-Qwen-32B.json').read_text()
    ),
    'Qwen3-8B': {
        'architectures': ['Qwen3ForCausalLM'],
        'model_type': 'qwen3',
        'hidden_size': 4096,
        'intermediate_size': 12288,
        'num_hidden_layers': 36,
        'num_attention_heads': 32,
        'num_key_value_heads': 8,
        'head_dim': 128,
        'vocab_size': 151936,
        'tie_word_embeddings': False,
        'max_position_embeddings': 40960,
        'rms_norm_eps': 1e-6,
        'torch_dtype': 'bfloat16',
    },
    'Llama-3.1-8B-Instruct': {
        'architectures': ['LlamaForCausalLM'],
        'model_type': 'llama',
        'hidden_size': 4096,
        'intermediate_size': 14336,
        'num_hidden_layers': 32,
        'num_attention_heads': 32,
        'num_key_value_heads': 8,
        'vocab_size': 128256,
        'tie_word_embeddings': False,
        'max_position_embeddings': 131072,
        'rms_norm_eps': 1e-5,
        'torch_dtype': 'bfloat16',
    },
    # tied embeddings, a small vocabulary, a vision tower and experts (config.json fields of Qwen/Qwen3-4B,
    # mistralai/Mistral-7B-v0.3, Qwen/Qwen2.5-VL-7B-Instruct, Qwen/Qwen3-30B-A3B)
    'Qwen3-4B': {
        'architectures': ['Qwen3ForCausalLM'],
        'model_type': 'qwen3',
        'hidden_size': 2560,
        'intermediate_size': 9728,
        'num_hidden_layers': 36,
        'num_attention_heads': 32,
        'num_key_value_heads': 8,
        'head_dim': 128,
        'vocab_size': 151936,
        'tie_word_embeddings': True,
        'max_position_embeddings': 40960,
        'torch_dtype': 'bfloat16',
    },
    'Mistral-7B-v0.3': {
        'architectures': ['MistralForCausalLM'],
        'model_type': 'mistral',
        'hidden_size': 4096,
        'intermediate_size': 14336,
        'num_hidden_layers': 32,
        'num_attention_heads': 32,
        'num_key_value_heads': 8,
        'vocab_size': 32768,
        'tie_word_embeddings': False,
        'max_position_embeddings': 32768,
        'torch_dtype': 'bfloat16',
    },
    'Qwen2.5-VL-7B-Instruct': {
        'architectures': ['Qwen2_5_VLForConditionalGeneration'],
        'model_type': 'qwen2_5_vl',
        'hidden_size': 3584,
        'intermediate_size': 18944,
        'num_hidden_layers': 28,
        'num_attention_heads': 28,
        'num_key_value_heads': 4,
        'vocab_size': 152064,
        'tie_word_embeddings': False,
        'max_position_embeddings': 128000,
        'torch_dtype': 'bfloat16',
        'rms_norm_eps': 1e-06,
        'vision_config': {
            'depth': 32,
            'hidden_act': 'silu',
            'hidden_size': 1280,
            'intermediate_size': 3420,
            'num_heads': 16,
            'in_chans': 3,
            'out_hidden_size': 3584,
            'patch_size': 14,
            'spatial_merge_size': 2,
            'window_size': 112,
            'fullatt_block_indexes': [7, 15, 23, 31],
            'temporal_patch_size': 2,
        },
    },
    # small tied-embedding models (config.json fields of Qwen/Qwen2.5-0.5B-Instruct, Qwen/Qwen2.5-1.5B-Instruct and
    # Qwen/Qwen3-0.6B, whose attention is wider than its hidden size: 16 heads x 128 = 2 x 1024)
    'Qwen2.5-0.5B-Instruct': {
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
    },
    'Qwen2.5-1.5B-Instruct': {
        'architectures': ['Qwen2ForCausalLM'],
        'model_type': 'qwen2',
        'hidden_size': 1536,
        'intermediate_size': 8960,
        'num_hidden_layers': 28,
        'num_attention_heads': 12,
        'num_key_value_heads': 2,
        'vocab_size': 151936,
        'tie_word_embeddings': True,
        'max_position_embeddings': 32768,
        'torch_dtype': 'bfloat16',
    },
    'Qwen3-0.6B': {
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
    },
    'Qwen3-30B-A3B': {
        'architectures': ['Qwen3MoeForCausalLM'],
        'model_type': 'qwen3_moe',
        'hidden_size': 2048,
        'intermediate_size': 6144,
        'moe_intermediate_size': 768,
        'num_experts': 128,
        'num_experts_per_tok': 8,
        'num_hidden_layers': 48,
        'num_attention_heads': 32,
        'num_key_value_heads': 4,
        'head_dim': 128,
        'vocab_size': 151936,
        'tie_word_embeddings': False,
        'max_position_embeddings': 40960,
        'torch_dtype': 'bfloat16',
        'norm_topk_prob': True,
    },
}
# (model, tuner, gradient checkpointing, micro-batch, prompt, completion)
GRID = [
    ('Qwen2.5-7B-Instruct', 'lora', True, 8, 256, 1024),
    ('Qwen2.5-7B-Instruct', 'lora', False, 1, 256, 1024),
    ('Qwen2.5-7B-Instruct', 'lora', True, 16, 512, 512),
    ('Qwen2.5-7B-Instruct', 'lora', False, 4, 1024, 2048),
    ('Qwen2.5-7B-Instruct', 'full', True, 2, 256, 1024),
    ('Qwen2.5-7B-Instruct', 'full', False, 1, 512, 4096),
    ('Qwen2.5-7B-Instruct', 'lora', True, 1, 512, 8192),
    ('Qwen2.5-32B-Instruct', 'lora', True, 4, 256, 2048),
    ('Qwen2.5-32B-Instruct', 'lora', False, 1, 256, 1024),
    ('Qwen3-8B', 'lora', True, 8, 256, 1024),
    ('Qwen3-8B', 'full', True, 2, 512, 2048),
    ('Llama-3.1-8B-Instruct', 'lora', True, 4, 512, 2048),
    ('Llama-3.1-8B-Instruct', 'full', False, 1, 256, 1024),
]
# the same, with the loss or the optimizer changed: (..., loss, adamw). SFT points trace ms-swift's default SFT
# loss over the whole sequence (what the calibration's SFT cases ran); foreach is transformers' default AdamW
# on torch < 2.8
VARIANTS = [
    ('Qwen2.5-7B-Instruct', 'lora', True, 1, 0, 2048, 'sft', 'fused'),
    ('Qwen2.5-7B-Instruct', 'lora', False, 2, 0, 1024, 'sft', 'fused'),
    ('Qwen3-8B', 'lora', True, 4, 0, 4096, 'sft', 'fused'),
    ('Qwen2.5-7B-Instruct', 'full', True, 1, 0, 2048, 'sft', 'foreach'),
    ('Qwen2.5-7B-Instruct', 'full', True, 2, 256, 1024, 'grpo', 'foreach'),
    ('Llama-3.1-8B-Instruct', 'full', False, 1, 256, 1024, 'grpo', 'foreach'),
    ('Qwen2.5-7B-Instruct', 'lora', True, 8, 256, 1024, 'grpo', 'foreach'),
    ('Qwen3-4B', 'lora', True, 4, 256, 1024, 'grpo', 'fused'),
    ('Qwen3-4B', 'full', True, 2, 256, 1024, 'grpo', 'fused'),
    ('Mistral-7B-v0.3', 'lora', True, 4, 256, 1024, 'grpo', 'fused'),
    ('Mistral-7B-v0.3', 'full', True, 2, 256, 1024, 'grpo', 'fused'),
    ('Qwen2.5-VL-7B-Instruct', 'lora', True, 4, 256, 1024, 'grpo', 'fused'),
    ('Qwen2.5-VL-7B-Instruct', 'full', True, 2, 256, 1024, 'grpo', 'fused'),
    ('Qwen3-30B-A3B', 'full', True, 2, 256, 1024, 'grpo', 'fused'),
]
# long prompts, up to 32,768 tokens per sequence (the 7B LoRA recipe at micro-batch 1 with a raised max_length, and
# micro-batch 4 at 32k), and small tied-embedding models without checkpointing
LONG = [
    ('Qwen2.5-7B-Instruct', 'lora', True, 1, 8192, 1024),
    ('Qwen2.5-7B-Instruct', 'lora', True, 1, 16384, 1024),
    ('Qwen2.5-7B-Instruct', 'lora', True, 1, 31744, 1024),
    ('Qwen2.5-7B-Instruct', 'lora', True, 4, 31744, 1024),
    ('Qwen2.5-7B-Instruct', 'full', True, 1, 8192, 1024),
    ('Qwen3-8B', 'lora', True, 1, 16384, 1024),
    ('Llama-3.1-8B-Instruct', 'full', True, 1, 16384, 1024),
    ('Qwen2.5-1.5B-Instruct', 'full', True, 1, 31744, 1024),
    ('Qwen2.5-1.5B-Instruct', 'full', True, 1, 8192, 512),
    ('Qwen3-0.6B', 'lora', True, 1, 16384, 1024),
    ('Qwen2.5-1.5B-Instruct', 'full', False, 4, 128, 512),
    ('Qwen2.5-0.5B-Instruct', 'full', False, 4, 256, 1024),
    ('Qwen2.5-0.5B-Instruct', 'lora', False, 4, 128, 512),
    ('Qwen3-0.6B', 'full', False, 4, 256, 1024),
    ('Qwen3-0.6B', 'lora', False, 4, 256, 1024),
    ('Qwen3-0.6B', 'full', False, 1, 2048, 512),
]


def launch_argv(tuner, gc, bs, completion):
    return [
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
    ]


def main() -> int:
    import torch
    import transformers

    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.plan import build_plan

    points = []
    from grpo_recipes.memory.arch import Arch
    from grpo_recipes.memory.trace import analytic_peak, categorise, trace_step

    for model, tuner, gc, bs, prompt, completion, loss, adamw in (
        [g + ('grpo', 'fused') for g in GRID] + VARIANTS + [g + ('grpo', 'fused') for g in LONG]
    ):
        cfg, _ = GRPOConfig.from_argv(launch_argv(tuner, gc, bs, completion))
        plan = build_plan(cfg, {}, Hardware(gpus=1))
        t0 = time.time()
        counter, keys, _ = trace_step(
            cfg, MODELS[model], prompt, sft=(loss == 'sft'), adamw=adamw, unpadded=True
        )  # every row at the planned length, as the analytic model plans
        traced = round(counter.peak / 2**30, 3)
        analytic = analytic_peak(cfg, plan, Arch.from_config(MODELS[model]), prompt, sft=(loss == 'sft'), adamw=adamw)
        points.append(
            {
                'model': model,
                'tuner': tuner,
                'gradient_checkpointing': gc,
                'batch': bs,
                'prompt': prompt,
                'completion': completion,
                'loss': loss,
                'adamw': adamw,
                'traced_peak_gib': traced,
                'categories_gib': categorise(counter, keys),
                'peak_at': counter.peak_at,
            }
        )
        print(
            f'{model:24} {tuner:4} gc={gc!s:5} bs={bs:<2} {prompt}+{completion} {loss} {adamw}: traced '
            f'{traced:7.2f} GiB, analytic {analytic:7.2f} ({analytic / traced - 1:+.1%}) '
            f'[{time.time() - t0:.0f} s]',
            flush=True,
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                'generated_by': 'scripts/gen_trace_grid.py',
                'date': time.strftime('%Y-%m-%d'),
                'torch': torch.__version__,
                'transformers': transformers.__version__,
                'models': MODELS,
                'points': points,
            },
            indent=1,
        )
        + '\n'
    )
    print(f'wrote {OUT}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
