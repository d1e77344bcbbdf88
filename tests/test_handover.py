"""What one phase leaves reserved for the next: the train step's cached blocks carried into the weight sync and the
rollout where the framework's release runs no ``torch.cuda.empty_cache()`` between them (frontends/*/handover.py),
checked against the installed frameworks' own code, the allocator model's replay and a command from ms-swift's docs."""

import inspect

import pytest
from helpers import PACKAGES_OK, make

from grpo_recipes.framework import framework_of
from grpo_recipes.frontends.swift.handover import handover as swift_handover
from grpo_recipes.frontends.trl.handover import handover as trl_handover
from grpo_recipes.hardware import Hardware

GiB = 2**30


def test_swift_rows_by_release():
    h = swift_handover({'ms-swift': '3.8.0'})
    assert not h.empty_before_sync and not h.empty_before_rollout and not h.offload_before_sync
    assert set(h.offload_empties) == {'offload_model', 'offload_optimizer'}
    h = swift_handover({'ms-swift': '3.10.2'})
    assert not h.empty_before_sync and h.empty_before_rollout and h.offload_empties == ()
    assert swift_handover({'ms-swift': '3.11.0'}).empty_before_sync
    assert swift_handover({'ms-swift': '3.5.1'}).offload_before_sync
    h = swift_handover({'ms-swift': '4.6.0'})
    assert h.empty_before_sync and h.offload_empties == ('offload_model',)
    assert swift_handover({}) == h  # unknown release: planned as 4.6
    assert trl_handover({'trl': '0.29.1'}).empty_before_sync


def test_the_registry_hands_each_front_end_its_own_rows():
    assert framework_of('swift').call('handover', {'ms-swift': '3.8.0'}).release == 'ms-swift 3.6-3.9'
    assert framework_of('trl').call('handover', {'trl': '0.29.1'}).release == 'TRL'


def test_installed_ms_swift_empties_before_waking_the_weights():
    from swift.rlhf_trainers.rollout_mixin import RolloutTrainerMixin

    src = inspect.getsource(RolloutTrainerMixin._fast_infer)
    empty, wake, sync = (
        src.index('aggressive_empty_cache()'),
        src.index('wake_up(**kwargs)'),
        src.index('_move_model_to_vllm('),
    )
    assert empty < wake < sync < src.index('with context():')  # offload_context only after the sync
    assert 'empty_cache()' in inspect.getsource(RolloutTrainerMixin.offload_model)
    assert 'empty_cache' not in inspect.getsource(RolloutTrainerMixin.offload_optimizer)
    h = swift_handover({'ms-swift': '4.6.0'})
    assert h.empty_before_sync and not h.offload_before_sync and h.offload_empties == ('offload_model',)


def test_installed_trl_empties_before_waking_the_weights():
    from trl.generation.vllm_generation import VLLMGeneration

    src = inspect.getsource(VLLMGeneration.sync_weights)
    assert src.index('empty_cache()') < src.index('wake_up(tags=["weights"])')


# ms-swift's docs, BestPractices/Qwen3-Best-Practice.md (English and Chinese), GRPO on Qwen3-8B, headed "# 70G*8"
# (https://github.com/modelscope/ms-swift/blob/v3.8.0/docs/source_en/BestPractices/Qwen3-Best-Practice.md; first in
# v3.6.0, the command unchanged since but for --train_type -> --tuner_type in 4.x)
DOCS_QWEN3_8B = {
    'model': 'Qwen/Qwen3-8B',
    'tuner_type': 'full',
    'dataset': ['AI-MO/NuminaMath-TIR#5000'],
    'torch_dtype': 'bfloat16',
    'per_device_train_batch_size': 2,
    'learning_rate': 1e-6,
    'gradient_accumulation_steps': 1,
    'max_length': 4096,
    'max_completion_length': 4096,
    'vllm_max_model_len': 8192,
    'reward_funcs': ['accuracy'],
    'num_generations': 16,
    'use_vllm': True,
    'vllm_mode': 'colocate',
    'vllm_gpu_memory_utilization': 0.4,
    'sleep_level': 1,
    'offload_model': True,
    'offload_optimizer': True,
    'deepspeed': 'zero3',
    'vllm_tensor_parallel_size': 1,
    'temperature': 1.0,
    'top_p': 0.85,
    'overlong_filter': True,
}
ENV8 = {'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7', 'NPROC_PER_NODE': 8}
H100 = Hardware(gpus=8, gpu_type='H100', source='flags')
DOCS_GB = 70  # "# 70G*8"


def _docs_case(release):
    _, r = make(DOCS_QWEN3_8B, env=ENV8, hw=H100, packages={**PACKAGES_OK, 'ms-swift': release})
    return r, r.memory[0]


def test_docs_command_at_its_release_carries_the_step_cache_into_the_sync():
    r, m = _docs_case('3.8.0')
    sync = m.phase_parts['sync']
    assert m.phase == 'sync' and sync.get('train_cache', 0) > 0
    # offload_model/offload_optimizer run after the sync at 3.6+: the sync sees the optimizer state on the GPU
    assert sync['grads+optimizer'] > 0 and 'train_cache' not in m.phase_parts['rollout']
    # the device figure against the docs' 70 GB per card: within the model's stated error band either way
    assert abs(m.total_gib * GiB / 1e9 - DOCS_GB) / DOCS_GB < 0.15
    _, m46 = _docs_case('4.6.0')  # 4.x empties the cache before waking the weights
    assert 'train_cache' not in m46.phase_parts['sync'] and m46.phases['sync'] < m.phases['sync']


def test_sleep_level_0_carries_into_the_rollout_unless_an_offload_empties_it():
    cfg = {**DOCS_QWEN3_8B, 'sleep_level': 0, 'offload_model': False, 'offload_optimizer': True}
    _, r = make(cfg, env=ENV8, hw=H100)
    parts = r.memory[0].phase_parts
    assert parts['sync'].get('train_cache', 0) > 0 and parts['rollout'].get('train_cache', 0) > 0
    _, r = make({**cfg, 'offload_model': True}, env=ENV8, hw=H100)  # 4.x offload_model calls empty_cache()
    parts = r.memory[0].phase_parts
    assert parts['sync'].get('train_cache', 0) > 0 and 'train_cache' not in parts['rollout']


def test_one_basis_whatever_phase_peaks():
    r, m = _docs_case('3.8.0')
    q = m.quantities
    assert m.phase == 'sync' and q['allocated_gib'] is not None  # the allocator was modelled: device basis
    assert q['allocated_gib'] < q['reserved_gib'] < q['device_gib']


@pytest.mark.parametrize('batch,completion', [(2, 1024), (1, 128)])  # the step's cache above / below the gather
def test_fast_path_and_allocator_replay_agree_on_the_sync(batch, completion):
    pytest.importorskip('torch')
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.memory.allocator import handover
    from grpo_recipes.memory.reserve import carried
    from grpo_recipes.memory.trace import RELEASED, trace_step

    H, inter, V, L, kv = 2560, 6912, 32768, 2, 1280
    model = {
        'architectures': ['Qwen2ForCausalLM'],
        'model_type': 'qwen2',
        'hidden_size': H,
        'intermediate_size': inter,
        'num_hidden_layers': L,
        'num_attention_heads': 4,
        'num_key_value_heads': 2,
        'vocab_size': V,
        'tie_word_embeddings': False,
        'max_position_embeddings': 4096,
        'torch_dtype': 'bfloat16',
    }
    argv = ['--rlhf_type', 'grpo', '--tuner_type', 'full', '--gradient_checkpointing', 'true', '--beta', '0']
    argv += ['--per_device_train_batch_size', str(batch), '--max_completion_length', str(completion)]
    cfg, _ = GRPOConfig.from_argv(argv)
    counter, _, _ = trace_step(cfg, model, 64)
    step = [e for e, st in zip(counter.events, counter.event_stages) if st != RELEASED]
    # the whole model gathered in 16 bits, one request per parameter (DeepSpeed _allgather_params_coalesced)
    layer = [H * H, H * kv, H * kv, H * H, H * inter, H * inter, inter * H, H, H]
    gather = [2 * V * H] + [2 * n for _ in range(L) for n in layer] + [2 * H, 2 * V * H]
    cached, held = handover(step, gather, None, empty=False)
    fast = carried({'activations': cached}, sum(gather)) + sum(gather)
    assert abs(held - fast) <= 0.12 * held
    _, held_empty = handover(step, gather, None, empty=True)
    assert held_empty <= held and abs(held_empty - sum(gather)) <= 0.3 * held_empty


def test_hf_generation_starts_with_the_step_cache():
    # no vLLM: neither ms-swift nor TRL empties the cache before the trainer's own generation, so what the step
    # reserved stays reserved and the generate phase never drops below it
    _, r = make({'use_vllm': False, 'vllm_mode': None, 'per_device_train_batch_size': 4})
    m = r.memory[0]
    gen, train = m.phase_parts['generate'], m.phase_parts['train']
    assert gen.get('train_cache', 0) > 0
    step = sum(v for k, v in train.items() if k in ('activations', 'logits', 'allocator_reserve', 'overlap'))
    assert m.phases['generate'] >= m.phases['train'] - 0.05 and gen['train_cache'] < step


def test_trace_and_fast_path_agree_on_what_the_step_leaves_cached():
    # Qwen2.5-1.5B full, micro-batch 8, 512-token prompts and completions (the H100 grid's shape): the cache the
    # traced step leaves in the allocator model (reserved - allocated at its end) against the fast path's step terms,
    # which the next phase carries at sleep level 0
    pytest.importorskip('torch')
    import json
    from pathlib import Path

    import grpo_recipes
    from grpo_recipes.allocconf import DEFAULT
    from grpo_recipes.config import GRPOConfig
    from grpo_recipes.memory.arch import Arch
    from grpo_recipes.memory.estimate import estimate
    from grpo_recipes.memory.inputs import Inputs
    from grpo_recipes.memory.trace import trace_launch
    from grpo_recipes.plan import build_plan

    catalogue = Path(grpo_recipes.__file__).parent / 'model_configs' / 'catalogue.json'
    mc = json.loads(catalogue.read_text())['models']['Qwen/Qwen2.5-1.5B-Instruct']['config']
    argv = ['--rlhf_type', 'grpo', '--tuner_type', 'full', '--per_device_train_batch_size', '8']
    argv += ['--max_completion_length', '512', '--max_length', '512', '--gradient_checkpointing', 'true']
    argv += ['--torch_dtype', 'bfloat16', '--beta', '0', '--use_vllm', 'true', '--vllm_mode', 'colocate']
    cfg, _ = GRPOConfig.from_argv(argv + ['--sleep_level', '0'])
    plan = build_plan(cfg, {'NPROC_PER_NODE': '1', 'CUDA_VISIBLE_DEVICES': '0'}, Hardware(gpus=1))
    traced = trace_launch(cfg, plan, mc, 512, 'Qwen2.5-1.5B', alloc_conf=DEFAULT).cached_after_step_gib
    inp = Inputs(Arch.from_config(mc), 80.0, prompt_len=512, alloc=DEFAULT, handover=swift_handover({}))
    carried = estimate(cfg, plan, inp)[0].phase_parts['rollout']['train_cache']
    assert abs(carried - traced) <= 0.1 * traced
