"""Issue 31 items 4 and 5: bounded and clean on any input (one line, a non-zero exit, nothing half-written), and the
small lies (wrong exits, wrong numbers, stale paths)."""

import json
import subprocess
import sys

import pytest
from conftest import EXAMPLE, ROOT, run_cli
from helpers import make

from data_tools import cli as data_cli
from grpo_recipes.cli import guard, recipes

RECIPE = 'qwen2.5-7b-instruct/lora-2xa100-80g'
RECIPE_YAML = ROOT / 'recipes' / f'{RECIPE}.yaml'
SAMPLE = ROOT / 'data_tools' / 'sample' / 'gsm8k_train_300.jsonl'


def one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith('error: '), err
    assert 'Traceback' not in err
    return lines[0]


# --- tracebacks -----------------------------------------------------------------------------------------------------


def test_cp_onto_an_existing_file_is_one_line(tmp_path, capsys):
    dest = tmp_path / 'existing'
    dest.write_text('mine')
    assert recipes.main(['cp', RECIPE, str(dest)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert str(dest) in line and 'not a directory' in line
    assert dest.read_text() == 'mine'


def test_cp_under_a_file_is_one_line_and_writes_nothing(tmp_path, capsys):
    (tmp_path / 'f').write_text('x')
    assert recipes.main(['cp', RECIPE, str(tmp_path / 'f' / 'sub')]) == 2
    assert str(tmp_path / 'f' / 'sub') in one_line_error(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['f']


def test_cp_into_a_missing_directory_creates_it(tmp_path, capsys):
    dest = tmp_path / 'a' / 'b'
    assert recipes.main(['cp', RECIPE, str(dest)]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ['lora-2xa100-80g.sh', 'lora-2xa100-80g.yaml']


@pytest.mark.parametrize('value', ['inf', '-inf', 'nan', '-1', '0', '1e300'])
def test_gpu_mem_must_be_a_finite_positive_capacity(value, capsys):
    assert guard.main(['check', str(EXAMPLE), '--gpus', '2', f'--gpu-mem={value}']) == 2
    assert '--gpu-mem' in one_line_error(capsys.readouterr().err)


def _deep_yaml(tmp_path):
    p = tmp_path / 'deep.yaml'
    p.write_text('rlhf_type: grpo\nmodel: ' + '[' * 10000 + ']' * 10000 + '\n')
    return p


def _laughs_yaml(tmp_path):
    lines = ['rlhf_type: grpo', 'model: Qwen/Qwen2.5-7B-Instruct', 'a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol]']
    lines += [f'a{i}: &a{i} [' + ', '.join([f'*a{i - 1}'] * 9) + ']' for i in range(1, 12)]
    p = tmp_path / 'laughs.yaml'
    p.write_text('\n'.join(lines + ['dataset: *a11']) + '\n')
    return p


@pytest.mark.parametrize('case', ['deep-yaml', 'deep-json', 'laughs', 'cycle'])
def test_hostile_config_files_are_refused_in_one_line(tmp_path, case):
    if case == 'deep-yaml':
        path, want = _deep_yaml(tmp_path), 'nested deeper than'
    elif case == 'deep-json':
        path, want = tmp_path / 'deep.json', 'nested deeper than'
        path.write_text('{"model": ' + '[' * 10000 + ']' * 10000 + '}')
    elif case == 'laughs':
        path, want = _laughs_yaml(tmp_path), 'aliases'
    else:
        path, want = tmp_path / 'cycle.yaml', 'cycle'
        path.write_text('rlhf_type: grpo\nmodel: &m [a, *m]\n')
    # a subprocess with a timeout: before the fix the alias bomb hung and deep nesting raised RecursionError
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(path), '--gpus', '1', '--gpu-type', 'A100-80G', timeout=60)
    line = one_line_error(proc.stderr)
    assert proc.returncode == 2 and want in line and str(path) in line, proc.stderr


def test_bounded_yaml_reads_recipes_as_pyyaml_does():
    import yaml

    from grpo_recipes.bounded_load import loads_json, safe_load_yaml

    for p in sorted((ROOT / 'recipes').glob('*/*.yaml')):
        text = p.read_text(encoding='utf-8')
        assert safe_load_yaml(text) == yaml.safe_load(text), p
    assert safe_load_yaml('a: &x [1, 2]\nb: *x\n') == {'a': [1, 2], 'b': [1, 2]}
    assert safe_load_yaml('') is None
    assert loads_json('{"a": "[[[[", "b": [1, {"c": "\\"]"}]}') == {'a': '[[[[', 'b': [1, {'c': '"]'}]}


# --- wrong exits ----------------------------------------------------------------------------------------------------


def test_a_swift_launch_without_model_is_an_error():
    _, report = make(drop=('model',))
    found = [f for f in report.findings if f.rule == 'args.model-missing']
    assert found and found[0].severity == 'error' and 'Please set --model' in found[0].message
    assert not [f for f in make()[1].findings if f.rule == 'args.model-missing']


@pytest.mark.parametrize('rank', [0, -4])
def test_lora_rank_must_be_positive(rank):
    _, report = make({'lora_rank': rank})
    found = [f for f in report.findings if f.rule == 'args.lora-rank']
    assert found and found[0].severity == 'error' and 'positive integer' in found[0].message
    assert not [f for f in make({'lora_rank': 1})[1].findings if f.rule == 'args.lora-rank']
    assert not [f for f in make({'lora_rank': 0, 'tuner_type': 'full'})[1].findings if f.rule == 'args.lora-rank']


def test_prepare_gsm8k_on_other_data_exits_1_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / 'other.jsonl'
    src.write_text('{"prompt": "hi", "response": "there"}\n{"prompt": "a", "response": "b"}\n')
    out = tmp_path / 'out.jsonl'
    assert data_cli.main(['prepare-gsm8k', str(src), '-o', str(out)]) == 1
    line = one_line_error(capsys.readouterr().err)
    assert str(src) in line and 'GSM8K' in line and "'question'" in line
    assert list(tmp_path.iterdir()) == [src]


def test_prepare_gsm8k_keeps_real_rows(tmp_path, capsys):
    out = tmp_path / 'out.jsonl'
    assert data_cli.main(['prepare-gsm8k', str(SAMPLE), '-o', str(out)]) == 0
    assert len(out.read_text().splitlines()) == 300


@pytest.mark.parametrize('json_out', [False, True])
def test_a_closed_pipe_keeps_the_verdicts_exit_status(json_out):
    """`grpo-guard check ... | head -1`: 0 for a launch that passes, 1 for one that does not, never a traceback."""
    for gpus, gpu_type, want in (('2', 'A100-80G', 0), ('1', 'A100-40G', 1)):
        cmd = [
            sys.executable,
            '-m',
            'grpo_recipes.cli.guard',
            'check',
            str(RECIPE_YAML),
            '--gpus',
            gpus,
            '--gpu-type',
            gpu_type,
            *(['--json'] if json_out else []),
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        proc.stdout.readline()
        proc.stdout.close()  # the reader goes away, as `head -1` does
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == want, err
        assert 'Traceback' not in err and 'BrokenPipe' not in err


@pytest.mark.parametrize(
    'argv', [['grpo_recipes.cli.recipes', 'ls'], ['data_tools.cli', 'stats', str(SAMPLE), '--quiet']]
)
def test_recipes_and_data_survive_a_closed_pipe(argv):
    proc = subprocess.Popen([sys.executable, '-m', *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # gone before the first write (both spend a second measuring first)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and 'Traceback' not in err, err


def test_trace_refuses_what_check_refuses(tmp_path, capsys):
    cfg = tmp_path / 'r0.yaml'
    cfg.write_text(RECIPE_YAML.read_text().replace('lora_rank: 16', 'lora_rank: 0'))
    assert 'lora_rank: 0' in cfg.read_text()
    assert guard.main(['trace', str(cfg)]) == 1
    line = one_line_error(capsys.readouterr().err)
    assert 'args.lora-rank' in line and '--force' in line


# --- small lies -----------------------------------------------------------------------------------------------------


def test_kept_share_is_all_rows_or_rounded_down():
    assert data_cli.kept_text(300, 300) == 'all 300 rows (100%)'
    assert data_cli.kept_text(10000, 10001) == '10,000 of 10,001 rows (99.9%)'  # {:.1%} said 100.0%
    assert data_cli.kept_text(297, 300) == '297 of 300 rows (99.0%)'


def test_stats_says_all_rows_when_max_length_keeps_them(tmp_path):
    src = tmp_path / 'same.jsonl'
    src.write_text('{"query": "What is 2 + 2?"}\n' * 50)  # one length: p99 keeps every row
    proc = run_cli('data_tools.cli', 'stats', str(src), '--quiet', env={'COLUMNS': '200'})
    assert proc.returncode == 0, proc.stderr
    assert 'keeps all 50 rows (100%)' in proc.stdout and '99.0%' not in proc.stdout
    st = json.loads(run_cli('data_tools.cli', 'stats', str(src), '--json').stdout)
    assert st['kept'] == st['count'] == 50


def test_ls_shows_the_multi_node_recipe_as_nodes_and_a_rollout_node():
    rows = {r['name']: r for r in json.loads(run_cli('grpo_recipes.cli.recipes', 'ls', '--json').stdout)}
    multi = rows['qwen2.5-7b-instruct/lora-2x4xa100-80g-multinode']
    assert multi['hardware'] == '2 nodes × 4x A100-80G + a rollout node' and multi['nodes'] == 2
    assert rows[RECIPE]['hardware'] == '2x A100-80G' and rows[RECIPE]['nodes'] == 1
    from grpo_recipes.cli.ls_table import _cells

    assert _cells(multi, 'P')[2].splitlines() == ['2 nodes ×', '4xA100-80G', '+ rollout']


def test_cp_points_the_copy_at_itself(tmp_path, capsys):
    assert recipes.main(['cp', RECIPE, str(tmp_path)]) == 0
    yaml_text = (tmp_path / 'lora-2xa100-80g.yaml').read_text()
    assert f'# Launch: bash {tmp_path / "lora-2xa100-80g.sh"}' in yaml_text
    assert 'recipes/qwen2.5-7b-instruct' not in yaml_text
    sh = (tmp_path / 'lora-2xa100-80g.sh').read_text()
    lib = ROOT / 'scripts' / 'launch_lib.sh'
    assert f'source "{lib}"' in sh and f'# shellcheck source={lib}' in sh and '../../scripts' not in sh
    # the rest of the recipe is the original's, byte for byte
    original = RECIPE_YAML.read_text().splitlines()
    assert yaml_text.splitlines()[:1] + yaml_text.splitlines()[2:] == original[:1] + original[2:]


def test_header_check_hint_names_the_users_file(tmp_path, capsys):
    assert recipes.main(['cp', RECIPE, str(tmp_path)]) == 0
    mine = tmp_path / 'lora-2xa100-80g.yaml'
    mine.write_text(mine.read_text().replace('lora_rank: 16', 'lora_rank: 32'))
    capsys.readouterr()
    assert recipes.main(['header', '--check', str(mine)]) == 1
    err = capsys.readouterr().err
    assert f'grpo-recipes header --write {mine}`' in err


@pytest.mark.parametrize('main', [guard.main, recipes.main, data_cli.main])
def test_version(main, capsys):
    from importlib.metadata import version

    assert main(['--version']) == 0
    assert version('grpo-recipes') in capsys.readouterr().out


def test_a_checkpoint_may_supply_the_model():
    """ms-swift reads --model from a checkpoint's args.json (3.x --ckpt_dir: tests/data/wild creft-cad-choice-3.4)."""
    for flag in ('adapters', 'ckpt_dir', 'resume_from_checkpoint'):
        _, report = make({flag: '/ckpt/checkpoint-10'}, drop=('model',))
        assert 'args.model-missing' not in {f.rule for f in report.findings}, flag
