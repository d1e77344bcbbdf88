"""A `swift rlhf` launch is judged against the ms-swift the user runs: the installed one, or --swift-version.
3.x is read with ms-swift 3.10's own arguments (grpo_recipes/swift_args_snapshot_3.10.json, written by
scripts/gen_swift_snapshot.py under ms-swift 3.10.3) and 3.10's vllm_mode / vllm_max_num_seqs semantics."""

import json
import os
import subprocess

import pytest
from conftest import ROOT, run_cli

# Written for ms-swift 3.x as the wild launches are: --train_type, no --vllm_mode (3.10 picks colocate).
LAUNCH_3X = [
    '--',
    'CUDA_VISIBLE_DEVICES=0,1,2,3',
    'NPROC_PER_NODE=4',
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--train_type',
    'lora',
    '--use_vllm',
    'true',
    '--vllm_gpu_memory_utilization',
    '0.5',
    '--vllm_max_model_len',
    '2048',
    '--max_length',
    '512',
    '--max_completion_length',
    '1024',
    '--num_generations',
    '8',
    '--per_device_train_batch_size',
    '4',
    '--reward_funcs',
    'accuracy',
    'format',
    '--sleep_level',
    '1',
]
HW = ['--gpus', '4', '--gpu-type', 'A100-80G']


def check(*args):
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *HW, *args)
    return proc.returncode, json.loads(proc.stdout)


def errors(out):
    return {f['rule']: f for f in out['findings'] if f['severity'] == 'error'}


def test_a_3x_launch_is_accepted_by_3_10_and_refused_by_4_6_with_the_rename():
    rc, out = check('--swift-version', '3.10.3', *LAUNCH_3X)
    assert rc == 0, errors(out)
    assert out['config']['tuner_type'] == 'lora' and out['config']['vllm_mode'] == 'colocate'
    assert out['config']['vllm_max_num_seqs'] == 256  # 3.10's VllmArguments default
    rc, out = check(*LAUNCH_3X)  # the installed ms-swift 4.6
    e = errors(out)
    assert rc == 1 and '--tuner_type' in e['args.unknown']['message'] and 'vllm.mode' in e


def test_a_4x_name_on_3_10_is_refused_with_the_3x_name():
    argv = [a if a != '--train_type' else '--tuner_type' for a in LAUNCH_3X]
    rc, out = check('--swift-version', '3.10.3', *argv)
    f = errors(out)['args.unknown']
    assert rc == 1 and 'ms-swift 3.10.3 has no argument --tuner_type; use --train_type' in f['message']
    assert 'it came in ms-swift 4.0' in f['message']  # releases.json: tuner_type first in 4.0


def test_a_name_is_judged_by_the_release_that_had_it():
    argv = LAUNCH_3X + ['--num_infer_workers', '1']
    rc, out = check('--swift-version', '3.10.3', *argv)
    assert rc == 1 and 'removed in ms-swift 3.6' in errors(out)['args.unknown']['message']
    rc, out = check('--swift-version', '3.5.2', *argv)  # 3.5 still had it: not a finding, and the note says so
    assert 'args.unknown' not in errors(out)
    notes = ' '.join(out['launch']['notes'])
    # 3.5.2 is read with 3.5's own arguments (releases.json keeps 3.5.3, the newest 3.5 patch), not 3.10's
    assert 'checked against ms-swift 3.5.3' in notes and '--num_infer_workers: an argument of ms-swift 3.5.2' in notes


def test_server_address_makes_3_10_a_server_launch():
    argv = LAUNCH_3X + ['--vllm_server_host', '127.0.0.1', '--vllm_server_port', '8000']
    _, out = check('--swift-version', '3.10.3', *argv)
    assert out['config']['vllm_mode'] == 'server'  # swift/llm/argument/rlhf_args.py _init_rollout (3.10)


def test_validate_cannot_run_another_release():
    proc = run_cli('grpo_recipes.cli.guard', 'validate', '--swift-version', '3.10.3', *LAUNCH_3X)
    assert proc.returncode == 2 and 'install ms-swift==3.10.3' in proc.stderr and 'Traceback' not in proc.stderr


PY310 = os.environ.get('SWIFT310_PYTHON')


@pytest.mark.slow
@pytest.mark.skipif(not PY310, reason='set SWIFT310_PYTHON to a python with ms-swift 3.10.3 to regenerate')
def test_3_10_snapshot_matches_ms_swift_3_10(tmp_path):
    out = tmp_path / 'snap.json'
    proc = subprocess.run(
        [PY310, str(ROOT / 'scripts' / 'gen_swift_snapshot.py'), '--output', str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, 'PYTHONPATH': str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_text() == (ROOT / 'grpo_recipes' / 'swift_args_snapshot_3.10.json').read_text()


def test_ignore_args_error_makes_unknown_arguments_warnings():
    # ms-swift logs the leftovers instead of raising when --ignore_args_error is true
    # (swift/pipelines/base.py in 4.6, swift/llm/base.py in 3.10: `if getattr(args, 'ignore_args_error', False)`)
    argv = LAUNCH_3X + ['--stage', 'grpo']
    rc, out = check('--swift-version', '3.10.3', *argv)
    assert errors(out)['args.unknown']['message'].startswith('--stage')
    rc, out = check('--swift-version', '3.10.3', *argv, '--ignore_args_error', 'true')
    f = next(f for f in out['findings'] if f['rule'] == 'args.unknown')
    assert f['severity'] == 'warning' and 'ignores it' in f['message'] and 'args.unknown' not in errors(out)


# ms-swift < 3.6 ran vLLM inside the trainer (3.4.1: swift/llm/argument/rlhf_args.py _check_grpo, grpo_trainer.py):
# 8 visible GPUs for 7 processes is its documented layout, vLLM on the last one (vllm_device auto)
OLD_VLLM = [
    '--',
    'CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7',
    'NPROC_PER_NODE=7',
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--train_type',
    'full',
    '--use_vllm',
    'true',
    '--vllm_device',
    'auto',
    '--vllm_gpu_memory_utilization',
    '0.7',
    '--vllm_max_model_len',
    '8192',
    '--max_length',
    '4096',
    '--max_completion_length',
    '2048',
    '--num_generations',
    '7',
    '--per_device_train_batch_size',
    '1',
    '--deepspeed',
    'zero2',
    '--torch_dtype',
    'bfloat16',
    '--reward_funcs',
    'accuracy',
    'format',
]


def test_ms_swift_before_3_6_runs_vllm_on_the_spare_gpu():
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--swift-version',
        '3.4.1',
        *OLD_VLLM,
    )
    out = json.loads(proc.stdout)
    assert not errors(out), errors(out)
    assert out['hardware']['rollout_gpus'] == [7] and {m['role'] for m in out['memory']} == {'train', 'rollout'}
    assert out['config']['vllm_gpu_memory_utilization'] == 0.7  # the launch's own, not a server default
    # 6 processes on 8 GPUs: ms-swift 3.4's own assertion
    argv = [a if a != 'NPROC_PER_NODE=7' else 'NPROC_PER_NODE=6' for a in OLD_VLLM]
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--swift-version',
        '3.4.1',
        *argv,
    )
    f = errors(json.loads(proc.stdout))['device.infer-workers']
    assert 'Async mode requires total GPUs(8) = training GPUs(6) + inference workers(1)' in f['message']
    # on 3.10 the same launch is refused: --vllm_device was removed in 3.6
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--swift-version',
        '3.10.3',
        *OLD_VLLM,
    )
    assert 'removed in ms-swift 3.6' in errors(json.loads(proc.stdout))['args.unknown']['message']
