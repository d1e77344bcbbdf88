"""How each vLLM counts what else holds the GPU when its engine starts (memory.vllm_engine.kv_accounting), and the
start-up failures that follow, per engine and version (read in the PyPI wheels: V0 vllm/worker/worker.py 0.6.3.post1,
0.7.3, 0.8.5; V1 vllm/v1/worker/gpu_worker.py 0.8.5, 0.9.0, 0.9.1, 0.10.1.1, 0.11.0):

- V0 sizes the cache from what the instance itself added and never looks at the free memory at start: with other
  processes holding more than (1 - util) x total, allocating the cache runs out of CUDA memory;
- V1 before 0.9.1 subtracts every byte torch did not allocate in its own process, other processes included
  (vllm PR #14419's test plan: another process at 70% of the card, util 0.2 -> "No available memory for the cache
  blocks"; PR #19312 replaced it with the start snapshot in 0.9.1);
- V1 from 0.9.1 refuses at start when free memory < util x total, then counts only its own increase."""

import json
from pathlib import Path

import pytest

from grpo_recipes.config import GRPOConfig
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.estimate import estimate
from grpo_recipes.memory.inputs import GiB, Inputs
from grpo_recipes.memory.vllm import vllm_checks, vllm_terms
from grpo_recipes.memory.vllm_engine import kv_accounting, uses_v0
from grpo_recipes.plan import build_plan

ROOT = Path(__file__).resolve().parent.parent
QWEN7B = json.loads((ROOT / 'grpo_recipes' / 'model_configs' / 'Qwen2.5-7B-Instruct.json').read_text())
# meta-llama/Llama-3.2-1B config.json (the model of vllm PR #14419's test plan)
LLAMA32_1B = {
    'architectures': ['LlamaForCausalLM'],
    'model_type': 'llama',
    'hidden_size': 2048,
    'intermediate_size': 8192,
    'num_hidden_layers': 16,
    'num_attention_heads': 32,
    'num_key_value_heads': 8,
    'head_dim': 64,
    'vocab_size': 128256,
    'tie_word_embeddings': True,
    'max_position_embeddings': 131072,
    'rope_scaling': {
        'factor': 32.0,
        'high_freq_factor': 4.0,
        'low_freq_factor': 1.0,
        'original_max_position_embeddings': 8192,
        'rope_type': 'llama3',
    },
    'torch_dtype': 'bfloat16',
}
H100 = 79.19  # GiB, as torch reports an H100 80GB


@pytest.mark.parametrize(
    'version, v0, accounting',
    [
        ('0.6.3.post1', True, 'own'),
        ('0.8.5', True, 'own'),  # VLLM_USE_V1=0
        ('0.8.5', False, 'device'),
        ('0.9.0', False, 'device'),
        ('0.9.1', False, 'snapshot'),
        ('0.10.1.1', False, 'snapshot'),
        (None, False, 'snapshot'),  # unknown: today's engine
    ],
)
def test_accounting_per_engine_and_version(version, v0, accounting):
    assert kv_accounting(version, v0) == accounting


def _standalone(version: str, free_fraction: float) -> tuple[dict, list[dict], dict]:
    """vllm PR #14419's test plan: Llama-3.2-1B, TP 1, util 0.2, the LLM class, another process holding the rest of
    ``free_fraction`` of the card (the PR does not name it: an 80 GB H100 here)."""
    cfg, _ = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--use_vllm',
            'true',
            '--vllm_mode',
            'server',
            '--vllm_gpu_memory_utilization',
            '0.2',
        ]
    )
    arch = Arch.from_config(LLAMA32_1B)
    inp = Inputs(arch=arch, capacity_gib=H100, gpu_name='H100 80GB', vllm_version=version, vllm_entry='offline')
    v = vllm_terms(cfg, inp)
    problems: list[dict] = []
    info = vllm_checks(cfg, build_plan(cfg, {}, Hardware()), inp, v, free_fraction * H100 * GiB, problems)
    return v, problems, info


def test_v1_before_0_9_1_counts_another_process_against_the_cache():
    """With 70% of the card held elsewhere, util 0.2: V1 0.8.5 has no cache left; 0.9.1 and V0 start."""
    _, problems, info = _standalone('0.8.5', 0.3)
    assert info['kv_accounting'] == 'device'
    assert [p['check'] for p in problems] == ['vllm.no-kv-memory']
    assert 'No available memory for the cache blocks' in problems[0]['message']
    assert 'other processes' in problems[0]['message']
    for version in ('0.9.1', '0.7.3'):  # 30% free >= 20% asked: the start check passes, the cache is its own
        v, problems, info = _standalone(version, 0.3)
        assert problems == [] and v['kv_cache'] > 0, (version, problems)
    assert _standalone('0.7.3', 0.3)[2]['kv_accounting'] == 'own'


def test_the_cache_is_smaller_by_what_the_device_holds_only_before_0_9_1():
    old, _, _ = _standalone('0.9.0', 0.9)
    new, _, _ = _standalone('0.9.1', 0.9)
    assert old['requested'] == new['requested']
    assert new['kv_cache'] - old['kv_cache'] == pytest.approx(0.1 * H100 * GiB)


def _colocate(version: str, util: float) -> list:
    """ms-swift colocate, Qwen2.5-7B full on one H100: the trainer's weights are on the GPU when vLLM starts."""
    cfg, _ = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--tuner_type',
            'full',
            '--use_vllm',
            'true',
            '--vllm_mode',
            'colocate',
            '--vllm_gpu_memory_utilization',
            str(util),
            '--vllm_max_model_len',
            '4096',
            '--max_completion_length',
            '2048',
            '--per_device_train_batch_size',
            '1',
            '--num_generations',
            '8',
            '--sleep_level',
            '1',
        ]
    )
    arch = Arch.from_config(QWEN7B)
    inp = Inputs(arch=arch, capacity_gib=H100, gpu_name='H100 80GB', vllm_version=version, prompt_len=512)
    return estimate(cfg, build_plan(cfg, {}, Hardware(gpus=1)), inp)


def _checks(m) -> list[str]:
    return [p['check'] for p in m.problems]


def test_a_colocated_trainer_fails_each_version_its_own_way():
    """util 0.8 beside the trainer's 15 GiB of weights: more than the card has free."""
    snap = _colocate('0.10.1.1', 0.8)[0]
    assert _checks(snap) == ['vllm.startup-free-memory']
    assert 'Free memory on device' in snap.problems[0]['message']
    v0 = _colocate('0.6.3.post1', 0.8)[0]
    assert _checks(v0) == ['vllm.startup-free-memory']
    assert 'CUDA out of memory while allocating the KV cache' in v0.problems[0]['message']
    # V0's cache is not smaller by the trainer's 16 GiB (its profile differs from V1's by less than a GiB)
    assert v0.vllm['kv_accounting'] == 'own' and abs(v0.vllm['kv_cache_gib'] - snap.vllm['kv_cache_gib']) < 1
    # V1 0.8.5 has no check at start: its cache shrinks by what the trainer holds, and still starts here
    dev = _colocate('0.8.5', 0.8)[0]
    assert _checks(dev) == []
    assert 0 < dev.vllm['kv_cache_gib'] < snap.vllm['kv_cache_gib'] - 15


def test_a_utilisation_that_fits_beside_the_trainer_fails_only_on_v1_before_0_9_1():
    """util 0.3 (23.8 GiB): room on the card, and vLLM's weights and profile leave a cache of its own; V1 0.8.5
    subtracts the trainer's weights and the CUDA context too and has none left."""
    assert _checks(_colocate('0.10.1.1', 0.3)[0]) == []
    assert _checks(_colocate('0.7.3', 0.3)[0]) == []
    assert _checks(_colocate('0.8.5', 0.3)[0]) == ['vllm.no-kv-memory']


def test_num_gpu_blocks_override_and_block_size():
    """V0 checks the overridden block count (worker.py raise_if_cache_size_invalid, after llm_engine.py
    _initialize_kv_caches replaced the profiled count); the token capacity is in whole blocks of block_size."""
    cfg, _ = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--use_vllm',
            'true',
            '--vllm_mode',
            'server',
            '--vllm_max_model_len',
            '4096',
            '--vllm_engine_kwargs',
            json.dumps({'num_gpu_blocks_override': 100}),
        ]
    )
    arch = Arch.from_config(QWEN7B)
    inp = Inputs(arch=arch, capacity_gib=H100, gpu_name='H100 80GB', vllm_version='0.7.3')
    assert uses_v0('0.7.3')
    problems: list[dict] = []
    info = vllm_checks(cfg, build_plan(cfg, {}, Hardware()), inp, vllm_terms(cfg, inp), H100 * GiB, problems)
    assert info['kv_tokens'] == 1600
    assert [p['check'] for p in problems] == ['vllm.kv-one-sequence']
    assert 'stored in KV cache (1600)' in problems[0]['message']
    cfg2, _ = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--use_vllm',
            'true',
            '--vllm_mode',
            'server',
            '--vllm_engine_kwargs',
            '{"block_size": 128}',
        ]
    )
    inp2 = Inputs(arch=arch, capacity_gib=H100, gpu_name='H100 80GB', vllm_version='0.10.1.1')
    info2 = vllm_checks(cfg2, build_plan(cfg2, {}, Hardware()), inp2, vllm_terms(cfg2, inp2), H100 * GiB, [])
    assert info2['kv_tokens'] > 0 and info2['kv_tokens'] % 128 == 0


def test_a_logged_flashinfer_sampler_sizes_the_profile():
    """github.com/dennislee22/vLLM-benchmarking log/vllm-7B-1gpuA10080GB-0.25GRAM.log (vLLM 0.10.1.1, V1,
    Qwen2-7B-Instruct on an A100 80GB, util 0.25, max_model_len 16384, the API server): the log says 'Using
    FlashInfer for top-p & top-k sampling.' and 'Available KV cache memory: 5.01 GiB'. Quoted, the line decides the
    profiling sampler; unquoted, a pip install is taken to sample natively (the larger reservation)."""
    from grpo_recipes.memory.calibrate import predict

    case = {
        'id': 'dennislee',
        'kind': 'vllm_startup',
        'framework': 'vllm',
        'framework_version': '0.10.1.1',
        'gpu': 'A100 80GB',
        'num_gpus': 1,
        'gpu_total_gib': 79.15,
        'config': {'vllm_gpu_memory_utilization': 0.25, 'vllm_max_model_len': 16384, 'torch_dtype': 'bfloat16'},
        'model_config': QWEN7B,  # Qwen2-7B-Instruct has Qwen2.5-7B's memory fields
        'outcome': {'ran_ok': True, 'kv_cache_gib_per_gpu': 5.01},
    }
    native = predict(json.loads(json.dumps(case)))
    case['quote'] = 'INFO [topk_topp_sampler.py:50] Using FlashInfer for top-p & top-k sampling.'
    logged = predict(json.loads(json.dumps(case)))
    assert native['sampler'] == 'native' and logged['sampler'] == 'flashinfer'
    assert "the case's vLLM log" in logged['sampler_why']
    assert abs(logged['kv_cache_gib'] / 5.01 - 1) < 0.03 < abs(native['kv_cache_gib'] / 5.01 - 1)


def _capture(util: float, eager: bool = False, version: str = '0.6.4.post1') -> list[dict]:
    """Qwen2.5-7B at TP 2 on 16 GB cards (15.77 GiB, as vLLM logged them in vllm-project/vllm#11251: V0
    0.6.4.post1, 7.51 GiB of weights per GPU, OOM while capturing CUDA graphs at util 0.95)."""
    argv = ['--rlhf_type', 'grpo', '--use_vllm', 'true', '--vllm_mode', 'server', '--vllm_tensor_parallel_size', '2']
    argv += ['--vllm_gpu_memory_utilization', str(util), '--vllm_max_model_len', '8192']
    argv += ['--vllm_enforce_eager', 'true'] if eager else []
    cfg, _ = GRPOConfig.from_argv(argv)
    inp = Inputs(arch=Arch.from_config(QWEN7B), capacity_gib=15.77, gpu_name='RTX 4060 Ti 16GB', vllm_version=version)
    problems: list[dict] = []
    vllm_checks(cfg, build_plan(cfg, {}, Hardware()), inp, vllm_terms(cfg, inp), (15.77 - 1.0) * GiB, problems)
    return problems


def test_graphs_captured_beyond_the_reservation_run_out_of_memory():
    """Before vLLM's profiler estimated graphs, they were captured after the KV cache filled util x total and came on
    top (V0 worker.py initialize_cache -> capture_model; V1 gpu_worker.py compile_or_warm_up_model): a utilisation
    that leaves less than the graphs' allowance beyond the CUDA context fails there (vllm-project/vllm#11251, #19186);
    eager mode, or a lower utilisation, starts."""
    problems = _capture(0.93)
    assert [p['check'] for p in problems] == ['vllm.graph-capture-oom']
    assert 'capturing CUDA graphs' in problems[0]['message']
    assert _capture(0.93, eager=True) == []
    assert _capture(0.85) == []
    # from 0.21 the profiler takes the graphs out of the KV budget: nothing comes on top
    assert [p['check'] for p in _capture(0.93, version='0.23.0')] == []


def test_before_0_9_1_the_colocated_engine_holds_util_x_total_with_the_trainer_inside():
    """V1 0.8.5 sizes its cache so that everything on the card comes to util x total: the engine's own reservation is
    that less what the trainer held at start, and the rollout phase is util x total (+ graphs) beside the trainer's
    later terms; 0.10.1.1 reserves util x total for itself."""
    old, new = _colocate('0.8.5', 0.5)[0], _colocate('0.10.1.1', 0.5)[0]
    held_at_start = sum(new.phase_parts['startup'].values()) - new.phase_parts['startup']['vllm_reserved']
    assert new.phase_parts['rollout']['vllm_reserved'] == pytest.approx(0.5 * H100, abs=0.01)
    assert old.phase_parts['rollout']['vllm_reserved'] == pytest.approx(0.5 * H100 - held_at_start, abs=0.02)
    assert sum(old.phase_parts['startup'].values()) == pytest.approx(0.5 * H100, abs=0.02)
