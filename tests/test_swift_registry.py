"""--model_type and --template against ms-swift's own registries (MODEL_MAPPING, TEMPLATE_MAPPING), read from
grpo_recipes/swift_registry_snapshot.json (scripts/gen_swift_registry.py)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, run_cli

BASE = [
    '--',
    'CUDA_VISIBLE_DEVICES=0,1',
    'NPROC_PER_NODE=2',
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--tuner_type',
    'lora',
    '--use_vllm',
    'true',
    '--vllm_mode',
    'colocate',
    '--vllm_max_model_len',
    '2048',
    '--max_length',
    '512',
    '--num_generations',
    '8',
    '--per_device_train_batch_size',
    '4',
    '--reward_funcs',
    'format',
]


def findings(*extra, version=()):
    proc = run_cli(
        'grpo_recipes.cli.guard', 'check', '--json', '--gpus', '2', '--gpu-type', 'A100-80G', *version, *BASE, *extra
    )
    return {f['rule']: f for f in json.loads(proc.stdout)['findings']}


def test_template_name_as_model_type_names_the_model_type():
    f = findings('--model_type', 'qwen2_5')['args.model-type']
    assert f['severity'] == 'error' and "'qwen2_5' is a template name" in f['message']
    assert f['fix'] == '--model_type qwen2'  # a command line: the fix as its flag (fix_syntax)


def test_model_type_as_template_names_the_models_template():
    f = findings('--template', 'qwen2')['args.template']
    assert "'qwen2' is a model type" in f['message'] and f['fix'] == '--template qwen2_5'


def test_registered_names_pass_and_typos_get_the_closest():
    got = findings('--model_type', 'qwen2', '--template', 'qwen2_5')
    assert 'args.model-type' not in got and 'args.template' not in got
    f = findings('--template', 'deepseek-r1')['args.template']
    assert f['fix'] == '--template deepseek_r1'


def test_a_3x_launch_is_not_checked_against_the_4x_registry_and_says_so():
    argv = ['--train_type' if a == '--tuner_type' else a for a in BASE if a not in ('--vllm_mode', 'colocate')]
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        '--gpus',
        '2',
        '--gpu-type',
        'A100-80G',
        '--swift-version',
        '3.10.3',
        *argv,
        '--model_type',
        'qwen2_5',
    )
    got = {f['rule']: f for f in json.loads(proc.stdout)['findings']}
    assert 'args.model-type' not in got and got['args.registry-unchecked']['severity'] == 'info'


@pytest.mark.slow
def test_registry_snapshot_has_no_drift():
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'scripts' / 'gen_swift_registry.py'), '--check'],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.slow
def test_snapshot_verdicts_are_ms_swifts_own():
    # the names the tests above use, looked up in the real registries
    code = (
        'from swift.model import MODEL_MAPPING; from swift.template import TEMPLATE_MAPPING; import json; '
        'print(json.dumps([n in MODEL_MAPPING for n in ("qwen2_5", "qwen2")] + '
        '[n in TEMPLATE_MAPPING for n in ("qwen2", "qwen2_5", "deepseek-r1", "deepseek_r1")]))'
    )
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [False, True, False, True, False, True]
