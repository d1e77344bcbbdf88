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
        # 7,473 prompts at the header's seconds per prompt on its GPUs; the header rounds s/prompt to 0.1 s (up to
        # 0.05 s off per prompt) and the hours to 1
        slack = 7473 * 0.05 * gpus / 3600 + 0.5
        assert abs(hours - 7473 * s_per_prompt * gpus / 3600) <= slack, name
        assert cell == m.group(2), name


def test_hf_generate_moves_the_kv_cache_several_times_under_a_padding_mask():
    """transformers' DynamicCache concatenation (read + write) and, with a padding mask on CUDA, repeat_kv's copy out
    to every query head (read + write x heads / kv_heads) and attention's read of it."""
    from grpo_recipes.speed.model import hf_kv_passes

    assert QWEN7B.heads // QWEN7B.kv_heads == 7
    assert hf_kv_passes(QWEN7B, 16) == 3 + 2 * 7
    assert hf_kv_passes(QWEN7B, 1) == 3  # one row: no padding mask, no repeat_kv copy
    mha = Arch.from_config({**QWEN2_05B, 'num_key_value_heads': 14})
    assert hf_kv_passes(mha, 16) == 5


def test_hf_generate_pays_the_stop_words_check_per_sequence_and_vllm_does_not():
    hf8 = _predict(_cfg(use_vllm=False, per_device_train_batch_size=8))
    hf16 = _predict(_cfg(use_vllm=False, per_device_train_batch_size=16))
    grow_ms = hf16.detail['decode_step_ms'] - hf8.detail['decode_step_ms']
    assert grow_ms >= 8 * K.HF_STOPWORDS_PER_SEQ_S * 1e3 - 0.01  # decode_step_ms is rounded to 0.01 ms
    # the per-step host floor: even a one-sequence HF step pays the loop's own cost
    hf1 = _predict(_cfg(use_vllm=False, per_device_train_batch_size=1))
    assert hf1.detail['decode_step_ms'] >= (K.HF_STEP_FIXED_S + K.HF_STOPWORDS_PER_SEQ_S) * 1e3


def test_an_eager_step_lasts_the_longer_of_the_hosts_issue_time_and_the_gpus_time():
    from grpo_recipes.speed.model import POINT, _decode_step
    from grpo_recipes.speed.specs import SPECS

    h100 = SPECS['H100-80G']
    w = QWEN7B.weight_bytes()
    gpu = _decode_step(QWEN7B, h100, POINT, w, 16, 600, 1, engine='hf')
    assert _decode_step(QWEN7B, h100, POINT, w, 16, 600, 1, 10 * gpu, engine='hf') == 10 * gpu  # host-bound
    assert _decode_step(QWEN7B, h100, POINT, w, 16, 600, 1, gpu / 10, engine='hf') == gpu  # hidden behind the GPU


def test_the_vllm_step_host_cost_dominates_a_small_models_decode_step():
    from grpo_recipes.speed.model import POINT, _decode_step
    from grpo_recipes.speed.specs import SPECS

    small = Arch.from_config(QWEN2_05B)
    h100 = SPECS['H100-80G']
    for arch in (small, QWEN7B):
        vllm = _decode_step(arch, h100, POINT, arch.weight_bytes(), 16, 600, 1)
        hf = _decode_step(arch, h100, POINT, arch.weight_bytes(), 16, 600, 1, engine='hf')
        assert abs(vllm - hf - K.VLLM_STEP_HOST_S[0]) < 1e-9
    share = [
        K.VLLM_STEP_HOST_S[0] / _decode_step(a, h100, POINT, a.weight_bytes(), 16, 600, 1) for a in (small, QWEN7B)
    ]
    assert share[0] > 0.5 > share[1]


def test_padding_free_trains_on_the_real_tokens():
    padded = _predict(_cfg(), completion_mean=256)
    packed = _predict(_cfg(padding_free=True), completion_mean=256)
    assert packed.phases['train'] < padded.phases['train'] / 2
    assert packed.phases['logprobs'] < padded.phases['logprobs']
    # every row at the cap and every prompt at the padded length: nothing to save
    full = dict(completion_mean=1024, prompt_mean=256, prompt_pad=256)
    assert _predict(_cfg(padding_free=True), **full).phases['train'] == _predict(_cfg(), **full).phases['train']


def test_the_stop_words_check_makes_two_device_round_trips_per_sequence():
    """The op counts HF_STOPWORDS_PER_SEQ_S is built on, from ms-swift's own StopWordsCriteria (nothing timed): per
    sequence one .item() (a device-to-host copy) and one assignment into a device tensor (a host-to-device copy)."""
    import torch
    from conftest import load_script

    bench = load_script('bench/bench_hf_generate_host.py')
    from swift.template.utils import StopWordsCriteria
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(bench.TOKENIZER))
    ids = torch.randint(0, 151000, (5, 200))
    crit = StopWordsCriteria(tok, ['<|endoftext|>', '<|im_end|>'])
    crit(ids[:, :100], None)
    ops = bench.dispatched(lambda: crit(ids, None))
    assert ops == {'_local_scalar_dense': 5, 'copy_': 5}
