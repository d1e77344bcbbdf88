"""A recipe run by `megatron rlhf` (its header's `@command`): every recipe verb reads it as Megatron-SWIFT, never as
`swift rlhf`, and its launcher runs the data steps, the guard and `megatron rlhf` on every node."""

import json
import subprocess

from conftest import ROOT, run_cli

from grpo_recipes.cli.recipes import recipe_report
from grpo_recipes.frontends.megatron.checked import MegatronReport
from grpo_recipes.recipes import find

NAME = 'qwen2.5-32b-instruct/full-2x8xa100-80g-megatron'


def test_the_recipe_is_read_as_megatron_rlhf_and_planned_in_band():
    recipe = find(NAME)
    assert recipe.command == ['megatron', 'rlhf'] and set(recipe.validation) == {'snapshot', 'guard'}
    report = recipe_report(recipe)
    assert isinstance(report, MegatronReport) and report.ok
    plan = report.plan
    assert plan['world_size'] == 16 and plan['parallel']['tp'] == 8 and plan['parallel']['dp'] == 2
    assert plan['prompts_per_optimizer_step'] == 8 and plan['generation_batch'] == 128
    # every phase under the card, the peak inside the 75-90% band
    phases, cap = report.phases['phases'], report.phases['capacity_gib']
    assert all(v <= 0.9 * cap for v in phases.values())
    assert 0.75 <= report.phases['peak_gib'] / cap <= 0.90


def test_validate_reads_the_release_snapshot_not_swift_rlhf():
    proc = run_cli('grpo_recipes.cli.recipes', 'validate', NAME, '--json')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row['parsed'] and 'MegatronRLHFArguments (snapshot)' in row['parser'] and row['in_band']


def test_a_megatron_typo_fails_validate(tmp_path):
    src = find(NAME).path
    bad = tmp_path / 'bad.yaml'
    text = src.read_text()
    assert '\nmicro_batch_size: ' in text
    bad.write_text(text.replace('\nmicro_batch_size: ', '\nmicro_batch_sise: '))
    proc = run_cli('grpo_recipes.cli.recipes', 'validate', str(bad), '--json')
    assert proc.returncode == 1
    (row,) = json.loads(proc.stdout)
    assert not row['parsed'] and 'micro_batch_sise' in row['parse_message']


def test_ls_and_arg_and_header():
    rows = json.loads(run_cli('grpo_recipes.cli.recipes', 'ls', '--json').stdout)
    row = next(r for r in rows if r['name'] == NAME)
    assert row['hardware'].startswith('2 nodes') and row['tuner'] == 'full TP8' and row['mode'] == 'colocate'
    proc = run_cli('grpo_recipes.cli.recipes', 'arg', NAME, 'model', 'tensor_model_parallel_size', '@command')
    assert proc.stdout.split('\n')[:3] == ['Qwen/Qwen2.5-32B-Instruct', '8', 'megatron rlhf']
    bad = run_cli('grpo_recipes.cli.recipes', 'arg', NAME, 'per_device_train_batch_size')
    assert bad.returncode == 2 and 'not an argument of `megatron rlhf`' in bad.stderr
    assert run_cli('grpo_recipes.cli.recipes', 'header', '--check', NAME).returncode == 0
    assert run_cli('grpo_recipes.cli.recipes', 'rollout-args', NAME).returncode == 2


def test_a_stale_header_is_caught(tmp_path):
    src = find(NAME).path
    copy = tmp_path / 'full.yaml'
    text = src.read_text()
    assert '\nvllm_gpu_memory_utilization: 0.8\n' in text
    copy.write_text(text.replace('\nvllm_gpu_memory_utilization: 0.8\n', '\nvllm_gpu_memory_utilization: 0.4\n'))
    assert run_cli('grpo_recipes.cli.recipes', 'header', '--check', str(copy)).returncode == 1
    assert run_cli('grpo_recipes.cli.recipes', 'header', '--write', str(copy)).returncode == 0
    assert run_cli('grpo_recipes.cli.recipes', 'header', '--check', str(copy)).returncode == 0
    assert 'util 0.4' in copy.read_text()


def test_the_header_digest_covers_the_arguments_not_the_files_location(tmp_path):
    # a copy elsewhere, unchanged, is as fresh as the recipe; an argument that moves no figure still stales it
    text = find(NAME).path.read_text()
    same = tmp_path / 'elsewhere' / 'full.yaml'
    same.parent.mkdir()
    same.write_text(text)
    assert run_cli('grpo_recipes.cli.recipes', 'header', '--check', str(same)).returncode == 0
    assert '\nlr: 1.0e-6\n' in text
    changed = tmp_path / 'lr.yaml'
    changed.write_text(text.replace('\nlr: 1.0e-6\n', '\nlr: 2.0e-6\n'))
    res = run_cli('grpo_recipes.cli.recipes', 'header', '--check', str(changed))
    assert res.returncode == 1 and 'stale plan header' in res.stdout + res.stderr


def test_cp_copies_the_pair(tmp_path):
    proc = run_cli('grpo_recipes.cli.recipes', 'cp', NAME, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / 'full-2x8xa100-80g-megatron.yaml').read_text().count('# @command: megatron rlhf') == 1
    assert 'launch_lib.sh' in (tmp_path / 'full-2x8xa100-80g-megatron.sh').read_text()


def _dry(env):
    import os

    keep = {k: v for k, v in os.environ.items() if k not in ('DATASET', 'DEMO', 'TOKENIZER', 'USE_HF', 'PREPARE')}
    launcher = ROOT / 'recipes' / f'{NAME}.sh'
    return subprocess.run(
        ['bash', str(launcher)],
        capture_output=True,
        text=True,
        env={**keep, 'DRY_RUN': '1', **env},
        cwd=ROOT,
        timeout=120,
    )


def test_the_launcher_runs_megatron_rlhf_on_every_node(tmp_path):
    missing = _dry({'OUTPUT_DIR': str(tmp_path)})
    assert missing.returncode == 1 and 'export NODE_RANK' in missing.stderr
    proc = _dry({'OUTPUT_DIR': str(tmp_path / 'out'), 'NODE_RANK': '1', 'MASTER_ADDR': '10.0.0.1'})
    assert proc.returncode == 0, proc.stderr
    cmds = [ln[2:] for ln in proc.stderr.splitlines() if ln.startswith('+ ')]
    assert [c.split()[:2] for c in cmds] == [
        ['grpo-data', 'prepare-gsm8k'],
        ['grpo-data', 'filter'],
        ['grpo-data', 'prepare-gsm8k'],  # the held-out eval set
        ['grpo-data', 'filter'],
        ['grpo-guard', 'check'],
        ['megatron', 'rlhf'],
    ]
    recipe = str(ROOT / 'recipes' / f'{NAME}.yaml')
    assert f'-- megatron rlhf {recipe} --model Qwen/Qwen2.5-32B-Instruct' in cmds[4]
    assert cmds[5].startswith(f'megatron rlhf {recipe} --model Qwen/Qwen2.5-32B-Instruct --dataset ')
    assert f'--val_dataset {tmp_path / "out" / "data" / "val.jsonl"}' in cmds[5]
    assert not (tmp_path / 'out').exists()


def test_the_guard_reads_the_launcher_as_megatron():
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(ROOT / 'recipes' / f'{NAME}.sh'), '--json')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out['framework'] == 'megatron' and out['plan']['world_size'] == 16


def test_the_moe_lora_recipe_splits_the_experts_by_ep_and_its_models_are_catalogued():
    report = recipe_report(find('qwen3-30b-a3b/lora-8xa100-80g-megatron'))
    assert isinstance(report, MegatronReport) and report.ok
    assert report.plan['parallel']['ep'] == 8 and report.plan['expert_dp'] == 1
    assert 0.75 <= report.phases['peak_gib'] / report.phases['capacity_gib'] <= 0.90
    catalogue = json.loads((ROOT / 'grpo_recipes' / 'model_configs' / 'catalogue.json').read_text())['models']
    for model in ('Qwen/Qwen3-30B-A3B', 'Qwen/Qwen2.5-32B-Instruct'):
        entry = catalogue[model]
        assert entry['source'].startswith(f'https://huggingface.co/{model}/') and entry['licence']
