"""A warm parser process: one import of ms-swift/TRL serves many ``validate`` runs in a row.

``grpo-guard validate`` runs the framework's own parser in a fresh subprocess (:mod:`grpo_recipes.realparse`); most of
its 6-10 s is importing ms-swift, transformers and torch. A job that validates many launches one after another (a CI
job, this project's test suite) can start one pool instead::

    python -m grpo_recipes.parse_pool /tmp/grpo-parse.sock &      # imports the parser workers' frameworks once
    export GRPO_GUARD_PARSE_POOL=/tmp/grpo-parse.sock             # realparse sends its requests there

Each request is served by a process forked from the pool after those imports, so every parse still starts from freshly
imported frameworks and shares nothing with the previous one (its environment, working directory, patches and process
group die with it). The pool serves a request only when it can stand for a fresh ``python -m worker``: the same
interpreter and the same environment (the keys a parse sets itself, and pytest's per-test bookkeeping, aside), since
transformers and huggingface_hub read variables such as ``HF_HUB_OFFLINE`` when imported. Otherwise, or when the pool
is not there, realparse starts the worker as before.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import socket
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ENV_VAR = 'GRPO_GUARD_PARSE_POOL'
WORKERS = ('grpo_recipes.frontends.swift.worker', 'grpo_recipes.frontends.trl.worker')
# What a request may differ in from the pool's own environment: the parse sets them itself (realparse's free port),
# or they are a shell's or pytest's bookkeeping, which no framework reads.
_RUNTIME_KEYS = {
    'MASTER_ADDR',
    'MASTER_PORT',
    'PYTHONWARNINGS',
    'CUDA_VISIBLE_DEVICES',
    'COLUMNS',
    'LINES',
    'SHLVL',
    '_',
    'PWD',
    'OLDPWD',
    ENV_VAR,
}
_PREFIX_IGNORED = ('PYTEST_',)
# What each worker imports before its first parse (its own imports do the rest, from the warm module cache).
_PRELOAD = {
    'grpo_recipes.frontends.swift.worker': (
        'swift.arguments',
        'swift.rlhf_trainers.arguments',
        'swift.utils',
        'deepspeed',  # what a --deepspeed parse imports
    ),
    'grpo_recipes.frontends.trl.worker': (
        'trl',
        'trl.cli.main',
        'trl.scripts.vllm_serve',
        'trl.scripts.grpo',
        'accelerate.commands.launch',
    ),
}


served = 0
"""How many requests this process had the pool serve (tests/test_parse_pool.py checks that the pool, not a fresh
worker, answered)."""


def _comparable(env: dict) -> dict:
    return {
        k: v for k, v in env.items() if k not in _RUNTIME_KEYS and not any(k.startswith(p) for p in _PREFIX_IGNORED)
    }


def _recv(conn: socket.socket) -> bytes:
    chunks = []
    while True:
        b = conn.recv(1 << 16)
        if not b:
            return b''.join(chunks)
        chunks.append(b)


def _serve_one(conn: socket.socket, imported_env: dict) -> None:
    """In the forked child: run one worker's ``main`` on the request, as ``python -m worker`` would (with what the
    frameworks' imports put in the environment, as they would have there)."""
    req = json.loads(_recv(conn))
    os.environ.clear()
    os.environ.update(req['env'])
    os.environ.update(imported_env)
    if req.get('cwd'):
        os.chdir(req['cwd'])
    out, err = io.StringIO(), io.StringIO()
    sys.stdin = io.StringIO(req['stdin'])
    rc = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = importlib.import_module(req['module']).main() or 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
        except BaseException:  # reported as a crash, as a worker process's traceback would be
            import traceback

            traceback.print_exc()
            rc = 1
    conn.sendall(json.dumps({'rc': rc, 'stdout': out.getvalue(), 'stderr': err.getvalue()}).encode())
    conn.close()


def serve(path: str) -> None:
    """Import the workers' frameworks, then fork one child per request on the Unix socket ``path``."""
    os.environ['CUDA_VISIBLE_DEVICES'] = ''
    before = dict(os.environ)
    for module, deps in _PRELOAD.items():
        for dep in (module, *deps):
            try:
                importlib.import_module(dep)
            except Exception:  # a framework not installed: its requests crash in the child, as a fresh worker would
                pass
    imported_env = {k: v for k, v in os.environ.items() if before.get(k) != v}
    env0 = _comparable(before)
    tmp = Path(path + '.tmp')
    tmp.unlink(missing_ok=True)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(tmp))
    srv.listen(16)
    meta = {'python': sys.executable, 'env': env0, 'imported': imported_env}
    (Path(path + '.env')).write_text(json.dumps(meta))
    os.replace(tmp, path)  # the socket appears only when the pool is ready
    while True:
        conn, _ = srv.accept()
        pid = os.fork()
        if pid == 0:
            srv.close()
            try:
                _serve_one(conn, imported_env)
            finally:
                os._exit(0)
        conn.close()
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def _as_before_imports(env: dict, meta: dict) -> dict:
    """``env`` as the pool's comparison sees it: without what the frameworks' imports set (ms-swift sets
    TOKENIZERS_PARALLELISM, DeepSpeed PYTORCH_NVML_BASED_CUDA_CHECK), which a caller that imported them in-process has
    too, with the same values, and a fresh worker has after its own imports."""
    imported = meta.get('imported') or {}
    return _comparable({k: v for k, v in env.items() if imported.get(k) != v})


def differs(env: dict) -> list[str]:
    """The environment keys that keep the pool named in this environment from standing for a fresh worker."""
    meta = _meta(str(os.environ.get(ENV_VAR)))
    if meta is None:
        return ['(no pool ready)']
    mine, theirs = meta['env'], _as_before_imports(env, meta)
    return sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))


def _meta(path: str) -> dict | None:
    """The description a ready pool wrote beside its socket (interpreter, environment, what its imports set)."""
    try:
        return json.loads(Path(path + '.env').read_text())
    except (OSError, ValueError):
        return None


def _ready(path: str, timeout: float) -> dict | None:
    """The pool's description once it is ready. A pool that is still importing (its starter left ``PATH.starting``
    holding the pool's pid) is waited for, up to ``timeout`` and while that process lives: a fresh worker would
    repeat the same imports beside it."""
    import time

    deadline = time.monotonic() + min(timeout, 120.0)
    while True:
        meta = _meta(path)
        if meta is not None:
            return meta
        try:
            pid = int(Path(path + '.starting').read_text())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None  # no pool starting (or it died): a fresh worker
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


def pooled(module: str, stdin: str, env: dict, cwd: str | None, python: str | None, timeout: float):
    """``(returncode, stdout, stderr)`` of the worker run by the pool named in the environment, or None where no pool
    can stand for a fresh worker process (none named or ready, another interpreter, another environment)."""
    path = os.environ.get(ENV_VAR)
    if not path or module not in WORKERS or (python and python != sys.executable):
        return None
    meta = _ready(path, timeout)
    if meta is None:
        return None
    if meta.get('python') != sys.executable or meta.get('env') != _as_before_imports(env, meta):
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(json.dumps({'module': module, 'stdin': stdin, 'env': env, 'cwd': cwd or os.getcwd()}).encode())
            s.shutdown(socket.SHUT_WR)
            reply = json.loads(_recv(s))
    except TimeoutError:  # an OSError too: the parse ran out of time, which a fresh worker would report the same way
        raise
    except (OSError, ValueError):
        return None
    global served
    served += 1
    return reply['rc'], reply['stdout'], reply['stderr']


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: python -m grpo_recipes.parse_pool SOCKET_PATH')
    serve(sys.argv[1])
