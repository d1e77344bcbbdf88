"""grpo-data reads datasets the way `swift rlhf --dataset` names them, through ms-swift's own loader
(swift.dataset.load_dataset): `path#N` sampling, hub ids with a subset from a local cache, several datasets,
streaming; offline without a cache it exits 2 in one line. No hub is reachable here: the Hugging Face cache
is built by the test with datasets' own builder (what a first online load leaves behind)."""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow
SAMPLE = ROOT / 'data_tools' / 'sample' / 'gsm8k_train_300.jsonl'


def grpo_data(*args, env=None, cwd=None):
    full = {**os.environ, 'HF_HUB_OFFLINE': '1', **(env or {})}
    return subprocess.run(
        [sys.executable, '-m', 'data_tools.cli', *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd or ROOT,
        timeout=600,
    )


@pytest.fixture(scope='module')
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp('prep') / 'gsm8k.jsonl'
    proc = grpo_data('prepare-gsm8k', str(SAMPLE), '-o', str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope='module')
def hf_cache(tmp_path_factory):
    """openai/gsm8k, subset main, in a Hugging Face datasets cache, as datasets' builder writes it."""
    home = tmp_path_factory.mktemp('hf_home')
    code = (
        'import glob, os\nfrom datasets.packaged_modules.json.json import Json\n'
        f'root = {str(home / "datasets")!r}\n'
        "b = Json(cache_dir=root, dataset_name='gsm8k', config_name='main', repo_id='openai/gsm8k', "
        f"data_files={{'train': {str(SAMPLE)!r}}}, hash='0123456789abcdef')\n"
        'b.download_and_prepare()\n'
        "d = glob.glob(root + '/openai___gsm8k/main-*')[0]\n"
        "os.rename(d, root + '/openai___gsm8k/main')\n"
    )  # the name a hub load gives the config dir
    proc = subprocess.run(
        [sys.executable, '-c', code],
        capture_output=True,
        text=True,
        env={**os.environ, 'HF_HOME': str(home), 'HF_HUB_OFFLINE': '1'},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return home


def test_sample_syntax_reads_the_rows_ms_swift_samples(prepared, tmp_path):
    out = tmp_path / 'kept.jsonl'
    proc = grpo_data('filter', f'{prepared}#50', '-o', str(out), '--max-length', '4096', '--quiet', '--json')
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary['input_rows'] == summary['kept'] == 50 and summary['input'] == f'{prepared}#50'
    code = (
        'import json\nfrom swift.dataset import load_dataset\n'
        f'ds, _ = load_dataset([{str(prepared) + "#50"!r}], remove_unused_columns=False, seed=42)\n'
        "print(json.dumps([r['messages'][0]['content'] for r in ds]))"
    )
    ref = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr[-2000:]
    expected = json.loads(ref.stdout.strip().splitlines()[-1])
    got = [json.loads(line)['messages'][0]['content'] for line in out.read_text().splitlines()]
    assert got == expected and len(set(got)) == 50


def test_hub_id_with_subset_resolves_from_the_cache(hf_cache, tmp_path):
    out = tmp_path / 'prepared.jsonl'
    proc = grpo_data('prepare-gsm8k', '--use-hf', 'openai/gsm8k:main', '-o', str(out), env={'HF_HOME': str(hf_cache)})
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 300 and rows[0]['solution'] == '72' and rows[0]['messages'][0]['role'] == 'user'
    stats = grpo_data('stats', '--use-hf', 'openai/gsm8k:main#20', '--json', env={'HF_HOME': str(hf_cache)})
    assert stats.returncode == 0 and json.loads(stats.stdout)['count'] == 20


def test_hub_id_offline_without_cache_is_one_line_and_exit_2(tmp_path):
    for args in (['--use-hf', 'openai/gsm8k:main'], ['modelscope/gsm8k:main']):
        proc = grpo_data(
            'stats', *args, env={'HF_HOME': str(tmp_path / 'empty'), 'MODELSCOPE_CACHE': str(tmp_path / 'ms')}
        )
        assert proc.returncode == 2, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith('error: ') and 'offline' in lines[0]
        assert 'cache' in lines[0] and 'local file' in lines[0] and 'Traceback' not in proc.stderr


def test_missing_local_file_is_not_looked_up_on_a_hub(tmp_path):
    proc = grpo_data('stats', str(tmp_path / 'nope.jsonl#10'))
    assert proc.returncode == 2 and 'no such file' in proc.stderr  # unreadable input: 2 (issue 21 item 18)


def test_several_datasets_streamed_keep_the_accounting(prepared, tmp_path):
    out = tmp_path / 'kept.jsonl'
    proc = grpo_data(
        'filter',
        str(prepared),
        str(prepared),
        '--streaming',
        '-o',
        str(out),
        '--max-length',
        '120',
        '--quiet',
        '--json',
    )
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s['input_rows'] == 600 and s['kept'] + s['rejected'] + s['malformed'] == 600 and 0 < s['kept'] < 600
    rejects = (tmp_path / 'kept.rejects.jsonl').read_text().splitlines()
    assert len(rejects) == s['rejected'] + s['malformed']
