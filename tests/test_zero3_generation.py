"""HF generation (no vLLM) under ZeRO-3 gathers the whole model on every GPU while it generates, in ms-swift as in
TRL, when ds3_gather_for_generation is true (its default in both): ms-swift 4.6 swift/rlhf_trainers/rollout_mixin.py
_generate_completions -> swift/utils/transformers_utils.py unwrap_model_for_generation(gather_deepspeed3_params=
args.ds3_gather_for_generation) -> deepspeed.zero.GatheredParameters over every named parameter; TRL
trl/models/utils.py unwrap_model_for_generation. The memory model reads the typed config field
(GRPOConfig.ds3_gather_for_generation, set by both front ends), never the framework's name.

The shape: a Qwen2.5-32B full-parameter run on 8 x 96 GB (H20) under ZeRO-3, as verl's 32B GRPO tuning script runs
that model on that node (peers-and-memory.md §B.1, examples/tuning/32b/qwen2_32B_grpo_8_h20_megatron_vllm.sh), here
with HF generation instead of vLLM."""

from helpers import PACKAGES_OK, make

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.inputs import GiB
from grpo_recipes.models import load_model_config

H20x8 = Hardware(gpus=8, gpu_type='H20', source='flags')
EIGHT = {'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7', 'NPROC_PER_NODE': 8}
SHAPE = {
    'model': 'Qwen/Qwen2.5-32B',
    'tuner_type': 'full',
    'deepspeed': 'zero3',
    'use_vllm': False,
    'vllm_mode': None,
    'vllm_max_model_len': None,
    'vllm_gpu_memory_utilization': None,
    'per_device_train_batch_size': 4,
    'gradient_accumulation_steps': 2,
    'num_generations': 8,
    'max_length': 1024,
    'max_completion_length': 1024,
    'beta': 0.0,
}
WHOLE_BF16 = 2 * Arch.from_config(load_model_config('Qwen/Qwen2.5-32B')).param_count() / GiB


def _gen(report):
    m = report.memory[0]
    return m, m.components.get('zero3_generation_gather')


def test_swift_hf_generation_under_zero3_gathers_the_whole_model():
    _, r = make(SHAPE, env=EIGHT, hw=H20x8)
    m, gathered = _gen(r)
    assert m.phase == 'generate' and abs(gathered - WHOLE_BF16) < 0.1
    oom = [f for f in r.findings if f.rule == 'memory.oom']
    assert oom and 'ds3_gather_for_generation is true' in oom[0].message
    assert 'ds3_gather_for_generation: false' in oom[0].fix and 'use_vllm' in oom[0].fix
    fix = r.fixes[0]
    assert fix.changes == {'ds3_gather_for_generation': (True, False)} and fix.peak_fraction <= 1.0


def test_no_gather_without_it_or_with_vllm():
    _, r = make({**SHAPE, 'ds3_gather_for_generation': False}, env=EIGHT, hw=H20x8)
    assert _gen(r)[1] is None and r.memory[0].fits
    _, r = make({**SHAPE, 'deepspeed': 'zero2'}, env=EIGHT, hw=H20x8)
    assert _gen(r)[1] is None  # ZeRO-2 keeps the whole model on each GPU anyway: nothing to gather
    _, r = make(
        {**SHAPE, 'use_vllm': True, 'vllm_mode': 'colocate', 'vllm_gpu_memory_utilization': 0.5, 'sleep_level': 1},
        env=EIGHT,
        hw=H20x8,
    )
    assert _gen(r)[1] is None


def test_trl_twin():
    launch = read_launch(
        [
            '--',
            'accelerate',
            'launch',
            '--use_deepspeed',
            '--zero_stage',
            '3',
            '--num_processes',
            '8',
            'train_grpo.py',
            '--model_name_or_path',
            'Qwen/Qwen2.5-32B',
            '--per_device_train_batch_size',
            '4',
            '--gradient_accumulation_steps',
            '2',
            '--num_generations',
            '8',
            '--max_completion_length',
            '1024',
        ],
        environ={},
    )
    r = check_launch(launch, H20x8, packages=PACKAGES_OK, data_stats={'max': 1024, 'percentiles': {}, 'histogram': []})
    m, gathered = _gen(r)
    assert m.phase == 'generate' and abs(gathered - WHOLE_BF16) < 0.1
    oom = [f for f in r.findings if f.rule == 'memory.oom']
    assert oom and '--ds3_gather_for_generation false' in oom[0].fix
    # TRL loads the policy in fp32 here (no --dtype), so ZeRO-3's offload fits with more room; turning the gather off
    # is offered too
    assert {'ds3_gather_for_generation': (True, False)} in [f.changes for f in r.fixes]
