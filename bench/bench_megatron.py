#!/usr/bin/env python3
"""The Megatron memory model (grpo_recipes/frontends/megatron/memory.py) against ms-swift's published Megatron figures.

ms-swift's Megatron GRPO examples (examples/megatron/grpo/*.sh) carry no `# N * XXGiB` header, so nothing published
measures a Megatron GRPO launch. The published Megatron-SWIFT figures (`# N * XXGiB` = nvidia-smi per GPU) are on
its `megatron rlhf` (DPO, KTO) and `megatron sft` examples. Their trainer is the same Megatron state this model counts
for GRPO's train phase -- bf16 weights, fp32 gradient buffers, the distributed optimizer (or Megatron-LM's
HybridDeviceOptimizer on the CPU), the reference model a full-tuning RLHF run builds (swift/megatron/trainers/
rlhf_mixin.py prepare_model; none for SFT), activations, the MoE layer's buffers, the logits on the last stage -- so
they test those terms. Every packed example whose model is a text LLM with a known config.json is used: a packed
micro-batch holds max_length tokens whatever the data. Left out: the unpacked ones (their tokens per micro-batch
depend on the data, which is not published: lora/dense.sh, lora/moe.sh, lora/dpo.sh, sft.sh, rlhf/dpo/dense.sh,
kto/dense.sh, rm/*), the multimodal and embedding/reranker ones, and FP8. Nothing here is fitted: the model's
constants are cited in memory.py. All figures from ms-swift at commit 3602360a562313afbf2ef6065fdf61f271a2c5b9.

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

QWEN3_32B = {
    'model_type': 'qwen3',
    'hidden_size': 5120,
    'intermediate_size': 25600,
    'num_hidden_layers': 64,
    'num_attention_heads': 64,
    'num_key_value_heads': 8,
    'head_dim': 128,
    'vocab_size': 151936,
    'tie_word_embeddings': False,
    'max_position_embeddings': 40960,
    'torch_dtype': 'bfloat16',
}
# huggingface.co/Qwen/Qwen1.5-MoE-A2.7B/blob/main/config.json
QWEN15_MOE_A27B = {
    'model_type': 'qwen2_moe',
    'hidden_size': 2048,
    'intermediate_size': 5632,
    'moe_intermediate_size': 1408,
    'shared_expert_intermediate_size': 5632,
    'num_experts': 60,
    'num_experts_per_tok': 4,
    'num_hidden_layers': 24,
    'num_attention_heads': 16,
    'num_key_value_heads': 16,
    'vocab_size': 151936,
    'tie_word_embeddings': False,
    'max_position_embeddings': 8192,
    'torch_dtype': 'bfloat16',
}

COMMIT = '3602360'
RECOMPUTE = '--recompute_granularity full --recompute_method uniform --recompute_num_layers 1'
MOE = '--moe_permute_fusion true --moe_grouped_gemm true --moe_shared_expert_overlap true'
OFFLOAD = '--optimizer_cpu_offload true --use_precision_aware_optimizer true --optimizer_offload_fraction 1'
SP = '--sequence_parallel true --attention_backend flash --packing true --max_length 8192'

# (example path, the ms-swift release that first carried the header's figure (the first tag holding the commit that
# last changed the header line: `git log -L1,1:<example>`, `git tag --contains`), published GiB per GPU, kind,
# model config, world, flags after `megatron rlhf|sft` that shape memory)
PUBLISHED = [
    (
        'rlhf/dpo/packing.sh',
        '3.9.0',
        28.0,
        'dpo',
        QWEN3_4B_2507,
        4,
        f'--tensor_model_parallel_size 4 --micro_batch_size 1 --global_batch_size 4 {RECOMPUTE} {SP}',
    ),
    (
        'rlhf/dpo/moe.sh',
        '3.9.0',
        46.0,
        'dpo',
        QWEN3_30B_A3B_2507,
        8,
        '--tensor_model_parallel_size 4 --expert_tensor_parallel_size 1 --expert_model_parallel_size 8 '
        f'{MOE} --micro_batch_size 1 --global_batch_size 4 {RECOMPUTE} {SP} {OFFLOAD}',
    ),
    (
        'rlhf/kto/moe.sh',
        '3.9.0',
        48.0,
        'kto',
        QWEN3_30B_A3B_2507,
        2,
        '--tuner_type lora --lora_rank 8 --target_modules all-linear --expert_model_parallel_size 2 '
        f'{MOE} --micro_batch_size 1 --global_batch_size 4 {RECOMPUTE} {SP}',
    ),
    (
        'moe/qwen3_moe_offload.sh',
        '3.6.0',
        75.0,
        'sft',
        QWEN3_30B_A3B_2507,
        4,
        f'--expert_model_parallel_size 4 {MOE} --micro_batch_size 1 --global_batch_size 16 {RECOMPUTE} {SP} {OFFLOAD}',
    ),
    (
        'moe/qwen3_moe.sh (2 nodes)',
        '3.4.0',
        60.0,
        'sft',
        QWEN3_30B_A3B_2507,
        16,
        f'--pipeline_model_parallel_size 2 --expert_model_parallel_size 8 {MOE} --micro_batch_size 1 '
        f'--global_batch_size 16 {RECOMPUTE} {SP}',
    ),
    (
        'mcore_bridge/full/moe.sh',
        '3.10.0',
        76.0,
        'sft',
        QWEN3_30B_A3B_2507,
        8,
        '--pipeline_model_parallel_size 2 --decoder_first_pipeline_num_layers 25 --tensor_model_parallel_size 4 '
        f'--expert_model_parallel_size 4 {MOE} --micro_batch_size 1 --global_batch_size 4 {RECOMPUTE} {SP}',
    ),
    (
        'moe/moe.sh',
        '3.7.0',
        57.0,
        'sft',
        QWEN15_MOE_A27B,
        8,
        '--pipeline_model_parallel_size 2 --decoder_last_pipeline_num_layers 11 --expert_model_parallel_size 4 '
        f'{MOE} --micro_batch_size 1 --global_batch_size 16 {RECOMPUTE} {SP}',
    ),
    (
        'dense/qwen3_32b.sh',
        '3.4.1',
        80.0,
        'sft',
        QWEN3_32B,
        8,
        f'--tensor_model_parallel_size 8 --micro_batch_size 1 --global_batch_size 16 {RECOMPUTE} {SP}',
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
        {'NPROC_PER_NODE': '8', 'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'},
        QWEN3_30B_A3B_2507,
    ),
]


def published_row(path, release, published, kind, config, world, flags):
    """One published figure: the example's memory-shaping flags read as `megatron rlhf` (an SFT example as a
    full-tuning run without the reference model), its Megatron state and one packed micro-batch of max_length."""
    argv = ['--rlhf_type', 'dpo' if kind == 'sft' else kind, '--model', 'bench', *flags.split()]
    la = mg.read(argv, {'NPROC_PER_NODE': str(min(world, 8)), 'NNODES': str(max(1, world // 8))})
    plan = make_plan(la)
    a = Arch.from_config(config)
    par = {
        **plan['parallel'],
        'world_size': plan['world_size'],
        'expert_dp': plan['expert_dp'],
        'sequence_parallel': plan['sequence_parallel'],
    }
    state = mm.megatron_state(la.args, a, par)
    if kind == 'sft':
        state.pop('ref_model')
    tokens = int(la.args['max_length'])
    one = {**la.args, 'micro_batch_size': 1}
    act = mm.activations(one, a, par, tokens, plan['num_microbatches'] or 1)
    # every example sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; nvidia-smi shows what torch reserves plus
    # the context the allocator never sees (megatron_state's cuda_context: memory/reserve.py DEVICE_CONTEXT, measured)
    act['allocator_reserve'] = mm.allocator_reserve(one, a, par, tokens, 'expandable')
    # every figure was measured on ms-swift 3.x, which trains through Megatron-LM's pretrain: the policy's pre-DDP
    # parameter storage stays cached unless the optimizer's GPU states or the step's transients reuse it
    if mm.keeps_freed_param_storage(la.args, release):
        act['freed_params'] = mm.freed_param_storage(la.args, state, sum(act.values()))
    terms = {**state, **act}
    total = sum(terms.values()) / GiB
    return {
        'case': path,
        'source': f'ms-swift examples/megatron/{path.split(" ")[0]}@{COMMIT}',
        'measured_on': f'ms-swift {release}',
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
    rows = [published_row(*r) for r in PUBLISHED]
    grpo = [grpo_row(*r) for r in GRPO]
    if opts.json:
        print(json.dumps({'published': rows, 'grpo': grpo}, indent=1))
        return
    print(f'{"case":30} {"published":>9} {"predicted":>9} {"error":>7}')
    for r in rows:
        print(f'{r["case"]:30} {r["published_gib"]:>8.1f}G {r["predicted_gib"]:>8.1f}G {r["error_pct"]:>+6.1f}%')
        print('    ' + ', '.join(f'{k} {v}' for k, v in r['terms_gib'].items()))
    errs = [abs(r['error_pct']) for r in rows]
    worst = max(rows, key=lambda r: abs(r['error_pct']))
    print(
        f'mean |error| {sum(errs) / len(errs):.1f}%, worst {worst["error_pct"]:+.1f}% ({worst["case"]}) '
        f'over {len(rows)} published Megatron figures'
    )
    for g in grpo:
        print(f'{g["case"]}: no published figure; phases {g["phases_gib"]} (peak {g["peak"]}); {g["findings"]}')


if __name__ == '__main__':
    main()
