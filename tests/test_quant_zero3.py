"""A GPTQ/AWQ base under ZeRO-3 keeps its packed weights whole on every GPU (memory/trainer.py quantised_resident):
transformers never builds a quantised model under deepspeed.zero.Init (transformers 5.19 modeling_utils.py:
``needs_zero3_init = is_deepspeed_zero3_enabled() and not _is_quantized``), and DeepSpeed partitions and offloads only
parameters (runtime/zero/parameter_offload.py _convert_to_zero_parameters), while GPTQ's packed weights are buffers.
The checkpoint's unquantised embeddings and norms are parameters: those are partitioned as before, and so is a
bitsandbytes base (its packed weights are parameters). Checked here against the installed transformers' and
DeepSpeed's source, then on the memory plan."""

import importlib.util
from pathlib import Path

from helpers import make

from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.inputs import GiB
from grpo_recipes.models import load_model_config

GPTQ = 'Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4'
HW4 = Hardware(gpus=4, gpu_type='A100-80G', source='flags')
FOUR = {'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'NPROC_PER_NODE': 4}
BASE = {
    'model': GPTQ,
    'use_vllm': False,
    'vllm_mode': None,
    'vllm_max_model_len': None,
    'vllm_gpu_memory_utilization': None,
    'per_device_train_batch_size': 2,
    'num_generations': 8,
}


def test_transformers_skips_zero3_init_for_quantised_models():
    spec = importlib.util.find_spec('transformers')  # read the installed source, without importing transformers
    src = (Path(spec.origin).parent / 'modeling_utils.py').read_text(encoding='utf-8')
    assert 'needs_zero3_init = is_deepspeed_zero3_enabled() and not _is_quantized' in src


def _weights(over):
    _, r = make({**BASE, **over}, env=FOUR, hw=HW4)
    return r.memory[0].components.get('weights', 0.0)  # a zero term is left out


def test_gptq_base_stays_resident_under_zero3_and_its_offload():
    a = Arch.from_config(load_model_config(GPTQ))
    packed = a.linear_params() * a.linear_bytes_per_weight() / GiB
    whole = a.weight_bytes() / GiB
    rest = whole - packed  # embeddings, lm_head, norms: parameters, partitioned
    assert abs(_weights({}) - whole) < 0.05  # no DeepSpeed: the whole base
    assert abs(_weights({'deepspeed': 'zero3'}) - (packed + rest / 4)) < 0.05
    assert abs(_weights({'deepspeed': 'zero3_offload'}) - packed) < 0.05  # not 0: buffers are never offloaded
    assert _weights({'deepspeed': 'zero3'}) > whole / 2  # the packed linears are most of it


def test_a_bnb_base_is_partitioned_like_an_unquantised_one():
    # bitsandbytes' packed weights are parameters (Params4bit subclasses torch.nn.Parameter): DeepSpeed's engine
    # partitions them whatever their dtype (partition_parameters.py _zero_init_param), unlike GPTQ's buffers
    src = (
        Path(importlib.util.find_spec('deepspeed').origin).parent / 'runtime' / 'zero' / 'partition_parameters.py'
    ).read_text(encoding='utf-8')
    assert 'dist.broadcast(param.data.view(torch.uint8)' in src
    a = Arch.from_config(load_model_config('Qwen/Qwen2.5-7B-Instruct'))
    seven = {'model': 'Qwen/Qwen2.5-7B-Instruct'}
    qlora = a.weight_bytes(bnb_bits=4) / GiB
    assert abs(_weights({**seven, 'quant_method': 'bnb', 'quant_bits': 4, 'deepspeed': 'zero3'}) - qlora / 4) < 0.05
    assert _weights({**seven, 'quant_method': 'bnb', 'quant_bits': 4, 'deepspeed': 'zero3_offload'}) == 0
    bf16 = a.weight_bytes() / GiB
    assert abs(_weights({**seven, 'deepspeed': 'zero3'}) - bf16 / 4) < 0.05
    assert _weights({**seven, 'deepspeed': 'zero3_offload'}) == 0
