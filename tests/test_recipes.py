"""Recipes: parsed by ms-swift's real parser, inside the 75-90% band on their hardware, headers in sync."""

import json
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import yaml
from conftest import ROOT, run_cli

from grpo_recipes.cli.recipes import recipe_report
from grpo_recipes.frontends import read_launch as load_launch
from grpo_recipes.recipes import LEVELS, discover

RECIPES = discover()
IDS = [r.name for r in RECIPES]


def test_required_set_is_shipped():
    names = set(IDS)
    for hw in ('2xa100-80g', '4xa100-80g', '2xa100-40g', '4xa100-40g'):
        assert f'qwen2.5-7b-instruct/lora-{hw}' in names
        assert f'qwen2.5-32b-instruct-gptq-int4/lora-{hw}' in names
    assert any('multinode' in n for n in names)
    assert (ROOT / 'recipes' / 'deepseek-r1-distill-qwen-32b' / 'NOTE-a100-40g.md').is_file()


@pytest.mark.parametrize('recipe', RECIPES, ids=IDS)
def test_guard_plan_in_band(recipe):
    report = recipe_report(recipe)
    assert report.ok, [f.message for f in report.findings if f.severity == 'error']
    assert not [f.message for f in report.findings if f.severity == 'warning']
    assert report.memory, 'no memory plan'
    for m in report.memory:
        # a server-mode training GPU has no vLLM share to fill it: only the micro-batch moves it, in steps, so
        # it only has to stay under 90%; every colocated and every rollout GPU is planned into 75-90%
        low = 0.0 if m.role == 'train' else 0.75
        assert low <= m.peak_fraction <= 0.90, (m.gpu, m.role, m.peak_fraction)
        if m.vllm.get('rollout_tokens'):
            assert m.vllm['kv_tokens'] >= m.vllm['rollout_tokens']
    assert recipe.launcher.is_file()
    assert set(recipe.validation) <= set(LEVELS) and 'gpu-run' not in recipe.validation


@pytest.mark.parametrize('recipe', RECIPES, ids=IDS)
def test_lengths_follow_the_data(recipe):
    report = recipe_report(recipe)
    # a recipe run by its own command (megatron rlhf) has no GRPOConfig: its front end says its lengths
    cfg = SimpleNamespace(**report.lengths()) if hasattr(report, 'lengths') else report.cfg
    # grpo-data stats on the prepared GSM8K train set: 99.9% of prompts <= 216 tokens (README)
    assert cfg.max_length >= 216
    assert cfg.vllm_max_model_len >= cfg.max_length + cfg.max_completion_length
    assert cfg.truncation_strategy == 'delete'


def test_headers_are_in_sync_with_the_guard():
    proc = run_cli('grpo_recipes.cli.recipes', 'header', '--check')
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_every_recipe_parses_with_ms_swift():
    from grpo_recipes.realparse import validate, validate_many

    # `swift rlhf` recipes through ms-swift's parser in one subprocess; a recipe run by its own command
    # (`@command: megatron rlhf`) through its front end's validator
    swift = [r for r in RECIPES if not r.command]
    results = validate_many([load_launch([str(r.path)], environ={}) for r in swift])
    results += [validate(load_launch(r.launch_argv(), environ={})) for r in RECIPES if r.command]
    names = swift + [r for r in RECIPES if r.command]
    assert [(r.name, res.message) for r, res in zip(names, results) if not res.ok] == []


def test_ls_json():
    proc = run_cli('grpo_recipes.cli.recipes', 'ls', '--json')
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {r['name'] for r in rows} == set(IDS)
    for r in rows:
        for key in ('name', 'path', 'model', 'hardware', 'mode', 'peak_fraction', 'validation'):
            assert key in r
        assert 0.75 <= r['peak_fraction'] <= 0.90


def test_cp_copies_the_pair_and_refuses_to_overwrite(tmp_path):
    name = 'qwen2.5-32b-instruct-gptq-int4/lora-2xa100-40g'
    proc = run_cli('grpo_recipes.cli.recipes', 'cp', name, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    copy = (tmp_path / 'lora-2xa100-40g.yaml').read_text()  # the original, but its launch line names the copy
    assert copy == (ROOT / 'recipes' / f'{name}.yaml').read_text().replace(
        f'bash recipes/{name}.sh', f'bash {tmp_path / "lora-2xa100-40g.sh"}'
    )
    assert 'launch_lib.sh' in (tmp_path / 'lora-2xa100-40g.sh').read_text()
    again = run_cli('grpo_recipes.cli.recipes', 'cp', name, str(tmp_path))
    assert again.returncode == 2 and 'already exist' in again.stderr


def test_unknown_recipe_is_a_clear_error():
    proc = run_cli('grpo_recipes.cli.recipes', 'plan', 'nope')
    assert proc.returncode == 2 and "no recipe named 'nope'" in proc.stderr


def dry_run(recipe, env=None, *args):
    import os

    inherited = {k: v for k, v in os.environ.items() if k not in ('DATASET', 'DEMO', 'TOKENIZER', 'USE_HF', 'PREPARE')}
    full = {**inherited, 'DRY_RUN': '1', **(env or {})}
    return subprocess.run(
        ['bash', str(recipe.launcher), *args], capture_output=True, text=True, env=full, cwd=ROOT, timeout=120
    )


def test_dry_run_prints_every_step_in_order_and_runs_nothing(tmp_path):
    recipe = next(r for r in RECIPES if r.name == 'qwen2.5-32b-instruct-gptq-int4/lora-2xa100-40g')
    proc = dry_run(recipe, {'OUTPUT_DIR': str(tmp_path / 'out'), 'TRAIN_GPUS': '0'}, '--max_steps', '5')
    assert proc.returncode == 0, proc.stderr
    cmds = [ln[2:] for ln in proc.stderr.splitlines() if ln.startswith('+ ')]
    assert [c.split()[0:2] for c in cmds] == [
        ['grpo-data', 'prepare-gsm8k'],
        ['grpo-data', 'filter'],
        ['grpo-data', 'prepare-gsm8k'],
        ['grpo-data', 'filter'],
        ['grpo-guard', 'check'],
        ['env', 'CUDA_VISIBLE_DEVICES=1'],
        ['swift', 'rlhf'],
    ]
    assert '--max-length 256' in cmds[1] and '--max-length 256' in cmds[3]
    # the held-out eval set: the bundled GSM8K test sample, prepared and filtered like the train rows, passed on
    assert 'data_tools/sample/gsm8k_test_200.jsonl' in cmds[2]
    val = str(tmp_path / 'out' / 'data' / 'val.jsonl')
    assert f'-o {val}' in cmds[3] and f'--val_dataset {val}' in cmds[4] and f'--val_dataset {val}' in cmds[6]
    assert '--rollout CUDA_VISIBLE_DEVICES=1\\ ' in cmds[4]
    assert 'rollout --model Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4' in cmds[5]
    assert '--vllm_enable_lora true' in cmds[5] and '--vllm_gpu_memory_utilization 0.84' in cmds[5]
    assert cmds[6].endswith('--max_steps 5')
    assert not (tmp_path / 'out').exists()


def test_multinode_launcher_requires_rank_and_master(tmp_path):
    recipe = next(r for r in RECIPES if 'multinode' in r.name)
    proc = dry_run(recipe, {'OUTPUT_DIR': str(tmp_path)})
    assert proc.returncode == 1 and 'export NODE_RANK' in proc.stderr
    ok = dry_run(
        recipe, {'OUTPUT_DIR': str(tmp_path), 'NODE_RANK': '1', 'MASTER_ADDR': '10.0.0.1', 'ROLLOUT_HOST': '10.0.0.3'}
    )
    assert ok.returncode == 0, ok.stderr
    assert '--vllm_server_host 10.0.0.3' in ok.stderr
    role = dry_run(recipe, {'ROLE': 'rollout'})
    assert role.returncode == 0 and 'CUDA_VISIBLE_DEVICES=0,1,2,3 swift rollout' in role.stderr


def test_launchers_are_shellcheck_clean():
    if shutil.which('shellcheck') is None:
        pytest.skip('shellcheck not installed (.ci/run installs it)')
    files = [str(p) for p in sorted((ROOT / 'recipes').glob('*/*.sh'))] + [str(ROOT / 'scripts' / 'launch_lib.sh')]
    proc = subprocess.run(['shellcheck', '-x', '-S', 'style', *files], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize('recipe', RECIPES, ids=[r.name for r in RECIPES])
def test_launcher_trains_on_the_full_dataset_with_the_models_own_tokenizer(recipe, tmp_path):
    env = {'OUTPUT_DIR': str(tmp_path / 'out'), 'NODE_RANK': '0', 'MASTER_ADDR': '10.0.0.1', 'USE_HF': '0'}
    proc = dry_run(recipe, env)
    assert proc.returncode == 0, proc.stderr
    cmds = [ln[2:] for ln in proc.stderr.splitlines() if ln.startswith('+ ')]
    assert cmds[0].startswith('grpo-data prepare-gsm8k modelscope/gsm8k:main ')
    model = yaml.safe_load(recipe.path.read_text())['model']
    assert f'--tokenizer {model}' in cmds[1] and 'gsm8k_train_300' not in proc.stderr


def test_demo_uses_the_bundled_sample_and_says_so(tmp_path):
    recipe = next(r for r in RECIPES if r.name == 'qwen2.5-7b-instruct/lora-2xa100-40g')
    proc = dry_run(recipe, {'OUTPUT_DIR': str(tmp_path / 'out'), 'DEMO': '1'})
    assert proc.returncode == 0, proc.stderr
    cmds = [ln[2:] for ln in proc.stderr.splitlines() if ln.startswith('+ ')]
    assert 'data_tools/sample/gsm8k_train_300.jsonl' in cmds[0] and '--tokenizer' not in cmds[1]
    assert 'DEMO=1: the bundled 300-row GSM8K sample' in proc.stderr
