"""grpo-data's exit statuses (README: 2 for usage and unreadable input, 1 for data that cannot be used), its
offline line naming only options that exist, and outputs written through a temp file with the umask's mode."""

import os
import stat

import pytest
from conftest import ROOT, run_cli

SAMPLE = ROOT / 'data_tools' / 'sample' / 'gsm8k_train_300.jsonl'


def grpo_data(*args, **kw):
    return run_cli('data_tools.cli', *args, **kw)


@pytest.mark.parametrize('case', ['missing', 'format', 'json', 'columns', 'max-length', 'coverage', 'usage'])
def test_usage_and_unreadable_input_exit_2(tmp_path, case):
    bad_json = tmp_path / 'bad.json'
    bad_json.write_text('{"a": ')
    (tmp_path / 'd.xyz').write_text('x')
    args = {
        'missing': ['stats', str(tmp_path / 'nope.jsonl'), '--quiet'],
        'format': ['stats', str(tmp_path / 'd.xyz'), '--quiet'],
        'json': ['stats', str(bad_json), '--quiet'],
        'columns': ['stats', str(SAMPLE), '--columns', '{not json', '--quiet'],
        'max-length': ['filter', str(SAMPLE), '-o', str(tmp_path / 'o.jsonl'), '--max-length', '0', '--quiet'],
        'coverage': ['stats', str(SAMPLE), '--coverage', '1.5', '--quiet'],
        'usage': ['filter', str(SAMPLE), '--quiet'],  # -o missing
    }[case]
    proc = grpo_data(*args)
    assert proc.returncode == 2, proc.stderr
    assert 'Traceback' not in proc.stderr
    assert not (tmp_path / 'o.jsonl').exists()


def test_data_that_cannot_be_used_is_exit_1(tmp_path):
    src = tmp_path / 'd.jsonl'
    src.write_text('{"foo": "x"}\n')
    proc = grpo_data('stats', str(src), '--quiet')
    assert proc.returncode == 1 and '--columns' in proc.stderr


def test_offline_line_names_the_dataset_argument_not_a_missing_option(monkeypatch, tmp_path):
    from data_tools import swift_datasets
    from data_tools.cli import build_parser

    # stand-in for an unreachable hub (no network here either way): the probe answers "unreachable" at once
    monkeypatch.setattr(swift_datasets, '_reachable', lambda *a, **k: False)
    monkeypatch.setenv('MODELSCOPE_CACHE', str(tmp_path))
    with pytest.raises(swift_datasets.DataSourceError) as e:
        swift_datasets.materialise(['modelscope/gsm8k:main'], tmp_path / 'x.jsonl', use_hf=False)
    msg = str(e.value)
    assert '--dataset' not in msg and 'grpo-data stats /path/train.jsonl' in msg and 'DATASET=' in msg
    with pytest.raises(SystemExit):  # grpo-data has no --dataset option: the dataset is its positional argument
        build_parser().parse_args(['stats', '--dataset', 'x.jsonl'])


@pytest.mark.parametrize('umask,mode', [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_outputs_honour_the_umask(tmp_path, umask, mode):
    out = tmp_path / 'train.jsonl'
    old = os.umask(umask)  # inherited by the child process
    try:
        proc = grpo_data('prepare-gsm8k', str(SAMPLE), '-o', str(out))
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    for p in (out, tmp_path / 'train.rejects.jsonl'):
        assert stat.S_IMODE(p.stat().st_mode) == mode
    assert not [p for p in tmp_path.iterdir() if p.name.endswith('.tmp')]  # renamed into place, nothing left


def test_replacing_an_output_keeps_its_mode(tmp_path):
    out = tmp_path / 'train.jsonl'
    out.write_text('old\n')
    os.chmod(out, 0o640)
    ino = out.stat().st_ino
    proc = grpo_data('prepare-gsm8k', str(SAMPLE), '-o', str(out))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.stat().st_ino != ino  # a new file, renamed over
    assert out.read_text() != 'old\n'
