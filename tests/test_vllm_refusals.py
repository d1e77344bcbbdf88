"""What vLLM refuses when its engine starts, before it measures memory, by release and card; and its default
gpu_memory_utilization by release. The facts are read in the vLLM sdists named (PyPI): 0.8.5 and 0.9.0
(vllm/config.py ``_get_and_verify_dtype``, vllm/v1/worker/gpu_worker.py ``_check_if_gpu_supports_dtype``), 0.19.1 and
0.20.0 (vllm/config/cache.py ``CacheConfig.gpu_memory_utilization``, vllm/entrypoints/llm.py ``LLM.__init__``).
vLLM cannot be installed or run here (no GPU), so the expected values are those lines, not the code under test."""

import copy

import pytest
from conftest import SHARED

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.cases import load_cases
from grpo_recipes.memory.scoring import score
from grpo_recipes.memory.vllm_engine import default_gpu_memory_utilization, vllm_dtype


@pytest.mark.parametrize(
    'arg, ckpt, card, version, dtype, refused',
    [
        ('bfloat16', 'bfloat16', 'Tesla T4', '0.10.1', 'bfloat16', True),  # explicit: every release stops
        (None, 'bfloat16', 'Tesla T4', '0.8.5', 'bfloat16', True),  # "auto" kept bfloat16 before 0.9.0
        ('auto', 'bfloat16', 'V100-SXM2-32GB', '0.9.0', 'float16', False),  # PR #17265: falls back
        (None, 'bfloat16', 'A100 80GB', '0.8.5', 'bfloat16', False),  # compute capability 8.0
        (None, 'float32', 'Tesla T4', '0.8.5', 'float16', False),  # "auto" runs a float32 checkpoint in float16
        (None, None, 'Tesla T4', '0.8.5', 'float16', False),  # no dtype in config.json: float32, then float16
        ('half', 'bfloat16', 'Tesla T4', '0.8.5', 'float16', False),  # the fix vLLM's message names
        ('float', 'bfloat16', 'RTX 2080 Ti', '0.4.0', 'float32', False),
    ],
)
def test_the_dtype_vllm_runs_and_whether_it_refuses_the_card(arg, ckpt, card, version, dtype, refused):
    got, refusal, note = vllm_dtype(arg, ckpt, card, version)
    assert got == dtype and bool(refusal) is refused and note is None
    if refused:
        assert refusal.startswith('Bfloat16 is only supported on GPUs with compute capability of at least 8.0.')


def test_an_unknown_release_on_an_old_card_is_said_not_guessed():
    dtype, refusal, note = vllm_dtype(None, 'bfloat16', 'Tesla T4', None)
    assert (dtype, refusal) == ('float16', None) and '0.9.0' in note and 'earlier releases stop' in note


def test_default_utilisation_by_release():
    assert [default_gpu_memory_utilization(v) for v in ('0.8.5', '0.19.1', '0.20.0', '0.23.0', None)] == [
        0.9,
        0.9,
        0.92,
        0.92,
        0.9,
    ]


QWEN7B_CASE = 'vllm-dennislee-qwen2-7b-1gpua10080gb-0.25gram'  # Qwen2-7B-Instruct: 28 heads, 32,768 positions


def _scored(**over) -> dict:
    case = copy.deepcopy(
        next(c for c in load_cases(SHARED / 'calibration' / 'memory_cases.jsonl') if c['id'] == QWEN7B_CASE)
    )
    case['outcome'] = {'ran_ok': True}
    for k, v in over.items():
        if k in ('gpu', 'gpu_total_gib', 'framework_version', 'num_gpus'):
            case[k] = v
        else:
            case['config'][k] = v
    return score([case])['per_case'][0]['predicted']


def test_calibrate_predicts_the_start_up_refusals():
    assert _scored()['fits'] is True
    assert _scored(vllm_tensor_parallel_size=8, num_gpus=8)['reasons'] == ['vllm.tp-heads']  # 28 % 8
    assert _scored(vllm_max_model_len=65536, vllm_gpu_memory_utilization=0.9)['reasons'] == [
        'length.vllm-exceeds-model'
    ]
    allowed = _scored(vllm_max_model_len=65536, vllm_gpu_memory_utilization=0.9, VLLM_ALLOW_LONG_MAX_MODEL_LEN='1')
    assert allowed['fits'] is True
    t4 = {'gpu': 'Tesla T4', 'gpu_total_gib': 14.58, 'vllm_gpu_memory_utilization': 0.9, 'vllm_max_model_len': 1024}
    assert 'vllm.bf16-card' in _scored(**t4, framework_version='0.8.5', torch_dtype='auto')['reasons']
    assert 'vllm.bf16-card' not in _scored(**t4, framework_version='0.10.1', torch_dtype='auto')['reasons']
    assert 'vllm.bf16-card' in _scored(**t4, framework_version='0.10.1', torch_dtype='bfloat16')['reasons']


def test_calibrate_takes_the_release_s_default_utilisation():
    base = {'vllm_gpu_memory_utilization': None, 'vllm_max_model_len': 4096}
    old, new = _scored(**base, framework_version='0.19.1'), _scored(**base, framework_version='0.20.0')
    assert new['kv_cache_gib'] - old['kv_cache_gib'] == pytest.approx(0.02 * 79.15, abs=0.01)


@pytest.mark.parametrize('vllm, rule', [('0.8.5', 'error'), ('0.10.1.1', None), (None, 'warning')])
def test_trl_leaves_vllm_its_auto_dtype_on_an_old_card(vllm, rule):
    # TRL's colocated engine passes vLLM no dtype (trl/generation/vllm_generation.py, LLM(...), TRL 0.29.1)
    argv = [
        'accelerate',
        'launch',
        '--num_processes',
        '2',
        'train.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
    ]
    argv += ['--use_vllm', 'true', '--vllm_mode', 'colocate', '--vllm_gpu_memory_utilization', '0.3']
    argv += ['--per_device_train_batch_size', '4', '--num_generations', '8']
    packages = {'trl': '0.29.1', 'vllm': vllm}
    report = check_launch(
        read_launch(argv, environ={}), Hardware(gpus=2, gpu_type='V100-32G', source='flags'), packages=packages
    )
    found = [f for f in report.findings if f.rule == 'vllm.bf16-card']
    assert [f.severity for f in found] == ([rule] if rule else [])


@pytest.mark.parametrize(
    'method, card, vllm, fires',
    [
        ('fp8', 'V100-32G', '0.20.0', True),  # Marlin FP8 needs 7.5 from 0.14.0
        ('fp8', 'T4', '0.13.0', True),  # and 8.0 before it
        ('fp8', 'T4', '0.14.0', False),
        ('awq', 'V100-32G', '0.10.1.1', True),  # AWQ needs 7.5 in every release read
        ('gptq', 'V100-32G', '0.10.1.1', False),  # GPTQ 6.0
        ('fp8', 'A100-80G', '0.9.0', False),
    ],
)
def test_vllm_refuses_a_quantization_the_card_is_too_old_for(method, card, vllm, fires):
    from helpers import PACKAGES_OK, make

    over = {'use_vllm': True, 'vllm_mode': 'colocate', 'vllm_quantization': method, 'torch_dtype': 'float16'}
    _, report = make(over, hw=Hardware(gpus=8, gpu_type=card, source='flags'), packages={**PACKAGES_OK, 'vllm': vllm})
    found = [f for f in report.findings if f.rule == 'vllm.quant-card']
    assert bool(found) is fires
    if fires:
        assert f'The quantization method {method} is not supported for the current GPU' in found[0].message


def test_calibrate_stops_an_awq_checkpoint_on_a_v100():
    awq = {'quant_method': 'awq', 'bits': 4, 'group_size': 128}
    case = copy.deepcopy(
        next(c for c in load_cases(SHARED / 'calibration' / 'memory_cases.jsonl') if c['id'] == QWEN7B_CASE)
    )
    case.update(gpu='V100 32GB', gpu_total_gib=31.74, outcome={'ran_ok': True})
    case['config'].update(torch_dtype='float16', vllm_gpu_memory_utilization=0.9, vllm_max_model_len=4096)
    case['model_config'] = {**case['model_config'], 'quantization_config': awq}
    assert score([case])['per_case'][0]['predicted']['reasons'] == ['vllm.quant-card']
