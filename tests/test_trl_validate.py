"""`grpo-guard validate` on TRL launches runs the installed TRL's own TrlParser (in a subprocess), and the
guard's fast batch rules agree with it. Simulated, as a CPU machine needs: the world size (accelerate's
process count patched onto TRL's GRPOConfig.world_size) and `--use_cpu true` (TrainingArguments refuses bf16
without a GPU). Everything else is TRL's code."""

import json

import pytest
from conftest import run_cli

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch as load_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.realparse import validate_trl_many

pytestmark = pytest.mark.slow

M = 'Qwen/Qwen2.5-7B-Instruct'


def validate(*args):
    proc = run_cli('grpo_recipes.cli.guard', 'validate', '--json', *args)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def test_indivisible_num_generations_gives_trls_own_message():
    rc, out = validate(
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '2',
        'train_grpo.py',
        '--model_name_or_path',
        M,
        '--per_device_train_batch_size',
        '3',
        '--num_generations',
        '4',
    )
    assert rc == 1
    assert out['parser']['message'] == 'generation_batch_size (6) must be divisible by num_generations (4).'
    assert 'trl/trainer/grpo_config.py' in out['parser']['where'] and 'world_size=2' in out['parser']['simulated']


def test_unknown_argument_is_rejected_by_trlparser_and_explained():
    rc, out = validate(
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '4',
        'train_grpo.py',
        '--model_name_or_path',
        M,
        '--use_vllm',
        '--vllm_device',
        'auto',
    )
    assert rc == 1 and 'not used by the HfArgumentParser' in out['parser']['message']
    assert out['parser']['unknown'][0]['flag'] == '--vllm_device'
    assert 'trl vllm-serve' in out['parser']['unknown'][0]['describe']


def test_config_file_is_read_by_trlparser_itself(tmp_path):
    cfg = tmp_path / 'grpo.yaml'
    cfg.write_text(
        f'model_name_or_path: {M}\nper_device_train_batch_size: 4\nnum_generations: 8\nuse_vllm: true\n'
        'vllm_mode: colocate\nvllm_max_model_length: 2048\n'
    )
    rc, out = validate('--', 'trl', 'grpo', '--config', str(cfg), '--gradient_accumulation_steps', '2')
    assert rc == 0, out['parser']
    r = out['parser']['resolved']
    assert r['generation_batch_size'] == 8 and r['vllm_max_model_length'] == 2048 and r['vllm_mode'] == 'colocate'


def test_vllm_serve_arguments_go_through_its_own_parser():
    rc, out = validate(
        '--',
        'CUDA_VISIBLE_DEVICES=4,5',
        'trl',
        'vllm-serve',
        '--model',
        M,
        '--tensor-parallel-size',
        '2',
        '--gpu-memory-utilization',
        '0.8',
    )
    assert rc == 0, out['parser']
    assert out['parser']['resolved']['tensor_parallel_size'] == 2
    rc, out = validate('--', 'trl', 'vllm-serve', '--model', M, '--tensor_paralel_size', '2')
    assert rc == 1 and 'tensor_paralel_size' in out['parser']['message']


def test_another_trl_version_is_refused_with_the_fix():
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'validate',
        '--trl-version',
        '0.15.2',
        '--',
        'python',
        'train.py',
        '--model_name_or_path',
        M,
    )
    assert proc.returncode == 2 and 'install trl==0.15.2' in proc.stderr and 'Traceback' not in proc.stderr


# The batch settings of ms-swift's GRPO example scripts (tests/test_rules_vs_swift.py) written as TRL launches,
# plus invalid variants: the fast rules and TrlParser must reach the same verdict on each.
CASES = [
    (2, 2, 2, 8, None, None),
    (1, 8, 1, 8, None, None),
    (2, 7, 4, 14, None, None),
    (7, 7, 1, 49, None, None),
    (2, 6, 2, 6, None, 2),
    (4, 4, 1, 4, None, None),
    (4, 4, 4, 8, None, None),
    (1, 4, 1, 4, None, None),
    (2, 8, 8, 16, None, 32),
    (4, 8, 8, 8, None, None),
    (3, 2, 1, 4, None, None),
    (4, 1, 1, 1, None, None),
    (2, 2, 1, 8, 6, None),
    (2, 2, 1, 4, 8, 2),
    (1, 3, 1, 2, 5, None),
    (2, 3, 1, 12, None, 2),
]


def test_fast_batch_rules_agree_with_trlparser():
    launches = []
    for bs, nproc, ga, G, gbs, spg in CASES:
        argv = [
            'accelerate',
            'launch',
            '--num_processes',
            str(nproc),
            'train_grpo.py',
            '--model_name_or_path',
            M,
            '--per_device_train_batch_size',
            str(bs),
            '--gradient_accumulation_steps',
            str(ga),
            '--num_generations',
            str(G),
        ]
        argv += ['--generation_batch_size', str(gbs)] if gbs else []
        argv += ['--steps_per_generation', str(spg)] if spg else []
        launches.append(load_launch(['--', *argv], environ={}))
    real = validate_trl_many(launches)
    for case, launch, r in zip(CASES, launches, real):
        report = check_launch(launch, Hardware(gpus=8, gpu_type='A100-80G'), memory=False)
        fast = sorted(f.rule for f in report.findings if f.severity == 'error' and f.rule.startswith('batch.'))
        assert bool(fast) == (not r.ok), (case, fast, r.message)
    assert sum(not r.ok for r in real) == 5  # the invalid variants (the last one is valid: 12 % 12), refused by TRL
