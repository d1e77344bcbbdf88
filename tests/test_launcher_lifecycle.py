"""Server-mode launcher lifecycle: rollout start, health wait, timeout, cleanup on failure and SIGINT.

`swift` is replaced by tests/standins/fake_swift, a clearly named STAND-IN that serves /health/ on
loopback for `rollout` and plays a trainer for `rlhf`; a real `swift rollout` needs vLLM on a GPU.
Everything else (data steps, grpo-guard check, the launcher and scripts/launch_lib.sh) is real.
"""

import json
import os
import signal
import socket
import subprocess
import time

import pytest
import yaml
from conftest import ROOT, sigint_default

from grpo_recipes.recipes import find

RECIPE = find('qwen2.5-32b-instruct-gptq-int4/lora-2xa100-40g')
FAKE = ROOT / 'tests' / 'standins' / 'fake_swift'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split()[2] != 'Z'
    except FileNotFoundError:
        return False


def wait_gone(pid, timeout=40):
    deadline = time.time() + timeout
    while time.time() < deadline and alive(pid):
        time.sleep(0.2)
    return not alive(pid)


@pytest.fixture
def setup(tmp_path):
    port = free_port()
    cfg = yaml.safe_load(RECIPE.path.read_text())
    cfg['vllm_server_port'] = [port]
    header = ''.join(ln + '\n' for ln in RECIPE.path.read_text().splitlines() if ln.startswith('# @'))
    recipe = tmp_path / RECIPE.path.parent.name / RECIPE.path.name
    recipe.parent.mkdir(parents=True)
    recipe.write_text(header + yaml.safe_dump(cfg))
    pids = tmp_path / 'pids'
    pids.mkdir()
    env = {
        **os.environ,
        'RECIPE': str(recipe),
        'SWIFT': str(FAKE),
        'FAKE_PID_DIR': str(pids),
        'OUTPUT_DIR': str(tmp_path / 'out'),
        'HEALTH_TIMEOUT': '30',
        'DEMO': '1',
    }  # the bundled sample: offline
    return env, pids, port


def launch(env, **extra):
    return subprocess.Popen(
        ['bash', str(RECIPE.launcher)],
        env={**env, **extra},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )


def pid_of(pids, name, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        p = pids / f'{name}.pid'
        if p.exists() and p.read_text():
            return int(p.read_text())
        time.sleep(0.1)
    raise AssertionError(f'{name} never started')


def test_success_starts_waits_trains_and_stops_rollout(setup):
    env, pids, port = setup
    proc = launch(env, FAKE_TRAIN='ok')
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    rollout = pid_of(pids, 'rollout')
    assert wait_gone(rollout), 'rollout server left running'
    assert f'rollout server healthy at http://127.0.0.1:{port}/health/' in err
    rollout_args = json.loads((pids / 'rollout.argv').read_text())
    assert rollout_args[:2] == ['--model', 'Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4'] and str(port) in rollout_args
    assert json.loads((pids / 'rlhf.argv').read_text())[0] == str(env['RECIPE'])


def test_trainer_failure_stops_rollout_and_propagates_exit_code(setup):
    env, pids, _ = setup
    proc = launch(env, FAKE_TRAIN='fail')
    proc.communicate(timeout=180)
    assert proc.returncode == 3
    assert wait_gone(pid_of(pids, 'rollout'))


def test_sigint_stops_trainer_and_rollout(setup):
    env, pids, _ = setup
    proc = launch(env, FAKE_TRAIN='hang')
    trainer = pid_of(pids, 'rlhf')
    rollout = pid_of(pids, 'rollout')
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert wait_gone(trainer) and wait_gone(rollout)


def test_health_timeout_is_a_clear_error(setup):
    env, pids, port = setup
    proc = launch(env, FAKE_ROLLOUT_DELAY='60', HEALTH_TIMEOUT='2')
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert f'not healthy at http://127.0.0.1:{port}/health/ after 2s' in err
    assert wait_gone(pid_of(pids, 'rollout'))
    assert not (pids / 'rlhf.pid').exists()


def test_rollout_crash_is_reported(setup):
    env, pids, _ = setup
    proc = launch(env, FAKE_ROLLOUT_CRASH='1')
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert 'exited before it became healthy' in err and 'crashing on purpose' in err
    assert not (pids / 'rlhf.pid').exists()


def test_guard_refusal_stops_before_anything_starts(setup, tmp_path):
    env, pids, _ = setup
    proc = launch(env, ROLLOUT_GPUS='0')  # overlaps the training GPU
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and 'device.rollout-overlap' in out and 'grpo-guard refused' in err
    assert not (pids / 'rollout.pid').exists() and not (pids / 'rlhf.pid').exists()
