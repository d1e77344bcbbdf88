"""ms-swift 3.1-3.4 ran vLLM inside the training process, on the GPU(s) ``--vllm_device`` names (``auto`` by
default), and each release placed it its own way. Read in ms-swift's code at each tag:

- 3.1.1.post1 swift/trainers/rlhf_trainer/grpo_trainer.py: ``auto`` on more than one GPU is
  ``get_device(local_world_size)``, "take the next GPU idx"; one GPU is shared;
- 3.2.0/3.2.1 grpo_trainer.py: ``auto`` is the last ``num_infer_workers`` GPUs; a device index past the visible
  ones raises "The requested device for vllm (...) is not available"; ``infer_rank`` asserts
  ``local_world_size % num_infer_workers == 0``;
- 3.2.2 swift/llm/argument/rlhf_args.py ``_check_grpo`` (#3598): visible GPUs must be num_infer_workers
  (colocate) or NPROC_PER_NODE + num_infer_workers ("Async mode requires total GPUs...").

The launch of ms-swift issue 3361 (NPROC_PER_NODE=1 with 4 visible GPUs, 7B LoRA on 24 GB cards, ZeRO-3) is the
reported case: it ran (and ran out of memory) on the release of its day, which the 3.2.2 assertion would have
stopped."""

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.calibrate import predict
from grpo_recipes.memory.cases import CannotPredict
from grpo_recipes.models import builtin_config

QWEN25_7B = builtin_config('Qwen2.5-7B-Instruct.json')  # the bundled copy of the model's config.json
# ms-swift issue 3361's launch, as its reporter wrote it (3.x names)
ISSUE_3361 = (
    'swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --train_type lora --lora_rank 8 --lora_alpha 32 '
    '--target_modules all-linear --torch_dtype bfloat16 --use_vllm true --vllm_gpu_memory_utilization 0.8 '
    '--vllm_max_model_len 2048 --max_completion_length 1024 --max_length 2048 --per_device_train_batch_size 2 '
    '--gradient_accumulation_steps 8 --deepspeed zero3 --dataset AI-MO/NuminaMath-TIR --reward_funcs accuracy'
)


def run(version, extra='', env='NPROC_PER_NODE=1 CUDA_VISIBLE_DEVICES=0,1,2,3', gpus=4):
    launch = read_launch(['--', *f'{env} {ISSUE_3361} {extra}'.split()], environ={})
    return check_launch(
        launch,
        Hardware(gpus=gpus, gpu_type='A100-80G', source='flags'),
        packages={'ms-swift': version, 'deepspeed': '0.16.4', 'math-verify': '0.9.0'},
        model_config=QWEN25_7B,
    )


def layout(report):
    roles = {int(m.gpu): m.role for m in report.memory}
    errors = {f.rule: f for f in report.findings if f.severity == 'error'}
    return roles, errors


@pytest.mark.parametrize(
    'version, vllm_gpu',
    [
        ('3.1.1.post1', 1),  # the GPU after the one training process
        ('3.2.0', 3),  # the last num_infer_workers (1) of the 4 visible
        ('3.2.1', 3),
    ],
)
def test_auto_puts_vllm_where_the_release_put_it(version, vllm_gpu):
    roles, errors = layout(run(version, '--vllm_device auto'))
    assert 'device.infer-workers' not in errors
    assert roles[0] == 'train' and roles[vllm_gpu] == 'rollout' and len(roles) == 2


def test_the_layout_assertion_of_3_2_2_stops_it_and_withholds_the_memory_verdict():
    report = run('3.2.2', '--vllm_device auto')
    roles, errors = layout(report)
    f = errors['device.infer-workers']
    assert 'Async mode requires total GPUs(4) = training GPUs(1) + inference workers(1)' in f.message
    assert f.fix == 'NPROC_PER_NODE=3 before swift rlhf'
    assert {m.verdict for m in report.memory} == {'withheld'}
    assert 'memory.oom' not in errors and not report.fixes
    # the fix, applied: 3 training processes and vLLM on the fourth GPU
    roles, errors = layout(run('3.2.2', '--vllm_device auto', env='NPROC_PER_NODE=3 CUDA_VISIBLE_DEVICES=0,1,2,3'))
    assert 'device.infer-workers' not in errors and roles == {0: 'train', 1: 'train', 2: 'train', 3: 'rollout'}


def test_a_named_vllm_device_is_used_and_one_that_does_not_exist_stops_it():
    roles, errors = layout(run('3.2.0', '--vllm_device cuda:2'))
    assert roles == {0: 'train', 2: 'rollout'} and not errors.keys() & {'device.infer-workers'}
    roles, errors = layout(run('3.1.1.post1', '--vllm_device cuda:4'))
    assert 'The requested device for vllm (cuda:4) is not available' in errors['device.infer-workers'].message


def test_vllm_on_a_training_gpu_is_planned_as_colocated():
    # 3.2.0, 4 processes on 4 GPUs: vLLM (auto) on the last one, which rank 3 also trains on (ms-swift only warns)
    report = run('3.2.0', env='NPROC_PER_NODE=4 CUDA_VISIBLE_DEVICES=0,1,2,3')
    roles, errors = layout(report)
    assert 'device.infer-workers' not in errors
    assert report.cfg.vllm_mode == 'colocate' and set(roles.values()) == {'train+vllm'}


def test_workers_that_do_not_divide_the_processes_stop_3_2_0():
    report = run('3.2.0', '--num_infer_workers 2', env='NPROC_PER_NODE=3 CUDA_VISIBLE_DEVICES=0,1,2,3,4')
    f = layout(report)[1]['device.infer-workers']
    assert 'local_world_size (3) % num_infer_workers (2) == 0' in f.message and f.fix == '--num_infer_workers 1'
    for version in ('3.2.0', '3.4.1'):  # no worker at all divides by zero in infer_rank
        f = layout(run(version, '--num_infer_workers 0'))[1]['device.infer-workers']
        assert 'ZeroDivisionError' in f.message and f.fix == '--num_infer_workers 1'


CASE = {
    'id': 'in-trainer-vllm',
    'kind': 'grpo_train',
    'framework': 'ms-swift',
    'model': 'Qwen/Qwen2.5-7B-Instruct',
    'gpu': 'A100 80GB',
    'gpu_total_gib': 79.15,
    'num_gpus': 4,
    'model_config': QWEN25_7B,
    'config': {
        'rlhf_type': 'grpo',
        'NPROC_PER_NODE': 1,
        'CUDA_VISIBLE_DEVICES': '0,1,2,3',
        'use_vllm': True,
        'vllm_device': 'auto',
        'vllm_gpu_memory_utilization': 0.8,
        'vllm_max_model_len': 2048,
        'train_type': 'lora',
        'max_completion_length': 1024,
        'max_length': 1024,
        'per_device_train_batch_size': 2,
    },
    'outcome': {'ran_ok': True},
}


def test_a_case_with_vllm_device_is_predicted_with_the_release_placement():
    # the release stated: vLLM on a GPU of its own (its peak is that GPU's rollout, not a colocated training phase)
    pred = predict({**CASE, 'framework_version': '3.2.0'})
    assert pred['fits'] is True and pred['phase'] == 'rollout' and pred['dominant'] == 'vllm_reserved'
    # not stated: 3.1-3.2.1 run it, 3.2.2-3.4 stop at the layout assertion, so the verdict depends on the release
    with pytest.raises(CannotPredict, match='framework_version'):
        predict(CASE)
    # a layout every release accepts (1 training process + 1 vLLM GPU; 3.5 colocates vLLM, at 0.3 it fits beside
    # training too) is predicted without the release
    ok = replace_config(CASE, CUDA_VISIBLE_DEVICES='0,1', num_gpus=2, vllm_gpu_memory_utilization=0.3)
    pred = predict(ok)
    assert pred['fits'] is True and pred['release_candidates'] == '3.1.1, 3.2.0, 3.2.2, 3.5.0'


def replace_config(case, num_gpus, **config):
    return {**case, 'num_gpus': num_gpus, 'config': {**case['config'], **config}}


def test_a_release_that_had_no_in_trainer_vllm_is_unchanged():
    report = run('3.10.3', '--vllm_mode colocate', env='NPROC_PER_NODE=4 CUDA_VISIBLE_DEVICES=0,1,2,3')
    assert report.cfg.vllm_mode == 'colocate' and report.launch.trl.swift_infer_workers is None


def test_3_5_only_warns_that_vllm_device_is_deprecated_and_runs_vllm_mode():
    # 3.5.0 rlhf_args.py _deprecated_warning: "The parameter 'vllm_device' has been deprecated and will be removed in
    # version 3.6"; --vllm_mode (colocate by default) places vLLM, and no layout assertion remains
    report = run('3.5.0', '--vllm_device auto')
    assert report.cfg.vllm_mode == 'colocate' and 'device.infer-workers' not in layout(report)[1]
    assert any('--vllm_device' in n and 'deprecated there and ignored' in n for n in report.launch.notes)
