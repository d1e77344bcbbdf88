"""DEMO=1 launchers offline (issue 21, 21): a model swift would have to download from an unreachable hub is
refused before launch in one line, not by ms-swift's download traceback."""

import os
import subprocess

from conftest import ROOT

from grpo_recipes.model_reach import WEIGHT_FILES, unreachable

LAUNCHER = ROOT / 'recipes' / 'qwen2.5-7b-instruct' / 'lora-2xa100-40g.sh'


def _offline(host_port):
    return False


def _online(host_port):
    return True


def test_hub_model_offline_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'hf'))
    monkeypatch.setenv('MODELSCOPE_CACHE', str(tmp_path / 'ms'))
    why = unreachable('Qwen/Qwen2.5-7B-Instruct', {}, probe=_offline)
    assert why and 'www.modelscope.cn' in why and 'MODEL=' in why and '\n' not in why
    assert unreachable('Qwen/Qwen2.5-7B-Instruct', {}, probe=_online) is None
    why = unreachable('Qwen/Qwen2.5-7B-Instruct', {'USE_HF': '1', 'HF_HUB_OFFLINE': '1'}, probe=_online)
    assert why and 'HF_HUB_OFFLINE' in why


def test_local_dir_and_cached_weights_need_no_hub(tmp_path, monkeypatch):
    local = tmp_path / 'model'
    local.mkdir()
    assert unreachable(str(local), {}, probe=_offline) is None
    assert 'no such directory' in unreachable(str(tmp_path / 'missing'), {}, probe=_offline)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'hf'))
    monkeypatch.setenv('MODELSCOPE_CACHE', str(tmp_path / 'ms'))
    snap = tmp_path / 'hf' / 'hub' / 'models--Qwen--Qwen2.5-7B-Instruct' / 'snapshots' / 'abc'
    snap.mkdir(parents=True)
    (snap / 'config.json').write_text('{}')
    assert unreachable('Qwen/Qwen2.5-7B-Instruct', {}, probe=_offline)  # a config alone is not the weights
    (snap / WEIGHT_FILES[0]).write_text('')
    assert unreachable('Qwen/Qwen2.5-7B-Instruct', {}, probe=_offline) is None


def test_demo_launcher_offline_stops_in_one_line(tmp_path):
    # this machine cannot reach the hubs (the tests run offline); the cache dirs are empty temp dirs
    env = {
        **os.environ,
        'DEMO': '1',
        'OUTPUT_DIR': str(tmp_path / 'out'),
        'HF_HOME': str(tmp_path / 'hf'),
        'MODELSCOPE_CACHE': str(tmp_path / 'ms'),
        'PYTHONPATH': str(ROOT),
    }
    env.pop('MODEL', None)
    env.pop('SWIFT', None)
    if unreachable('Qwen/Qwen2.5-7B-Instruct', env) is None:
        import pytest

        pytest.skip('a hub is reachable from here')
    proc = subprocess.run(['bash', str(LAUNCHER)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Qwen/Qwen2.5-7B-Instruct' in lines[0] and 'Traceback' not in proc.stderr
    assert not (tmp_path / 'out').exists()  # stopped before the data step wrote anything
