"""`grpo-recipes header` (issue 21, 17): --check fails on a header planned from other inputs, even when every
figure is the same; --write never drops a line it did not write."""

import shutil

import pytest
from conftest import ROOT

from grpo_recipes.cli import recipes as recipes_cli

SRC = ROOT / 'recipes' / 'qwen2.5-7b-instruct' / 'lora-2xa100-80g.yaml'


@pytest.fixture
def recipe(tmp_path, monkeypatch):
    root = tmp_path / 'recipes'
    (root / 'acme').mkdir(parents=True)
    path = root / 'acme' / 'lora.yaml'
    shutil.copy(SRC, path)
    shutil.copy(SRC.with_suffix('.sh'), path.with_suffix('.sh'))
    monkeypatch.setenv('GRPO_RECIPES_DIR', str(root))
    assert recipes_cli.main(['header', '--check']) == 0  # the copy's header is current
    return path


def _edit(path, old, new):
    text = path.read_text(encoding='utf-8')
    assert old in text
    path.write_text(text.replace(old, new), encoding='utf-8')


@pytest.mark.parametrize(
    'old, new',
    [
        # a model with the same config.json (the bundled one is matched by its name): every figure is the same
        ('model: Qwen/Qwen2.5-7B-Instruct', 'model: my-org/Qwen2.5-7B-Instruct'),
        ('learning_rate: 1.0e-5', 'learning_rate: 2.0e-5'),  # a field no figure shows
        ('# @gpu_type: A100-80G', '# @gpu_type: H100'),
    ],
)
def test_check_fails_on_a_header_planned_from_other_inputs(recipe, old, new, capsys):
    _edit(recipe, old, new)
    assert recipes_cli.main(['header', '--check']) == 1
    assert 'stale plan header(s): acme/lora' in capsys.readouterr().err
    assert recipes_cli.main(['header', '--write']) == 0
    assert recipes_cli.main(['header', '--check']) == 0


def test_write_keeps_user_lines_outside_the_block(recipe):
    _edit(recipe, '# --- end plan\n', '# --- end plan\n# my note: tried util 0.5 first\n')
    _edit(recipe, '# @gpus: 2\n', '# @gpus: 2\n# another note above the block\n')
    _edit(recipe, 'learning_rate: 1.0e-5', 'learning_rate: 3.0e-5')
    assert recipes_cli.main(['header', '--write']) == 0
    text = recipe.read_text(encoding='utf-8')
    assert '# my note: tried util 0.5 first' in text and '# another note above the block' in text
    assert 'learning_rate: 3.0e-5' in text
    assert recipes_cli.main(['header', '--check']) == 0


@pytest.mark.parametrize('inside', ['# my note inside the block', 'save_steps: 50'])
def test_write_refuses_to_drop_a_line_inside_the_block(recipe, inside, capsys):
    _edit(recipe, '# --- end plan\n', f'{inside}\n# --- end plan\n')
    before = recipe.read_text(encoding='utf-8')
    assert recipes_cli.main(['header', '--write']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and inside in err[0] and str(recipe) in err[0]
    assert recipe.read_text(encoding='utf-8') == before  # nothing half-written


def test_write_refuses_broken_markers(recipe, capsys):
    _edit(recipe, '# --- end plan\n', '')
    before = recipe.read_text(encoding='utf-8')
    assert recipes_cli.main(['header', '--write']) == 2
    assert 'markers are broken' in capsys.readouterr().err
    assert recipe.read_text(encoding='utf-8') == before
    assert recipes_cli.main(['header', '--check']) == 1
