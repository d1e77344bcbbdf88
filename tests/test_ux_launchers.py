"""`grpo-guard check recipes/.../X.sh`: the recipe a launcher wraps, with the launcher's environment (issue 21, 16)."""

import json

import pytest
from conftest import ROOT

from grpo_recipes.cli import guard
from grpo_recipes.recipes import discover


def _check_json(args, capsys, monkeypatch, env=None):
    for k in (
        'MODEL',
        'TRAIN_GPUS',
        'GPUS',
        'GPU_TYPE',
        'ROLLOUT_GPUS',
        'ROLLOUT_HOST',
        'NNODES',
        'RECIPE',
        'CUDA_VISIBLE_DEVICES',
        'NPROC_PER_NODE',
    ):
        monkeypatch.delenv(k, raising=False)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    rc = guard.main(['check', *args, '--json'])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize('recipe', discover(), ids=lambda r: r.name)
def test_every_launcher_is_checked_as_its_recipe(recipe, capsys, monkeypatch):
    rc, out = _check_json([str(recipe.launcher)], capsys, monkeypatch)
    assert rc == 0, [f['message'] for f in out['findings'] if f['severity'] == 'error']
    assert out['launch']['config_file'].endswith(recipe.path.name)
    assert out['hardware']['gpus'] == recipe.gpus and out['hardware']['gpu_type'] == recipe.gpu_type
    assert out['hardware']['source'] == 'recipe header'
    if out['config'].get('vllm_mode') == 'server':  # the swift rollout command launch_lib.sh runs is read
        assert out['launch']['rollout'] is not None


def test_launcher_environment_is_applied(capsys, monkeypatch):
    sh = ROOT / 'recipes' / 'qwen2.5-7b-instruct' / 'lora-2xa100-80g.sh'
    rc, out = _check_json([str(sh)], capsys, monkeypatch, env={'TRAIN_GPUS': '0'})
    assert out['plan']['world_size'] == 1
    rc, out = _check_json([str(sh)], capsys, monkeypatch, env={'MODEL': 'acme/never-seen-7b'})
    assert rc == 1 and out['verdict'] == 'UNCHECKED' and out['config']['model'] == 'acme/never-seen-7b'
    rc, out = _check_json([str(sh)], capsys, monkeypatch, env={'GPU_TYPE': 'A100-40G'})
    assert out['hardware']['gpu_type'] == 'A100-40G'
    # the command line's own hardware wins over the header, as it does for launch_lib.sh's guard step
    rc, out = _check_json([str(sh), '--gpus', '4', '--gpu-type', 'H100'], capsys, monkeypatch)
    assert out['hardware']['gpus'] == 4 and out['hardware']['source'] == 'flags'


def test_launcher_with_an_unresolvable_recipe_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    sh = tmp_path / 'x.sh'
    sh.write_text('#!/usr/bin/env bash\nsource lib.sh\ngrpo_launch "$NOWHERE/r.yaml" "$@"\n')
    monkeypatch.delenv('NOWHERE', raising=False)
    assert guard.main(['check', str(sh)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f'{sh}:3' in err[0]


@pytest.mark.parametrize('recipe', discover(), ids=lambda r: r.name)
def test_every_recipe_yaml_is_checked_on_its_header_hardware(recipe, capsys, monkeypatch, tmp_path):
    """`grpo-guard check X.yaml` with no hardware flags (and no nvidia-smi here) plans the card the YAML's header names
    (`# @gpus` / `# @gpu_type`), and a Megatron recipe's YAML is read as the `# @command` its header names, so a
    recipe, or a copy of one, is checked as its launcher checks it rather than UNCHECKED or as `swift rlhf` input."""
    rc, out = _check_json([str(recipe.path)], capsys, monkeypatch)
    assert rc == 0, [f['message'] for f in out['findings'] if f['severity'] == 'error']
    assert out['hardware']['gpus'] == recipe.gpus and out['hardware']['gpu_type'] == recipe.gpu_type
    assert out['hardware']['source'] == 'recipe header'
    assert out['verdict'] == 'OK'


def test_header_hardware_gives_way_to_flags_and_is_not_invented(capsys, monkeypatch, tmp_path):
    """Flags win over the header; a YAML without the header stays without hardware (UNCHECKED memory)."""
    recipe = ROOT / 'recipes' / 'qwen2.5-7b-instruct' / 'lora-2xa100-80g.yaml'
    rc, out = _check_json([str(recipe), '--gpus', '4', '--gpu-type', 'H100-80G'], capsys, monkeypatch)
    assert (out['hardware']['gpus'], out['hardware']['gpu_type'], out['hardware']['source']) == (4, 'H100-80G', 'flags')
    bare = tmp_path / 'mine.yaml'
    bare.write_text('\n'.join(ln for ln in recipe.read_text().splitlines() if not ln.startswith('# @')) + '\n')
    rc, out = _check_json([str(bare)], capsys, monkeypatch)
    assert out['hardware']['gpus'] is None and out['hardware']['source'] == 'unknown'
