"""Checkpoints that arrive quantized: what the trainer (transformers) and vLLM hold for them.

- A bitsandbytes checkpoint (``quantization_config.quant_method 'bitsandbytes'``, the ``-bnb-4bit`` uploads) loads at
  its own bits whether or not the launch says ``--quant_bits 4`` / ``load_in_4bit``; the modules its
  ``llm_int8_skip_modules`` names stay 16-bit (unsloth's dynamic 4-bit uploads keep whole layers there). Which
  modules that is, is held to transformers' own ``should_convert_module`` (differential, the installed 5.19).
- A compressed-tensors checkpoint (llm-compressor's format) is held packed by vLLM; the bytes per weight below are
  worked out by hand from the parameters each vLLM 0.17.1 scheme creates
  (model_executor/layers/quantization/compressed_tensors/schemes/*.py ``create_weights``). The published start-up
  logs of such checkpoints are in tests/data/vllm_published_cases.jsonl (test_vllm_published.py)."""

import random

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.vllm_startup import PRESET_WEIGHTS, compressed_tensors_bytes_per_weight
from grpo_recipes.models import builtin_config

QWEN25_7B = builtin_config('Qwen2.5-7B-Instruct.json')
# the quantization_config bitsandbytes writes into a 4-bit checkpoint's config.json (transformers
# BitsAndBytesConfig.to_dict, as in the unsloth/*-bnb-4bit uploads)
BNB4 = {
    'quant_method': 'bitsandbytes',
    '_load_in_4bit': True,
    '_load_in_8bit': False,
    'load_in_4bit': True,
    'load_in_8bit': False,
    'bnb_4bit_compute_dtype': 'bfloat16',
    'bnb_4bit_quant_storage': 'uint8',
    'bnb_4bit_quant_type': 'nf4',
    'bnb_4bit_use_double_quant': True,
    'llm_int8_skip_modules': None,
}
LAUNCH = (
    'swift rlhf --rlhf_type grpo --model some/model --tuner_type lora --use_vllm false --dataset AI-MO/NuminaMath-TIR '
    '--reward_funcs accuracy --max_length 512 --max_completion_length 512 --per_device_train_batch_size 8 '
    '--num_generations 8'
)


def report_for(config: dict, extra: str = ''):
    launch = read_launch(['--', *f'{LAUNCH} {extra}'.split()], environ={})
    hardware = Hardware(gpus=1, gpu_type='A100-80G', source='flags')
    return check_launch(launch, hardware, packages={'ms-swift': '4.6.0'}, model_config=config)


def weights_gib(config: dict, extra: str = '') -> float:
    return report_for(config, extra).memory[0].components['weights']


def test_a_bnb_checkpoint_is_planned_at_its_own_bits_without_quant_bits():
    plain = weights_gib(QWEN25_7B)
    checkpoint = weights_gib({**QWEN25_7B, 'quantization_config': BNB4})
    asked = weights_gib(QWEN25_7B, '--quant_method bnb --quant_bits 4')
    assert checkpoint == asked
    assert checkpoint < 0.45 * plain  # 4-bit linear layers; the embeddings and lm_head stay 16-bit
    said = report_for({**QWEN25_7B, 'quantization_config': BNB4}).assumptions
    assert any('bitsandbytes 4-bit' in a and 'without --quant_bits' in a for a in said)


def test_skip_modules_stay_16_bit_in_training():
    skip = ['lm_head', 'model.layers.0.mlp', 'model.layers.1.self_attn']
    kept = weights_gib({**QWEN25_7B, 'quantization_config': {**BNB4, 'llm_int8_skip_modules': skip}})
    plain4 = weights_gib({**QWEN25_7B, 'quantization_config': BNB4})
    a = Arch.from_config(QWEN25_7B)
    h, i, q, kv = a.hidden, a.intermediate, a.q_dim, a.kv_dim
    layer0_mlp, layer1_attn = 3 * h * i, 2 * h * q + 2 * h * kv  # the two modules the keys name
    # each kept weight costs 2 bytes instead of NF4's ~0.52 (4 bits, a byte absmax per 64 and fp32 per 256 of those)
    extra = (layer0_mlp + layer1_attn) * (2 - 0.5 - 1 / 64 - 4 / (64 * 256)) / 2**30
    assert kept - plain4 == pytest.approx(extra, abs=0.02)


NAMES = [n for n, _ in Arch.from_config(QWEN25_7B).linear_modules()] + ['lm_head', 'model.embed_tokens']
KEYS = [
    'lm_head',
    'down_proj',
    'mlp',
    'self_attn',
    'model.layers.3',
    'model.layers.3.mlp',
    'model.layers.1',  # a prefix of model.layers.1x as text, not before a dot
    'layers.2.mlp',  # matches nothing at the start of a name
    r'model\.layers\.[0-3]\.mlp\.up_proj',
    'model.layers.*.q_proj',
    'q_proj',
    'visual',
]


@pytest.mark.parametrize('seed', range(40))
def test_skip_modules_match_as_transformers_matches_them(seed):
    """Differential: which linear layers ``Arch.skipped_linear_params`` keeps at 16 bits against the installed
    transformers' ``should_convert_module`` on the same names and keys."""
    from transformers.quantizers.quantizers_utils import should_convert_module

    rng = random.Random(seed)
    keys = rng.sample(KEYS, rng.randint(1, 4))
    a = Arch.from_config({**QWEN25_7B, 'quantization_config': {**BNB4, 'llm_int8_skip_modules': keys}})
    sizes = dict(a.linear_modules())
    theirs = sum(sizes[n] for n in sizes if not should_convert_module(n, keys))
    assert a.skipped_linear_params() == theirs, keys


def test_vllm_matches_skip_modules_on_its_fused_names():
    """vLLM (quantization/bitsandbytes.py ``is_layer_skipped_bnb``, 0.17.1): a key skips a layer when it is one of
    the layer's dot-separated components or a leading run of them, on vLLM's names (qkv_proj, gate_up_proj)."""
    a = Arch.from_config(QWEN25_7B)
    h, i, q, kv, layers = a.hidden, a.intermediate, a.q_dim, a.kv_dim, a.layers

    def skipped(keys):
        return Arch.from_config(
            {**QWEN25_7B, 'quantization_config': {**BNB4, 'llm_int8_skip_modules': keys}}
        ).skipped_linear_params('vllm')

    assert skipped(['down_proj']) == layers * i * h
    assert skipped(['q_proj']) == 0  # vLLM holds q, k and v as one qkv_proj
    assert skipped(['model.layers.2']) == h * (q + 2 * kv) + q * h + 3 * h * i
    assert skipped(['layers.2']) == 0  # neither a component nor a leading run
    assert skipped(['mlp']) == layers * 3 * h * i


def ct(**weights):
    return {
        'quant_method': 'compressed-tensors',
        'config_groups': {'group_0': {'targets': ['Linear'], 'weights': weights}},
    }


@pytest.mark.parametrize(
    'weights, per_weight',
    [
        # CompressedTensorsWNA16: int32-packed 4-bit values, a 16-bit scale per group of 128
        (dict(num_bits=4, type='int', strategy='group', group_size=128, symmetric=True), 0.5 + 2 / 128),
        # ... and an int32-packed 4-bit zero point per group when asymmetric
        (dict(num_bits=4, type='int', strategy='group', group_size=128, symmetric=False), 0.5 + 2.5 / 128),
        # CompressedTensorsW8A8Fp8, channel strategy: fp8 weights and one fp32 scale per output row (of 3584 inputs)
        (dict(num_bits=8, type='float', strategy='channel', symmetric=True), 1 + 4 / 3584),
        # W8A8Fp8 block strategy: an fp32 scale per 128 x 128 block
        (dict(num_bits=8, type='float', strategy='block', block_structure=[128, 128]), 1 + 4 / 128**2),
        # CompressedTensorsW4A4Nvfp4: uint8 pairs and an fp8 scale per 16
        (dict(num_bits=4, type='float', strategy='tensor_group', group_size=16), 0.5 + 1 / 16),
    ],
)
def test_compressed_tensors_bytes_per_weight(weights, per_weight):
    assert compressed_tensors_bytes_per_weight(ct(**weights), 3584) == pytest.approx(per_weight)


def test_compressed_tensors_without_bits_is_planned_at_16():
    assert compressed_tensors_bytes_per_weight({'quant_method': 'compressed-tensors'}, 3584) is None
    assert compressed_tensors_bytes_per_weight(ct(num_bits=16, type='float'), 3584) is None


def test_preset_schemes_are_compressed_tensors_own():
    """A quantization_config naming an llm-compressor preset (``scheme``) is planned as that preset's weights:
    differential against the installed compressed-tensors' PRESET_SCHEMES."""
    from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES

    keys = ('num_bits', 'type', 'strategy', 'group_size', 'symmetric', 'block_structure')
    for name, weights in PRESET_WEIGHTS.items():
        real = PRESET_SCHEMES[name]['weights'].model_dump(mode='json')
        assert {k: real.get(k) for k in keys} == {k: weights.get(k, {'symmetric': True}.get(k)) for k in keys}, name
        assert compressed_tensors_bytes_per_weight(
            {'quant_method': 'compressed-tensors', 'scheme': f'{name.lower()} (as a summary names it)'}, 3584
        ) == compressed_tensors_bytes_per_weight(ct(**real), 3584)
    assert compressed_tensors_bytes_per_weight({'quant_method': 'compressed-tensors', 'scheme': 'custom'}, 3584) is None


def test_every_module_is_named_once():
    for fused in (False, True):
        names = [n for n, _ in Arch.from_config(QWEN25_7B).linear_modules(fused)]
        assert len(names) == len(set(names))
        assert (
            sum(p for _, p in Arch.from_config(QWEN25_7B).linear_modules(fused))
            == Arch.from_config(QWEN25_7B).linear_params()
        )
