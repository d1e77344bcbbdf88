"""config.json fetched from the hub when no copy is here (model_fetch.py), through the real huggingface_hub client.

Mocked: the Hugging Face hub itself, which cannot be reached here. A loopback HTTP server stands in for it and
serves what ``hf_hub_download`` asks of a file (HEAD then GET ``/{repo}/resolve/{revision}/config.json`` with
``X-Repo-Commit``, ``ETag`` and ``Content-Length``, as huggingface_hub/file_download.py::get_hf_file_metadata
reads them); the client reaches it through ``HF_ENDPOINT``. The fetch runs in a child process that reads its
environment at import, so each test sets HF_HUB_OFFLINE (CI sets it to 1 globally, .ci/run), HF_ENDPOINT and
HF_HOME itself. ModelScope's client is not exercised here (its download asks its API for the revision first);
only which hub a launch uses is."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import run_cli

from grpo_recipes import model_fetch
from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.model_fetch import hub_of
from grpo_recipes.models import builtin_config

PKGS = {'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': '0.9.0', 'msgspec': '0.22.0'}
HW = Hardware(gpus=1, gpu_type='A100-80G', source='flags')
MODEL = 'acme/Grpo-Tiny-7B'  # no bundled copy has this name
COMMIT = 'a' * 40


class Hub:
    """The loopback stand-in for huggingface.co: config.json of MODEL at any revision, 404 for anything else."""

    def __init__(self):
        self.requests: list[tuple[str, str, str | None]] = []
        body = json.dumps(builtin_config('Qwen2.5-7B-Instruct.json')).encode()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _answer(self, with_body):
                hub.requests.append((self.command, self.path, self.headers.get('authorization')))
                if self.path.startswith(f'/{MODEL}/resolve/') and self.path.endswith('/config.json'):
                    self.send_response(200)
                    self.send_header('X-Repo-Commit', COMMIT)
                    self.send_header('ETag', '"cfg-etag-1"')
                    self.send_header('Content-Length', str(len(body)))
                    self.send_header('Content-Type', 'application/json')
                    self.end_headers()
                    if with_body:
                        self.wfile.write(body)
                    return
                self.send_response(404)
                self.send_header('X-Error-Code', 'RepoNotFound')
                self.send_header('Content-Length', '0')
                self.end_headers()

            def do_HEAD(self):
                self._answer(False)

            def do_GET(self):
                self._answer(True)

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}'
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = Hub()
    monkeypatch.setattr(model_fetch, '_FETCHED', {})
    monkeypatch.setattr(model_fetch, '_FAILED', {})
    monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
    monkeypatch.delenv('HF_TOKEN', raising=False)
    monkeypatch.setenv('HF_ENDPOINT', h.url)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'hf'))
    monkeypatch.setenv('MODELSCOPE_CACHE', str(tmp_path / 'ms'))
    yield h
    h.close()


def swift(model, *more):
    return read_launch(
        [
            '--',
            'swift',
            'rlhf',
            '--rlhf_type',
            'grpo',
            '--model',
            model,
            '--reward_funcs',
            'format',
            '--dataset',
            'AI-MO/NuminaMath-TIR',
            '--per_device_train_batch_size',
            '8',
            *more,
        ],
        environ={},
    )


def trl(model, *more):
    return read_launch(
        [
            '--',
            'accelerate',
            'launch',
            '--num_processes',
            '1',
            'train_grpo.py',
            '--model_name_or_path',
            model,
            '--per_device_train_batch_size',
            '8',
            '--num_generations',
            '8',
            *more,
        ],
        environ={},
    )


def test_the_hub_a_launch_downloads_from():
    assert hub_of('swift', [], {}, {}).name == 'ms'  # ms-swift's default: ModelScope
    assert hub_of('swift', [], {}, {'USE_HF': '1'}).name == 'hf'
    assert hub_of('swift', [], {'USE_HF': 'true'}, {}).name == 'hf'  # the config file's ENV block
    assert hub_of('swift', ['--use_hf', 'true'], {}, {}).name == 'hf'
    assert hub_of('swift', ['--use_hf', 'false'], {}, {'USE_HF': '1'}).name == 'ms'  # the flag wins
    assert hub_of('trl', [], {}, {}).name == 'hf'  # transformers' from_pretrained
    h = hub_of('swift', ['--model_revision', 'v2', '--use_hf=1', '--hub_token', 'tok'], {}, {})
    assert (h.name, h.revision, h.token) == ('hf', 'v2', 'tok')


def test_config_json_alone_is_fetched_and_planned(hub, monkeypatch):
    monkeypatch.setenv('USE_HF', '1')
    r = check_launch(swift(MODEL), HW, packages=PKGS)
    assert r.memory_unchecked is None and r.memory
    assert any('fetched from the Hugging Face hub' in a and 'config.json' in a for a in r.assumptions)
    assert hub.requests and all(path.endswith('/config.json') for _, path, _ in hub.requests)
    assert {m for m, _, _ in hub.requests} <= {'HEAD', 'GET'}
    # the same launch planned from the bundled Qwen2.5-7B config: the same per-GPU figures
    same = check_launch(swift('Qwen/Qwen2.5-7B-Instruct'), HW, packages=PKGS)
    assert [m.total_gib for m in r.memory] == [m.total_gib for m in same.memory]


def test_trl_fetches_from_the_hf_hub_with_the_revision_and_token(hub, monkeypatch):
    monkeypatch.delenv('USE_HF', raising=False)
    monkeypatch.setenv('HF_TOKEN', 'hf_test_token')
    r = check_launch(trl(MODEL, '--model_revision', 'v1.0'), HW, packages=PKGS)
    assert r.memory_unchecked is None
    assert all('/resolve/v1.0/config.json' in path for _, path, _ in hub.requests)
    assert all(auth == 'Bearer hf_test_token' for _, _, auth in hub.requests)


def test_hf_hub_offline_says_so_in_one_line(hub, monkeypatch):
    monkeypatch.setenv('USE_HF', '1')
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    r = check_launch(swift(MODEL), HW, packages=PKGS)
    why = r.memory_unchecked
    assert 'HF_HUB_OFFLINE is set' in why and MODEL in why and '--model-config' in why and '\n' not in why
    assert hub.requests == []


def test_an_unreachable_hub_says_so_in_one_line(hub, monkeypatch):
    import socket

    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv('HF_ENDPOINT', f'http://127.0.0.1:{port}')
    r = check_launch(trl(MODEL), HW, packages=PKGS)
    why = r.memory_unchecked
    assert 'cannot be reached' in why and '--model-config' in why and '\n' not in why


def test_a_repo_the_hub_does_not_have(hub, monkeypatch):
    r = check_launch(trl('acme/no-such-model'), HW, packages=PKGS)
    why = r.memory_unchecked
    assert 'did not give it' in why and 'acme/no-such-model' in why and '\n' not in why
    assert all(path.endswith('/config.json') for _, path, _ in hub.requests)


def test_the_cli_plans_a_fetched_config(hub, tmp_path):
    """The whole command, in a fresh process: the environment is all it gets."""
    import os

    env = {k: os.environ[k] for k in ('HF_ENDPOINT', 'HF_HOME', 'MODELSCOPE_CACHE')}
    env.update(USE_HF='1', HF_HUB_OFFLINE='0')
    p = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--gpus',
        '1',
        '--gpu-type',
        'A100-80G',
        '--json',
        '--',
        'swift',
        'rlhf',
        '--rlhf_type',
        'grpo',
        '--model',
        MODEL,
        '--reward_funcs',
        'format',
        '--dataset',
        'AI-MO/NuminaMath-TIR',
        '--per_device_train_batch_size',
        '8',
        env=env,
        timeout=120,
    )
    out = json.loads(p.stdout)
    assert out['memory_unchecked'] is None and out['memory'], p.stderr
    assert all(path.endswith('/config.json') for _, path, _ in hub.requests)


# Parameter counts on the model cards (Qwen2.5/Qwen3 cards' "Number of Parameters"; Llama 3.1: 8.03e9 and 70.6e9 as
# the public presets cite them; Llama 3.2 1B/3B: torchtitan's counts 1,235,746,816 and 3,212,574,720). The catalogue's
# fields must give the same count: a wrong layer count or width shows here.
CARD_PARAMS = {
    'Qwen/Qwen2.5-3B': 3.09e9,
    'Qwen/Qwen2.5-7B': 7.61e9,
    'Qwen/Qwen2.5-14B': 14.7e9,
    'Qwen/Qwen2.5-32B': 32.5e9,
    'Qwen/Qwen3-4B': 4.0e9,
    'Qwen/Qwen3-8B': 8.2e9,
    'Qwen/Qwen3-14B': 14.8e9,
    'Qwen/Qwen3-32B': 32.8e9,
    'Qwen/Qwen3-30B-A3B': 30.5e9,
    'meta-llama/Llama-3.1-8B': 8.03e9,
    'meta-llama/Llama-3.1-70B': 70.6e9,
    'meta-llama/Llama-3.2-1B': 1.2357e9,
    'meta-llama/Llama-3.2-3B': 3.2126e9,
    'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B': 7.61e9,
    'deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B': None,
    'Qwen/Qwen2.5-72B-Instruct': 72.7e9,  # no published count found here: its three sources agree instead
    'Qwen/Qwen2.5-0.5B-Instruct': 0.49e9,
    'Qwen/Qwen2.5-1.5B-Instruct': 1.54e9,
    'Qwen/Qwen2.5-3B-Instruct': 3.09e9,
    'Qwen/Qwen2.5-14B-Instruct': 14.7e9,
    'Qwen/Qwen2.5-32B-Instruct': 32.5e9,
    'Qwen/Qwen2.5-0.5B': 0.49e9,
    'Qwen/Qwen2.5-Math-1.5B': None,
    'Qwen/Qwen2.5-Math-7B': None,  # the Math cards state no parameter count
    'Qwen/Qwen2.5-Math-1.5B-Instruct': None,
    'Qwen/Qwen2.5-Math-7B-Instruct': None,
    'Qwen/QwQ-32B': 32.5e9,
    'Qwen/Qwen3-0.6B': 0.6e9,
    'Qwen/Qwen2.5-1.5B': 1.54e9,
    'Qwen/Qwen3-1.7B': 1.7e9,
    # the distills' cards state no count; Llama 3.1 8B Instruct and Llama 3.2 Instruct are their base models' shapes
    'deepseek-ai/DeepSeek-R1-Distill-Qwen-14B': None,
    'deepseek-ai/DeepSeek-R1-Distill-Llama-8B': None,
    'meta-llama/Llama-3.1-8B-Instruct': 8.03e9,
    'meta-llama/Llama-3.2-1B-Instruct': 1.2357e9,
    'meta-llama/Llama-3.2-3B-Instruct': 3.2126e9,
    'meta-llama/Llama-3.3-70B-Instruct': 70.6e9,
    # the VL cards state no count (the LLM plus the vision tower the config's vision_config gives)
    'Qwen/Qwen2.5-VL-3B-Instruct': None,
    'Qwen/Qwen2.5-VL-7B-Instruct': None,
}


def test_the_catalogue_entries_are_sourced_and_match_their_model_cards():
    from grpo_recipes.memory.arch import Arch
    from grpo_recipes.models import catalogue

    cat = catalogue()
    assert set(cat) == set(CARD_PARAMS)
    for hub_id, e in cat.items():
        assert e['source'] == f'https://huggingface.co/{hub_id}/blob/main/config.json'
        assert e['licence'] and e['confirmed_in']
        got = Arch.from_config(e['config']).param_count()
        assert CARD_PARAMS[hub_id] is None or abs(got / CARD_PARAMS[hub_id] - 1) < 0.02, (hub_id, got)


def test_a_catalogue_model_is_planned_offline(monkeypatch):
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    monkeypatch.setattr(model_fetch, '_reachable', lambda *a: pytest.fail('no hub is asked for a catalogued model'))
    r = check_launch(swift('Qwen/Qwen3-8B'), HW, packages=PKGS)
    assert r.memory_unchecked is None and r.memory
    assert any('catalogue.json entry Qwen/Qwen3-8B' in a for a in r.assumptions)
