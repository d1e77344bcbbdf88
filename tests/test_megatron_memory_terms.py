"""The Megatron memory model's split of parameters and its MoE terms, each against the rule of the code it cites."""

from grpo_recipes.frontends.megatron import memory as mm
from grpo_recipes.memory.arch import Arch
from grpo_recipes.models import load_model_config

MOE = Arch.from_config(load_model_config('Qwen/Qwen3-30B-A3B'))
DENSE = Arch.from_config(load_model_config('Qwen/Qwen3-32B'))


def test_uneven_pipeline_stages_as_megatron_builds_them():
    # transformer_block.py get_num_layers_to_build: the edge stages take the given counts, the others split the rest
    assert mm.stage_layers({'decoder_first_pipeline_num_layers': 25}, 48, 2) == [25, 23]
    assert mm.stage_layers({'decoder_last_pipeline_num_layers': 11}, 24, 2) == [13, 11]
    assert mm.stage_layers({'decoder_first_pipeline_num_layers': 4}, 48, 4) == [4, 15, 15, 15]
    assert mm.stage_layers({}, 48, 4) == [12] * 4
    heavy = mm.rank_params(MOE, 1, 2, 1, 1, {'decoder_first_pipeline_num_layers': 25})
    assert heavy['layers_per_stage'] == 25


def test_norms_and_router_are_not_split_by_tp():
    one, four = mm.rank_params(MOE, 1, 1, 1, 1), mm.rank_params(MOE, 4, 1, 1, 1)
    replicated = MOE.layers * MOE.layer_small_params() + MOE.hidden  # + the final norm
    # what TP splits shrinks 4x; the replicated part stays whole on every rank
    assert abs((one['dense'] - replicated) / 4 - (four['dense'] - replicated)) < 1e3


def test_experts_split_by_ep_times_expert_tp():
    base = mm.rank_params(MOE, 1, 1, 1, 1)['expert']
    assert mm.rank_params(MOE, 4, 1, 8, 1)['expert'] == base / 8
    assert mm.rank_params(MOE, 4, 1, 4, 2)['expert'] == base / 8


def _par(tp=1, ep=1, dp=None, world=8):
    return {
        'tp': tp,
        'pp': 1,
        'cp': 1,
        'ep': ep,
        'etp': 1,
        'dp': dp or world // tp,
        'expert_dp': world // ep,
        'world_size': world,
        'sequence_parallel': tp > 1,
    }


def test_lora_on_experts_is_split_by_ep():
    args = {'tuner_type': 'lora', 'lora_rank': 8, 'target_modules': ['all-linear']}
    one = mm.megatron_state(args, MOE, _par(ep=1))
    two = mm.megatron_state(args, MOE, _par(ep=2))
    # the adapters' gradients: the experts' LoRA (most of it) halves with EP 2, the attention's does not
    assert 0.5 * one['grads'] < two['grads'] < 0.6 * one['grads']


def test_optimizer_offload_fraction_one_leaves_no_optimizer_state_on_the_gpu():
    # HybridDeviceOptimizer (megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py): the states of the first
    # fraction x numel parameters live on the CPU
    args = {
        'tuner_type': 'full',
        'optimizer_cpu_offload': True,
        'optimizer_offload_fraction': 1.0,
        'use_precision_aware_optimizer': True,
    }
    assert mm.megatron_state(args, MOE, _par(tp=4, ep=8))['optimizer'] == 0.0
    half = mm.megatron_state({**args, 'optimizer_offload_fraction': 0.5}, MOE, _par(tp=4, ep=8))['optimizer']
    full = mm.megatron_state({'tuner_type': 'full'}, MOE, _par(tp=4, ep=8))['optimizer']
    assert abs(half - full / 2) < 1


def test_moe_layer_buffers_scale_with_routed_tokens_and_vanish_for_a_dense_model():
    assert mm.moe_layer_bytes(DENSE, 8192) == 0.0
    one = mm.moe_layer_bytes(MOE, 1000)
    assert mm.moe_layer_bytes(MOE, 2000) == 2 * one
    # top-8 routing: the routed copies dominate the router's fp32 logits
    assert one > 1000 * MOE.experts_per_token * 2 * (2 * MOE.hidden + 3 * MOE.moe_intermediate)
    full = {'recompute_granularity': 'full', 'micro_batch_size': 1}
    none = {'micro_batch_size': 1}
    # without recompute every layer keeps its MoE buffers; with full recompute one layer at a time
    assert (
        mm.activations(none, MOE, _par(), 4096, 1)['activations']
        > 10 * mm.activations(full, MOE, _par(), 4096, 1)['activations']
    )


def test_the_allocator_reserve_follows_the_launchs_allocator_setting():
    from grpo_recipes.frontends import megatron as mg
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.memory.reserve import RESERVE_PER_BLOCK

    argv = (
        '--rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --global_batch_size 64 --micro_batch_size 2 '
        '--num_generations 8 --reward_funcs accuracy --use_vllm true --vllm_mode colocate --max_length 512 '
        '--max_completion_length 1024 --vllm_max_model_len 1536'
    ).split()
    hw = Hardware(gpus=8, gpu_type='A100-80G', source='flags')
    terms = {}
    for kind, env in (('default', {}), ('expandable', {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'})):
        _, _, mem = mg.check(mg.read(argv, {'NPROC_PER_NODE': '8', **env}), hw)
        terms[kind] = mem['terms']['train']['allocator_reserve']
    # one micro-batch's fp32 logits block (2 x 1536 tokens x vocab x 4 bytes) times the per-setting ratio
    block = 2 * 1536 * 152064 * 4 / 2**30
    for kind, got in terms.items():
        assert abs(got - RESERVE_PER_BLOCK[kind] * block) < 0.02, kind


def test_freed_param_storage_is_what_later_allocations_leave_of_the_pre_ddp_parameters():
    # param_and_grad_buffer.py: DDP moves each trained bf16 parameter into its buffer and frees the old storage;
    # the optimizer's GPU states and the step's transients reuse it, the rest stays reserved
    off = {
        'tuner_type': 'full',
        'rlhf_type': 'dpo',
        'optimizer_cpu_offload': True,
        'optimizer_offload_fraction': 1.0,
        'use_precision_aware_optimizer': True,
    }
    state = mm.megatron_state(off, MOE, _par(tp=4, ep=8))
    assert state['optimizer'] == 0.0
    # the freed storage is the trained parameters' bf16 bytes: the weights, for full tuning
    assert abs(mm.freed_param_storage(off, state, 0.0) - state['weights']) < 1
    assert abs(mm.freed_param_storage(off, state, 1e9) - (state['weights'] - 1e9)) < 1
    assert mm.freed_param_storage(off, state, 2 * state['weights']) == 0.0
    # optimizer states on the GPU (built after the wrap) take it all
    on = mm.megatron_state({'tuner_type': 'full'}, MOE, _par(tp=4, ep=8))
    assert mm.freed_param_storage({'tuner_type': 'full'}, on, 0.0) == 0.0
    # no distributed optimizer: no parameter buffer, nothing moved
    assert mm.freed_param_storage({**off, 'use_distributed_optimizer': False}, state, 0.0) == 0.0


def test_freed_param_storage_is_kept_by_3x_releases_only():
    dpo = {'rlhf_type': 'dpo'}
    # 4.x: warmup_jit_function empties the cache after the model and optimizer are built
    assert not mm.keeps_freed_param_storage(dpo, None)
    assert not mm.keeps_freed_param_storage(dpo, '4.6.0')
    # 3.x: Megatron-LM's pretrain empties it before the model is built
    assert mm.keeps_freed_param_storage(dpo, '3.9.0')
    grpo = {'rlhf_type': 'grpo', 'vllm_mode': 'colocate', 'sleep_level': 0}
    assert mm.keeps_freed_param_storage(grpo, '3.12.6')
    # a colocated 3.x GRPO run that sleeps or offloads empties the cache at its first rollout, before training
    assert not mm.keeps_freed_param_storage({**grpo, 'sleep_level': 1}, '3.12.6')
    assert not mm.keeps_freed_param_storage({**grpo, 'offload_model': True}, '3.12.6')
    assert mm.keeps_freed_param_storage({**grpo, 'vllm_mode': 'server'}, '3.12.6')


def test_cpu_offload_without_the_precision_aware_optimizer_keeps_the_fp32_main_copies_on_the_gpu():
    # distrib_optimizer.py: without use_precision_aware_optimizer every shard gets an fp32 main copy on the GPU, and
    # HybridDeviceOptimizer steps a CPU copy of it and copies the result back: 4 bytes per parameter / DP stay
    par = _par(tp=4, ep=8)
    off = {'tuner_type': 'full', 'optimizer_cpu_offload': True, 'optimizer_offload_fraction': 1.0}
    full = mm.megatron_state({'tuner_type': 'full'}, MOE, par)['optimizer']  # main weights + two moments, 12 bytes
    kept = mm.megatron_state(off, MOE, par)['optimizer']
    assert abs(kept - full / 3) < 1
    assert mm.megatron_state({**off, 'use_precision_aware_optimizer': True}, MOE, par)['optimizer'] == 0.0
