"""The throughput planner's newer terms: a per-tensor server weight sync (TRL), Megatron-SWIFT launches' step time,
and the recipe headers' GPU-hours per GSM8K epoch. Behaviour only; nothing is timed."""

import re

from conftest import ROOT
from test_speed import QWEN7B, _cfg, _predict

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.models import load_model_config
from grpo_recipes.speed import constants as K
from grpo_recipes.speed.model import weight_tensors

H100 = Hardware(gpus=8, gpu_type='H100-80G', source='flags')
# Qwen2-0.5B's shape (huggingface.co/Qwen/Qwen2-0.5B config.json): its checkpoint holds 290 tensors
QWEN2_05B = {
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


def test_weight_tensors_counts_a_checkpoints_tensors():
    assert weight_tensors(Arch.from_config(QWEN2_05B)) == 290  # 24 x 12 + embeddings + final norm (tied lm_head)
    assert weight_tensors(QWEN7B) == 28 * 12 + 3  # untied lm_head


def test_a_per_tensor_server_sync_costs_each_tensor_and_a_bucketed_one_does_not():
    cfg = _cfg(vllm_mode='server', vllm_server_host=['127.0.0.1'])
    trl = _predict(cfg, framework='trl')
    swift = _predict(cfg, framework='swift')
    calls = trl.detail['per_tensor_calls']
    assert abs(calls - weight_tensors(QWEN7B) * K.SERVER_SYNC_PER_TENSOR_S) < 1e-3
    assert swift.detail['per_tensor_calls'] == 0
    assert trl.phases['weight_sync'] > swift.phases['weight_sync']
    # colocated engines load the weights in-process: no per-tensor requests
    assert 'per_tensor_calls' not in _predict(_cfg(), framework='trl').detail


def _megatron(*extra: str, gpus: int = 8, **kw):
    argv = [
        f'NPROC_PER_NODE={gpus}',
        'megatron',
        'rlhf',
        '--rlhf_type',
        'grpo',
        '--model',
        'Qwen/Qwen3-8B',
        '--micro_batch_size',
        '1',
        '--global_batch_size',
        '64',
        '--num_generations',
        '8',
        '--use_vllm',
        'true',
        '--vllm_mode',
        'colocate',
        '--vllm_gpu_memory_utilization',
        '0.4',
        '--max_length',
        '1024',
        '--max_completion_length',
        '1024',
        '--vllm_max_model_len',
        '2048',
        '--reward_funcs',
        'accuracy',
        *extra,
    ]
    return check_launch(
        read_launch(['--', *argv]),
        H100,
        packages={},
        model_config=load_model_config('Qwen/Qwen3-8B'),
        **kw,
    )


def test_a_megatron_grpo_launch_gets_a_step_time_in_the_speed_field():
    rep = _megatron()
    est = rep.speed
    assert est is not None and est.step_seconds_low <= est.step_seconds <= est.step_seconds_high
    assert set(est.phases) == {'rollout', 'logprobs', 'train', 'weight_sync', 'other'}
    d = rep.to_dict()
    assert d['speed']['step_seconds'] == est.step_seconds
    assert any(line.startswith('Predicted speed:') for line in rep.summary_lines())


def test_megatron_pipeline_bubble_and_tensor_parallel_cost():
    base = _megatron().speed
    pp = _megatron('--pipeline_model_parallel_size', '2').speed
    # 64 completions over DP 4 at micro-batch 1: 16 micro-batches, bubble (2 - 1) / 16
    assert abs(pp.detail['pipeline_bubble'] - 1 / 16) < 1e-3
    assert base.detail['pipeline_bubble'] == 0
    tp = _megatron('--tensor_model_parallel_size', '2', '--sequence_parallel', 'true').speed
    # same GPUs per DP rank's work as PP 2, plus the all-reduces and no bubble
    assert tp.phases['train'] > pp.phases['train'] / (1 + 1 / 16)


def test_megatron_longer_completions_and_a_kl_term_cost_time():
    short = _megatron(completion_mean=200).speed
    long = _megatron(completion_mean=1000).speed
    assert long.step_seconds > short.step_seconds
    nokl = _megatron('--beta', '0', completion_mean=500).speed
    kl = _megatron(completion_mean=500).speed  # ms-swift's default beta 0.04: a reference forward too
    assert abs(kl.phases['logprobs'] - 2 * nokl.phases['logprobs']) < 0.01 * kl.phases['logprobs']


def test_megatron_without_vllm_says_why_not():
    rep = _megatron('--use_vllm', 'false')
    assert rep.speed is None and 'vLLM' in rep.speed_unchecked


def test_recipe_headers_give_gpu_hours_per_gsm8k_epoch_and_the_readme_shows_them():
    readme = (ROOT / 'README.md').read_text()
    rows = re.findall(r'^\| ([\w.\-]+/[\w.\-]+) \|.*\| \d+ \(\d+-\d+\) \| (\d+) \|', readme, re.M)
    assert rows
    for name, cell in rows:
        header = (ROOT / 'recipes' / f'{name}.yaml').read_text()
        m = re.search(
            r'# speed \(predicted, [^)]*\): \d+ s/step \(band \d+-\d+\), ([\d.]+) s/prompt, (\d+) GPU-hours per '
            r'GSM8K epoch \(7,473 prompts, (\d+) GPUs\)',
            header,
        )
        assert m, name
        s_per_prompt, hours, gpus = float(m.group(1)), int(m.group(2)), int(m.group(3))
        # 7,473 prompts at the header's (rounded) seconds per prompt on its GPUs
        assert abs(hours - 7473 * s_per_prompt * gpus / 3600) <= max(1.0, 0.01 * hours), name
        assert cell == m.group(2), name
