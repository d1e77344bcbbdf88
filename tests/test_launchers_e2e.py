"""Every launcher, end to end on CPU through the real `swift rlhf`, 2 steps, with a tiny local Qwen2.

What is real: the launcher script and scripts/launch_lib.sh, grpo-data (prepare + filter with the tiny
model's own tokenizer), grpo-guard check, and `swift rlhf` training 2 steps with LoRA and writing a
checkpoint. What a CPU cannot run is taken out of the recipe for this run (a copy with no vLLM, no
DeepSpeed, no bnb quantisation, no ENV device block; passed as RECIPE=...), and CPU-safe overrides
follow as extra arguments. Server-mode lifecycles are in test_launcher_lifecycle.py.

The real `swift rlhf` runs once per distinct command (tests/standins/swift_once/swift, first on PATH): the twelve
launchers' CPU copies make three distinct runs (the DeepSeek QLoRA, the other LoRA recipes, full), and every other
launcher's `swift rlhf` gets a copy of the identical run's output; each launcher's own steps (prepare, filter, model
check, guard, its swift command line) still run in full.
"""

import json
import os
import subprocess

import pytest
import yaml
from conftest import ROOT

from grpo_recipes.recipes import discover

pytestmark = pytest.mark.slow
# a recipe run by `megatron rlhf` (its @command) needs megatron-core and Transformer Engine on CUDA: no CPU run
# (tests/test_recipes_megatron.py dry-runs its launcher)
RECIPES = [r for r in discover() if not r.command]
GPU_ONLY = {
    'ENV',
    'use_vllm',
    'vllm_mode',
    'vllm_gpu_memory_utilization',
    'vllm_max_model_len',
    'vllm_enable_lora',
    'vllm_tensor_parallel_size',
    'vllm_data_parallel_size',
    'vllm_server_host',
    'vllm_server_port',
    'vllm_server_timeout',
    'sleep_level',
    'offload_model',
    'offload_optimizer',
    'deepspeed',
    'move_model_batches',
    'quant_method',
    'quant_bits',
    'template',
    'torch_dtype',
}
# not GPU settings, but the CPU run's 16-token cap truncates every completion of the random model, and
# overlong_filter would then leave nothing in the loss (no gradient to check)
CPU_DROP = {'overlong_filter'}
CPU_ARGS = [
    '--model_type',
    'qwen2',
    '--template',
    'qwen2_5',
    '--max_steps',
    '2',
    '--per_device_train_batch_size',
    '2',
    '--gradient_accumulation_steps',
    '1',
    '--num_generations',
    '2',
    '--max_completion_length',
    '16',
    '--external_plugins',
    str(ROOT / 'tests' / 'standins' / 'toy_reward.py'),
    '--reward_funcs',
    'accuracy',
    'toy_distinct',
    '--check_model',
    'false',
    '--report_to',
    'none',
    '--logging_steps',
    '1',
    '--save_steps',
    '2',
    '--dataloader_num_workers',
    '0',
    # the recipe's held-out eval, once, at the last step, on the CPU run's batch shape
    '--eval_steps',
    '2',
    '--num_generations_eval',
    '2',
    '--per_device_eval_batch_size',
    '2',
]


@pytest.fixture(scope='module')
def tiny(tiny_qwen2):
    return tiny_qwen2


@pytest.fixture(scope='session')
def swift_once(tmp_path_factory):
    """PATH and cache for tests/standins/swift_once/swift: the real swift runs each distinct training command once per
    session; a launcher whose command is the same gets that run's output (its own launcher steps all run)."""
    from conftest import shared_tmp

    return {
        'PATH': os.pathsep.join([str(ROOT / 'tests' / 'standins' / 'swift_once'), os.environ.get('PATH', '')]),
        'SWIFT_ONCE_CACHE': str(shared_tmp(tmp_path_factory) / 'swift-once'),
    }


@pytest.fixture(scope='module')
def gsm8k_like(tmp_path_factory):
    p = tmp_path_factory.mktemp('data') / 'gsm8k.jsonl'
    rows = [
        {'question': f'What is {a} + {b}?', 'answer': f'{a} + {b} = <<{a}+{b}={a + b}>>{a + b}\n#### {a + b}'}
        for a, b in [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 16)]
    ]
    p.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    return p


def cpu_copy(recipe, dest):
    cfg = yaml.safe_load(recipe.path.read_text())
    cpu = {k: v for k, v in cfg.items() if k not in GPU_ONLY | CPU_DROP}
    cpu['use_vllm'] = False
    header = ''.join(ln + '\n' for ln in recipe.path.read_text().splitlines() if ln.startswith('# @'))
    out = dest / recipe.path.parent.name / recipe.path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(cpu))
    return out


def _by_run(recipes):
    """Each recipe as a parameter, slow-ranked by the `swift rlhf` run its CPU copy makes: the first recipe of each
    distinct run (its CPU copy's keys, less those this test and the launcher pass: swift_once's key but for the data
    files, the same everywhere here) rank 0, the rest rank 2 (swift_once hands them that run's output; conftest
    schedules them after the other slow tests, so they find the run done instead of waiting for it)."""
    passed = {a[2:] for a in CPU_ARGS if a.startswith('--')} | {'model', 'dataset', 'val_dataset', 'output_dir'}
    seen = set()
    out = []
    for r in recipes:
        cfg = yaml.safe_load(r.path.read_text()) or {}
        run = json.dumps({k: v for k, v in cfg.items() if k not in GPU_ONLY | CPU_DROP | passed}, sort_keys=True)
        out.append(pytest.param(r, id=r.name, marks=pytest.mark.slow(rank=2 if run in seen else 0)))
        seen.add(run)
    return out


@pytest.mark.parametrize('recipe', _by_run(RECIPES))
def test_launcher_trains_two_steps_on_cpu(recipe, tiny, gsm8k_like, swift_once, tmp_path):
    out = tmp_path / 'run'
    env = {
        **os.environ,
        'RECIPE': str(cpu_copy(recipe, tmp_path / 'recipes')),
        'MODEL': str(tiny),
        'DATASET': str(gsm8k_like),
        'VAL_DATASET': str(gsm8k_like),
        'OUTPUT_DIR': str(out),
        'HF_HUB_OFFLINE': '1',
        **swift_once,
    }
    for k in ('NNODES', 'NODE_RANK', 'MASTER_ADDR', 'NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES'):
        env.pop(k, None)
    proc = subprocess.run(
        ['bash', str(recipe.launcher), *CPU_ARGS], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert 'swift_once: ' in proc.stderr  # the launcher ran this `swift`, found on PATH as a user's would be
    steps = [ln[2:].split()[:2] for ln in proc.stderr.splitlines() if ln.startswith('+ ')]
    assert steps == [
        ['grpo-data', 'prepare-gsm8k'],
        ['grpo-data', 'filter'],
        ['grpo-data', 'prepare-gsm8k'],
        ['grpo-data', 'filter'],
        ['grpo-guard', 'check'],
        ['swift', 'rlhf'],
    ]
    assert sum(1 for _ in (out / 'data' / 'train.jsonl').open()) == 8
    assert sum(1 for _ in (out / 'data' / 'val.jsonl').open()) == 8
    runs = sorted(out.glob('v*-*'))
    assert runs, proc.stderr[-2000:]
    logs = [json.loads(ln) for ln in (runs[-1] / 'logging.jsonl').read_text().splitlines()]
    steps_logged = [row['global_step/max_steps'] for row in logs if 'loss' in row]
    assert steps_logged == ['1/2', '2/2']
    assert any(float(row['grad_norm']) > 0 for row in logs if 'grad_norm' in row)
    assert any('eval_reward' in row for row in logs), 'the held-out eval did not run'
    # the run's completions.jsonl, read back by grpo-data: every logged training prompt is a row of the data
    stats = subprocess.run(
        [
            'grpo-data',
            'stats',
            str(out / 'data' / 'train.jsonl'),
            '--tokenizer',
            str(tiny),
            '--completions',
            str(runs[-1] / 'completions.jsonl'),
            '--json',
            '--quiet',
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert stats.returncode == 0, stats.stderr
    comp = json.loads(stats.stdout)['completions']
    assert comp['rows_seen'] >= 2 and comp['unmatched_prompts'] == 0 and comp['logged_tables'] == 2
    ckpt = runs[-1] / 'checkpoint-2'
    assert (ckpt / 'adapter_model.safetensors').is_file() or (ckpt / 'model.safetensors').is_file()
