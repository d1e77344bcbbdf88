#!/usr/bin/env python3
"""The Megatron memory model (grpo_recipes/frontends/megatron/memory.py) against ms-swift's published Megatron figures.

ms-swift's Megatron GRPO examples (examples/megatron/grpo/*.sh: dense_colocate, dense_server, moe_colocate_full,
moe_colocate_lora, ...) carry no `# N * XXGiB` header in any stored version, so nothing published measures a Megatron
GRPO launch. The published Megatron-SWIFT figures that do exist are the `megatron rlhf` DPO examples
(examples/megatron/rlhf/dpo/*.sh, `# N * XXGiB` = nvidia-smi per GPU). Their trainer is the same Megatron state this
model counts for GRPO's train phase -- bf16 weights, fp32 gradient buffers, the distributed optimizer, the reference
model a full-tuning RLHF run builds (swift/megatron/trainers/rlhf_mixin.py prepare_model), activations with full
recompute and sequence parallelism, the logits on the last stage -- so they calibrate those terms. Only packed
examples are used: a packed micro-batch holds max_length tokens whatever the data (the unpacked dense.sh depends on
its data's lengths, which are not published). Nothing here is fitted: the model's constants are cited in memory.py.

Then the GRPO examples' shapes (our own variants of the scripts' arguments) are planned and their phases printed,
with no published figure to compare.

    python bench/bench_megatron.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from grpo_recipes.frontends import megatron as mg
from grpo_recipes.frontends.megatron import memory as mm
from grpo_recipes.frontends.megatron.plan import plan as make_plan
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.inputs import GiB

# config.json of the models the examples train (huggingface.co/Qwen/<name>/blob/main/config.json)
QWEN3_4B_2507 = {
    'model_type': 'qwen3',
    'hidden_size': 2560,
    'intermediate_size': 9728,
    'num_hidden_layers': 36,
    'num_attention_heads': 32,
    'num_key_value_heads': 8,
    'head_dim': 128,
    'vocab_size': 151936,
    'tie_word_embeddings': True,
    'max_position_embeddings': 262144,
    'torch_dtype': 'bfloat16',
}
QWEN3_30B_A3B_2507 = {
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
    'max_position_embeddings': 262144,
    'torch_dtype': 'bfloat16',
}

# (name, source, published GiB per GPU, argv after `megatron rlhf`, env, config, packed tokens per micro-batch)
PUBLISHED = [
    (
        'dpo/packing.sh Qwen3-4B TP4',
        'ms-swift examples/megatron/rlhf/dpo/packing.sh "# 4 * 28GiB"',
        28.0,
        [
            '--rlhf_type',
            'dpo',
            '--model',
            'Qwen/Qwen3-4B-Instruct-2507',
            '--tensor_model_parallel_size',
            '4',
            '--packing',
            'true',
            '--micro_batch_size',
            '1',
            '--global_batch_size',
            '4',
            '--recompute_granularity',
            'full',
            '--recompute_method',
            'uniform',
            '--recompute_num_layers',
            '1',
            '--max_length',
            '8192',
            '--sequence_parallel',
            'true',
            '--attention_backend',
            'flash',
            '--tuner_type',
            'full',
        ],
        {'NPROC_PER_NODE': '4'},
        QWEN3_4B_2507,
        8192,
    ),
    (
        'dpo/moe.sh Qwen3-30B-A3B TP4 EP8',
        'ms-swift examples/megatron/rlhf/dpo/moe.sh "# 8 * 46GiB"',
        46.0,
        [
            '--rlhf_type',
            'dpo',
            '--model',
            'Qwen/Qwen3-30B-A3B-Instruct-2507',
            '--packing',
            'true',
            '--tensor_model_parallel_size',
            '4',
            '--expert_tensor_parallel_size',
            '1',
            '--expert_model_parallel_size',
            '8',
            '--micro_batch_size',
            '1',
            '--global_batch_size',
            '4',
            '--recompute_granularity',
            'full',
            '--recompute_method',
            'uniform',
            '--recompute_num_layers',
            '1',
            '--max_length',
            '8192',
            '--sequence_parallel',
            'true',
            '--attention_backend',
            'flash',
            '--optimizer_cpu_offload',
            'true',
            '--use_precision_aware_optimizer',
            'true',
            '--optimizer_offload_fraction',
            '1',
        ],
        {'NPROC_PER_NODE': '8'},
        QWEN3_30B_A3B_2507,
        8192,
    ),
]

# GRPO: the shapes of ms-swift's examples/megatron/grpo/moe_colocate_full.sh and a dense colocate variant
GRPO = [
    (
        'grpo moe_colocate_full shape (H100 80GB)',
        'nvidia H100 80GB HBM3',
        [
            '--rlhf_type',
            'grpo',
            '--model',
            'Qwen/Qwen3-30B-A3B-Instruct-2507',
            '--tensor_model_parallel_size',
            '4',
            '--expert_model_parallel_size',
            '4',
            '--pipeline_model_parallel_size',
            '2',
            '--global_batch_size',
            '8',
            '--micro_batch_size',
            '1',
            '--steps_per_generation',
            '1',
            '--num_generations',
            '8',
            '--reward_funcs',
            'accuracy',
            'format',
            '--vllm_mode',
            'colocate',
            '--vllm_gpu_memory_utilization',
            '0.4',
            '--vllm_tensor_parallel_size',
            '8',
            '--vllm_max_model_len',
            '16384',
            '--max_length',
            '8192',
            '--max_completion_length',
            '8192',
            '--tuner_type',
            'full',
            '--beta',
            '0',
            '--sleep_level',
            '2',
            '--offload_model',
            'true',
            '--offload_optimizer',
            'true',
            '--optimizer_cpu_offload',
            'true',
            '--use_precision_aware_optimizer',
            '--recompute_granularity',
            'selective',
            '--sequence_parallel',
            'true',
            '--padding_free',
            'true',
        ],
        {'NPROC_PER_NODE': '8'},
        QWEN3_30B_A3B_2507,
    ),
]


def dpo_row(name, source, published, argv, env, config, tokens):
    la = mg.read(argv, env)
    plan = make_plan(la)
    a = Arch.from_config(config)
    par = {
        **plan['parallel'],
        'world_size': plan['world_size'],
        'expert_dp': plan['expert_dp'],
        'sequence_parallel': plan['sequence_parallel'],
    }
    state = mm.megatron_state(la.args, a, par)
    # a packed DPO micro-batch: `tokens` tokens (chosen and rejected packed together, padding_free)
    act = mm.activations({**la.args, 'micro_batch_size': 1}, a, par, tokens, plan['num_microbatches'] or 1)
    terms = {**state, **act}
    total = sum(terms.values()) / GiB
    return {
        'case': name,
        'source': source,
        'published_gib': published,
        'predicted_gib': round(total, 2),
        'error_pct': round(100 * (total - published) / published, 1),
        'terms_gib': {k: round(v / GiB, 2) for k, v in sorted(terms.items(), key=lambda x: -x[1])},
    }


def grpo_row(name, gpu, argv, env, config):
    la = mg.read(argv, env)
    findings, _, mem = mg.check(la, Hardware(gpus=8, gpu_type=gpu, source='flags'), model=config)
    return {
        'case': name,
        'published_gib': None,
        'phases_gib': mem['phases'] if mem else None,
        'peak': mem['peak_phase'] if mem else None,
        'findings': [f'{f.severity} {f.rule}' for f in findings],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--json', action='store_true')
    opts = ap.parse_args()
    rows = [dpo_row(*r) for r in PUBLISHED]
    grpo = [grpo_row(*r) for r in GRPO]
    if opts.json:
        print(json.dumps({'published': rows, 'grpo': grpo}, indent=1))
        return
    print(f'{"case":38} {"published":>9} {"predicted":>9} {"error":>7}')
    for r in rows:
        print(f'{r["case"]:38} {r["published_gib"]:>8.1f}G {r["predicted_gib"]:>8.1f}G {r["error_pct"]:>+6.1f}%')
        print('    ' + ', '.join(f'{k} {v}' for k, v in r['terms_gib'].items()))
    errs = [abs(r['error_pct']) for r in rows]
    print(f'mean |error| {sum(errs) / len(errs):.1f}% over {len(rows)} published Megatron figures')
    for g in grpo:
        print(f'{g["case"]}: no published figure; phases {g["phases_gib"]} (peak {g["peak"]}); {g["findings"]}')


if __name__ == '__main__':
    main()
