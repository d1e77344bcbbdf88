"""CLI contract: help, exit codes, one clear line for bad input (no traceback)."""
import pytest

from conftest import run_cli


@pytest.mark.parametrize('module', ['grpo_recipes.cli.guard', 'grpo_recipes.cli.recipes', 'data_tools.cli'])
def test_help_works(module):
    proc = run_cli(module, '--help')
    assert proc.returncode == 0
    assert 'usage:' in proc.stdout


@pytest.mark.parametrize('text, expect', [
    (None, 'no such file'),
    ('rlhf_type: grpo\n  bad: [\n', 'invalid YAML'),
    ('ENV: 3\nrlhf_type: grpo\n', '`ENV:` must be a mapping'),
])
def test_bad_input_is_one_line_exit_2(tmp_path, text, expect):
    path = tmp_path / 'c.yaml'
    if text is not None:
        path.write_text(text)
    proc = run_cli('grpo_recipes.cli.guard', 'validate', str(path))
    assert proc.returncode == 2
    assert 'Traceback' not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0] and str(path) in lines[0]


def test_usage_error_exit_2():
    assert run_cli('grpo_recipes.cli.guard', 'validate').returncode == 2
    assert run_cli('grpo_recipes.cli.guard', 'frobnicate').returncode == 2


def test_unknown_model_is_a_clear_error(tmp_path):
    p = tmp_path / 'c.yaml'
    p.write_text('rlhf_type: grpo\nmodel: someone/NotAModel-7B\n')
    proc = run_cli('grpo_recipes.cli.guard', 'validate', str(p))
    assert proc.returncode == 2
    assert '--model someone/NotAModel-7B' in proc.stderr and 'Traceback' not in proc.stderr
