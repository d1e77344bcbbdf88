"""vLLM start-up terms (grpo_recipes/vllm_startup.py), each against figures worked out by hand from vLLM's code.

Versions read: vLLM 0.10.1.1 and 0.23.0 (PyPI wheels); the file and function each test models are named in it.
No GPU is involved: these are vLLM's own size rules, evaluated on the published configs.
"""

import json

import pytest

from grpo_recipes.config import GRPOConfig
from grpo_recipes.memory import vllm_startup as vs
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.inputs import VLLM_CUDA_GRAPHS, GiB, Inputs
from grpo_recipes.memory.vllm import vllm_profile_peak, vllm_terms
from grpo_recipes.models import builtin_config

# Qwen2.5-VL-3B-Instruct config.json (huggingface.co/Qwen/Qwen2.5-VL-3B-Instruct), the fields the model reads
QWEN25_VL_3B = {
    'architectures': ['Qwen2_5_VLForConditionalGeneration'],
    'model_type': 'qwen2_5_vl',
    'hidden_size': 2048,
    'intermediate_size': 11008,
    'num_hidden_layers': 36,
    'num_attention_heads': 16,
    'num_key_value_heads': 2,
    'vocab_size': 151936,
    'tie_word_embeddings': True,
    'max_position_embeddings': 128000,
    'torch_dtype': 'bfloat16',
    'vision_config': {'hidden_size': 1280, 'out_hidden_size': 2048},
}
# Qwen3-Next-80B-A3B-Instruct config.json (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct)
QWEN3_NEXT = {
    'model_type': 'qwen3_next',
    'hidden_size': 2048,
    'num_hidden_layers': 48,
    'num_attention_heads': 16,
    'num_key_value_heads': 2,
    'head_dim': 256,
    'vocab_size': 151936,
    'intermediate_size': 5120,
    'num_experts': 512,
    'num_experts_per_tok': 10,
    'moe_intermediate_size': 512,
    'shared_expert_intermediate_size': 512,
    'full_attention_interval': 4,
    'linear_num_key_heads': 16,
    'linear_key_head_dim': 128,
    'linear_num_value_heads': 32,
    'linear_value_head_dim': 128,
    'linear_conv_kernel_dim': 4,
    'max_position_embeddings': 262144,
    'torch_dtype': 'bfloat16',
}
QWEN25_PP = {'min_pixels': 3136, 'max_pixels': 12845056, 'patch_size': 14, 'temporal_patch_size': 2, 'merge_size': 2}


def test_bundled_qwen25_vl_facts_are_the_released_preprocessor():
    facts = vs.vision_facts('qwen2_5_vl')
    assert facts['preprocessor'] == QWEN25_PP
    assert 'preprocessor_config.json' in facts['preprocessor_source']
    assert set(facts['models']) == {'Qwen2.5-VL-3B-Instruct', 'Qwen2.5-VL-7B-Instruct', 'Qwen2.5-VL-72B-Instruct'}


def test_largest_image_is_what_max_pixels_allows():
    """vLLM 0.10.1.1 qwen2_vl.py get_image_size_with_most_features: smart_resize of a 9999999^2 image into max_pixels
    12845056 = 3584^2 gives 3584 x 3584 pixels, 256 x 256 patches of 14, 65536 / 2^2 = 16384 LLM tokens."""
    assert vs.smart_resize(9999999, 9999999, 28, 3136, 12845056) == (3584, 3584)
    assert vs.max_image_grid(QWEN25_PP) == (256, 256)
    assert vs.tokens_for(QWEN25_PP, 1) == 16384
    # a 1000 x 700 picture: rounded to multiples of 28 -> 1008 x 700, inside the bounds
    assert vs.smart_resize(1000, 700, 28, 3136, 12845056) == (1008, 700)


def test_video_frames_per_version():
    """multimodal/registry.py get_max_tokens_per_item_by_nonzero_modality sizes items with one of each enabled
    modality. qwen2_vl.py get_num_frames_with_most_features: 0.10.1.1 gives the video what max_model_len leaves after
    one 16384-token image, at most 16 frames; 0.11+ (0.23.0) the whole context, at most 14 frames. Two frames make one
    temporal patch of 16384 tokens.
    - 0.10.1.1 at 32768: 16384 left -> 2 frames -> 16384; images off: 32768 -> 4 frames -> 32768;
    - 0.10.1.1 at 128000 (Qwen2.5-VL's context): 111616 left -> 12 frames (6 x 16384 = 98304; 13 pads to 14 = 114688);
    - 0.23.0 at 128000: 14 frames (cap) -> 7 x 16384 = 114688; at 32768: 4 frames -> 32768;
    - V0 (0.7.3), one image and one video by default, at 32768: 2 frames."""
    assert vs.max_tokens_per_item(QWEN25_PP, 32768, {}, '0.10.1.1') == {'image': 16384, 'video': 16384}
    assert vs.max_tokens_per_item(QWEN25_PP, 32768, {'image': 0, 'video': 1}, '0.10.1.1') == {'video': 32768}
    assert vs.max_tokens_per_item(QWEN25_PP, 128000, {}, '0.10.1.1')['video'] == 98304
    assert vs.max_tokens_per_item(QWEN25_PP, 128000, {}, '0.23.0')['video'] == 114688
    assert vs.max_tokens_per_item(QWEN25_PP, 32768, {}, '0.23.0')['video'] == 32768
    assert vs.max_tokens_per_item(QWEN25_PP, 32768, {}, v0=True) == {'image': 16384, 'video': 16384}
    assert vs.max_tokens_per_item(QWEN25_PP, 32768, {'image': 0, 'video': 0}, '0.23.0') == {}


def test_encoder_profile_of_qwen25_vl_3b_on_the_largest_image():
    """v1/worker/gpu_model_runner.py profile_run (0.10.1.1): one image (encoder budget max(8192, 16384) // 16384) of
    65536 patches. Per patch: 1176 pixel values in fp32 and bf16 (7056 B) and the MLP's live tensors
    (4 x 1280 + 3 x 3420) x 2 B = 30760 B: 65536 x 37816 = 2,478,309,376 B. Cached outputs: 16384 x 2048 x 2 B."""
    a = Arch.from_config(QWEN25_VL_3B)
    mm = vs.mm_profile(
        a, tp=1, batched_tokens=8192, max_num_seqs=256, max_model_len=32768, limits={}, vllm_version='0.10.1.1'
    )
    assert (mm['items'], mm['tokens_per_item'], mm['modality']) == (1, 16384, 'image')
    assert mm['encoder_peak'] == 2_478_309_376
    assert mm['cached'] == 16384 * 2048 * 2
    # a budget of 40000 tokens takes two images (MultiModalBudget.get_max_items), without chunked prefill too
    # (min(256, 40000 // 16384) = 2 requests of one image each)
    assert vs.mm_profile(a, 1, 40000, 256, 32768, {}, vllm_version='0.10.1.1')['items'] == 2
    assert vs.mm_profile(a, 1, 40000, 256, 32768, {}, chunked_prefill=False, vllm_version='0.10.1.1')['items'] == 2
    assert vs.mm_profile(a, 1, 8192, 256, 32768, {'image': 0, 'video': 0}) is None
    # 0.23.0 profiles a 4-frame video of 32768 tokens (131072 patches): 131072 x 37816 B
    new = vs.mm_profile(a, 1, 8192, 256, 32768, {}, vllm_version='0.23.0')
    assert (new['modality'], new['items'], new['encoder_peak']) == ('video', 1, 4_956_618_752)


def test_encoder_attention_dominates_at_high_tp():
    """qwen2_5_vl.py split_qkv all-gathers qkv when tp > 1 (vLLM 0.10.1.1): all_gather_interleave fills a list of tp
    copies and concatenates them beside the block input, the normed input and the rank's own qkv, so at TP 4 attention
    holds 2e + 3e/4 + 6e = 11200 values per patch (e = 1280), more than the MLP's 4e + 3i/4 = 7685:
    65536 x (7056 + 2 x 11200) = 1,930,428,416 B."""
    a = Arch.from_config(QWEN25_VL_3B)
    assert vs.mm_profile(a, 4, 8192, 256, 32768, {}, vllm_version='0.10.1.1')['encoder_peak'] == 1_930_428_416


def test_vllm_terms_take_the_encoder_pass_for_a_vl_model():
    a = Arch.from_config(QWEN25_VL_3B)
    cfg, _ = GRPOConfig.from_argv(
        ['--rlhf_type', 'grpo', '--use_vllm', 'true', '--vllm_mode', 'server', '--vllm_max_model_len', '32768']
    )
    inp = Inputs(arch=a, capacity_gib=23.58, gpu_name='RTX3090', vllm_entry='server', vllm_version='0.10.1.1')
    v = vllm_terms(cfg, inp)
    text = vllm_profile_peak(a, 1, 2048, 256)  # API server on a < 70 GiB card: 2048 tokens, 256 sequences
    assert v['activation'] == max(2_478_309_376, text + 16384 * 2048 * 2 + 2048 * 2048 * 2)
    assert v['activation'] == 2_478_309_376
    off, _ = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--use_vllm',
            'true',
            '--vllm_mode',
            'server',
            '--vllm_max_model_len',
            '32768',
            '--vllm_limit_mm_per_prompt',
            '{"image": 0, "video": 0}',
        ]
    )
    assert vllm_terms(off, inp)['activation'] == text


def test_bitsandbytes_weights_as_vllm_loads_them():
    """--quantization bitsandbytes (bitsandbytes_loader.py quantize_4bit, compress_statistics=True, nf4): Qwen2.5-7B's
    6,525,288,448 linear weights at 4 + 8/64 + 32/16384 bits and its 1,090,328,064 other parameters (embeddings,
    lm_head, norms, biases) at 2 B: 5,546,851,072 B = 5.166 GiB. The published run logged 5.2 GiB (within 1%); the
    16-bit model is 14.18 GiB."""
    a = Arch.from_config(builtin_config('Qwen2.5-7B-Instruct.json'))
    cfg, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo'])
    assert a.linear_params() == 6_525_288_448
    assert vs.vllm_weight_bytes(cfg, a, {'quantization': 'bitsandbytes'}) == pytest.approx(5_546_851_072, abs=1)
    assert abs(5_546_851_072 / GiB - 5.2) / 5.2 < 0.01
    assert vs.vllm_weight_bytes(cfg, a, {}) == 7_615_616_512 * 2
    # ms-swift's colocated engine: bnb 4-bit -> bitsandbytes; bnb 8-bit -> no quantization (rollout_mixin.py)
    q4, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo', '--quant_method', 'bnb', '--quant_bits', '4'])
    q8, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo', '--quant_method', 'bnb', '--quant_bits', '8'])
    assert vs.vllm_quantization(q4, a, {}) == 'bitsandbytes' and vs.vllm_quantization(q8, a, {}) is None
    # a rollout server's --vllm_quantization
    srv, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo', '--vllm_quantization', 'bitsandbytes'])
    assert vs.vllm_weight_bytes(srv, a, {}) == pytest.approx(5_546_851_072, abs=1)


def test_prequantized_bnb_8bit_and_fp8():
    """A bnb 8-bit checkpoint (_quantized_8bit_generator): int8 weights and an fp32 SCB per output row, per layer
    q (3584x3584), k, v (3584x512), o, gate, up (3584x18944), down: 8,711,506,944 B with the 16-bit rest.
    --quantization fp8 (fp8.py): one byte per linear weight."""
    cfg8 = dict(
        builtin_config('Qwen2.5-7B-Instruct.json'),
        quantization_config={'quant_method': 'bitsandbytes', 'load_in_8bit': True},
    )
    cfg, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo'])
    assert vs.vllm_weight_bytes(cfg, Arch.from_config(cfg8), {}) == 8_711_506_944
    a = Arch.from_config(builtin_config('Qwen2.5-7B-Instruct.json'))
    assert vs.vllm_weight_bytes(cfg, a, {'quantization': 'fp8'}) == 6_525_288_448 + 1_090_328_064 * 2


def test_gptq_awq_weights_unchanged():
    """GPTQ/AWQ checkpoints keep the packed int4 + group scales accounting (arch.py), whatever the engine says."""
    a = Arch.from_config(builtin_config('Qwen2.5-32B-Instruct-GPTQ-Int4.json'))
    cfg, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo'])
    assert vs.vllm_weight_bytes(cfg, a, {}) == a.weight_bytes()


def test_capture_sizes_per_version():
    """0.10.1.1 vllm/config/__init__.py _set_cudagraph_sizes: [1, 2, 4] + range(8, 513, 8) = 67 sizes at
    max_num_seqs 256; 0.23.0 vllm/config/vllm.py: [1, 2, 4] + range(8, 256, 8) + range(256, 513, 16) = 3 + 31 + 17 = 51;
    max_num_seqs 4: sizes up to 8; enforce_eager: none, and no graph memory."""
    old = vs.capture_sizes('0.10.1.1', 256, 8192, False)
    assert len(old) == 67 and old[:4] == [1, 2, 4, 8] and old[-1] == 512
    new = vs.capture_sizes('0.23.0', 256, 8192, False)
    assert len(new) == 51 and new[-2:] == [496, 512]
    assert vs.capture_sizes('0.23.0', 4, 8192, False) == [1, 2, 4, 8]
    assert vs.capture_sizes('0.23.0', 256, 100, False)[-1] == 100  # max_num_batched_tokens captured when within n
    assert vs.capture_sizes('0.23.0', 256, 8192, True) == []
    assert vs.cuda_graph_bytes([], VLLM_CUDA_GRAPHS) == 0.0
    assert vs.cuda_graph_bytes(new, VLLM_CUDA_GRAPHS) == VLLM_CUDA_GRAPHS


def test_gated_deltanet_state_per_sequence():
    """vLLM 0.23.0 mamba_utils.py gated_delta_net_state_shape for Qwen3-Next-80B-A3B: conv (2 x 16 x 128 + 32 x 128)
    x (4 - 1) = 24576 and recurrent 32 x 128 x 128 = 524288 values per layer, bf16, 36 of 48 layers linear:
    39,518,208 B per sequence; TP 2 halves both."""
    a = Arch.from_config(QWEN3_NEXT)
    assert a.linear_layers == 36
    assert vs.linear_state_bytes(a, 1, 2) == 39_518_208
    assert vs.linear_state_bytes(a, 2, 2) == 39_518_208 / 2
    assert vs.linear_state_bytes(Arch.from_config(builtin_config('Qwen2.5-7B-Instruct.json')), 1, 2) == 0


def test_one_sequence_check_counts_the_linear_state_and_speaks_the_version():
    """check_enough_kv_cache_memory: 0.10.1.1 words it "models's", 0.23.0 "model's" (and names the CPU backend)."""
    assert "the models's max seq len (4096)" in vs.one_sequence_message('0.10.1.1', 4096, 1.0, 0.5, 2048)
    msg = vs.one_sequence_message('0.23.0', 4096, 1.0, 0.5, 2048)
    assert "the model's max seq len (4096)" in msg and 'CPU backend' in msg
    assert 'estimated maximum model length is 2048' in msg


def test_calibrate_reads_the_card_quantization_and_eager():
    """A vLLM case that names only its card is predicted at the catalogue's capacity; --quantization bitsandbytes is
    read; enforce_eager is honoured."""
    from grpo_recipes.memory.calibrate import predict

    case = {
        'id': 'x',
        'kind': 'vllm_startup',
        'framework': 'vllm',
        'gpu': 'RTX 4090',
        'num_gpus': 1,
        'config': {'quantization': 'bitsandbytes', 'vllm_max_model_len': 4096, 'enforce_eager': True},
        'model_config': builtin_config('Qwen2.5-7B-Instruct.json'),
        'outcome': {'ran_ok': True},
    }
    out = predict(json.loads(json.dumps(case)))
    assert out['capacity_candidates'] == 'RTX4090 23.64 GiB'
    assert out['weights_gib'] == pytest.approx(5_546_851_072 / GiB, abs=0.001)
    assert out['fits']


def test_v0_profiles_every_modality_at_its_limit_on_fewer_sequences():
    """vLLM 0.7.3 worker/model_runner.py _dummy_run: with V0's default limits (1 image, 1 video) at max_model_len 32768,
    max_mm_tokens = 16384 + 16384 (the video gets the 16384 tokens left: 2 frames), so max(1, min(256, 32768 // 32768))
    = 1 sequence; the image pass (65536 patches x 37816 B) runs while nothing else is cached, the video's 16384 x 2048
    x 2 B outputs come beside it: 2,478,309,376 + 67,108,864 B, and the video's own float32 pixel rows (65536 x 1176 x
    4 B) are already on the GPU in the forward's kwargs (execute_model's MultiModalKwargs.as_kwargs). Through the LLM
    pass both modalities' rows stay there: 2 x 308,281,344 B, while the encoder outputs, merged into inputs_embeds by
    get_input_embeddings_v0, are freed (qwen2_5_vl.py, 0.8.4); Qwen2MLP's eager forward peaks at 3h + 3I
    (vllm.eager_down_proj_extra). The sampler then runs on that one row."""
    a = Arch.from_config(QWEN25_VL_3B)
    mm = vs.mm_profile_v0(a, 1, 32768, 256, 32768, {})
    assert mm['rows'] == 1
    assert mm['encoder_peak'] == 2_478_309_376 + 67_108_864 + 308_281_344
    assert mm['cached'] == 0
    assert mm['pixels_held'] == 2 * 308_281_344
    cfg, _ = GRPOConfig.from_argv(
        ['--rlhf_type', 'grpo', '--use_vllm', 'true', '--vllm_mode', 'server', '--vllm_max_model_len', '32768']
    )
    inp = Inputs(arch=a, capacity_gib=79.15, gpu_name='A100-80G', vllm_entry='server', vllm_version='0.7.3')
    text_one_row = vllm_profile_peak(a, 1, 32768, 1, eager=True)
    assert vllm_terms(cfg, inp)['activation'] == max(
        mm['encoder_peak'], text_one_row + mm['cached'] + 32768 * 2048 * 2 + mm['pixels_held']
    )


def test_limits_in_vllm_s_json_and_older_cli_forms():
    assert vs.parse_limits('{"image": 1, "video": 0}') == {'image': 1, 'video': 0}
    assert vs.parse_limits('image=2,video=0') == {'image': 2, 'video': 0}
    assert vs.parse_limits({'image': 1}) == {'image': 1}
    assert vs.parse_limits(None) == {}


def test_calibrate_reads_limit_mm_per_prompt_and_vllm_cli_spellings():
    """A VL case with images off (limit_mm_per_prompt image 0, video 0) profiles no encoder: the activation is the
    text peak; --max-model-len and --dtype in vLLM's own spelling are read."""
    from grpo_recipes.memory.calibrate import predict
    from grpo_recipes.memory.cases import normalise

    base = {
        'id': 'vl',
        'kind': 'vllm_startup',
        'framework': 'vllm',
        'framework_version': '0.10.1.1',
        'gpu': 'RTX 3090',
        'num_gpus': 1,
        'model_config': QWEN25_VL_3B,
        'outcome': {'ran_ok': True},
        'config': {'max-model-len': 32768, 'dtype': 'bf16'},
    }
    on = predict(normalise(base)[0])
    off = predict(normalise({**base, 'config': {**base['config'], 'limit_mm_per_prompt': {'image': 0, 'video': 0}}})[0])
    assert on['activation_gib'] == round(2_478_309_376 / GiB, 3)
    assert off['activation_gib'] < on['activation_gib']
    eager = predict(normalise({**base, 'config': {**base['config'], 'enforce_eager': True}})[0])
    assert eager['kv_cache_gib'] == on['kv_cache_gib']  # before 0.21 graphs come on top, not out of the KV cache
    # from 0.21 the profiler takes the graphs (the 0.5 GiB allowance) out of the KV cache; enforce_eager gives it back
    new = {**base, 'framework_version': '0.23.0'}
    graphs = predict(normalise(new)[0])['kv_cache_gib']
    eager = predict(normalise({**new, 'config': {**base['config'], 'enforce_eager': True}})[0])['kv_cache_gib']
    assert abs(eager - graphs - 0.5) <= 0.002


def test_consumer_and_workstation_cards_are_in_the_catalogue():
    """Capacities as torch reports them (gpus.py sources): RTX 3090 23.58, RTX 4090 23.64, RTX A6000 47.54 GiB."""
    from grpo_recipes.gpu_names import lookup
    from grpo_recipes.gpus import candidates

    assert lookup('NVIDIA GeForce RTX 3090') == ('RTX3090', 23.58)
    assert lookup('RTX 4090') == ('RTX4090', 23.64)
    assert lookup('NVIDIA RTX A6000') == ('A6000', 47.54)
    assert candidates('RTX A6000 48GB') == [('A6000', 47.54)]


def test_a_rollout_server_with_vllm_quantization_holds_bnb_weights():
    """`swift rollout --vllm_quantization bitsandbytes` passes quantization to vLLM (swift/rlhf_trainers/args_mixin.py
    get_vllm_engine_kwargs): the server's weights are the 4-bit ones, 5,546,851,072 B for Qwen2.5-7B."""
    from types import SimpleNamespace

    from grpo_recipes.check import rollout_config
    from grpo_recipes.frontends.swift.reader import read_rollout

    r = read_rollout(
        ['--model', 'Qwen/Qwen2.5-7B-Instruct', '--vllm_quantization', 'bitsandbytes', '--vllm_max_model_len', '4096'],
        {'CUDA_VISIBLE_DEVICES': '0'},
        '--rollout',
    )
    assert r.quantization == 'bitsandbytes'
    cfg = rollout_config(SimpleNamespace(rollout=r))
    assert vs.vllm_weight_bytes(cfg, Arch.from_config(builtin_config('Qwen2.5-7B-Instruct.json')), {}) == pytest.approx(
        5_546_851_072, abs=1
    )


def test_tp_encoder_without_the_qkv_gather_from_0_14():
    """vLLM 0.14.0/0.23.0 qwen2_5_vl.py Qwen2_5_VisionAttention keeps each rank's heads (no all_gather_interleave): at
    TP 4 attention holds 2e + 8e/4 = 5120 values per patch, under the MLP's 7685: 65536 x (7056 + 2 x 7685) B."""
    a = Arch.from_config(QWEN25_VL_3B)
    limits = {'video': 0}
    assert vs.mm_profile(a, 4, 8192, 256, 32768, limits, vllm_version='0.23.0')['encoder_peak'] == 65536 * (
        7056 + 2 * 7685
    )


def test_hybrid_token_capacity_counts_each_request_s_state():
    """vLLM 0.23.0 get_max_concurrency_for_kv_cache_config: tokens = max_concurrency x max_model_len, each request
    holding its attention KV and its 39,518,208 B of Gated DeltaNet state. Qwen3-Next's 12 attention layers x 2 KV
    heads x 256 x 2 (K, V) x 2 B = 24,576 B per token; at max_model_len 4096 a request is 24,576 x 4096 + 39,518,208 B,
    so per logged token 24,576 + 39,518,208 / 4096 = 34,224 B."""
    a = Arch.from_config(QWEN3_NEXT)
    assert a.kv_bytes_per_token(2) == 24_576
    assert vs.bytes_per_token(24_576, a, 1, 4096) == 34_224
    dense = Arch.from_config(builtin_config('Qwen2.5-7B-Instruct.json'))
    assert vs.bytes_per_token(57_344, dense, 1, 4096) == 57_344
