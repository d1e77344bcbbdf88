import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The launchers call grpo-data, grpo-guard, grpo-recipes and swift by name, as a user with the venv
# activated would: put this interpreter's bin dir first on PATH even when pytest runs as .venv/bin/python.
os.environ['PATH'] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get('PATH', '')])
# Under pytest-xdist the workers already keep every core busy: torch (in a worker, in each `swift rlhf`/`sft` CPU run,
# in every CLI child) then runs its CPU kernels on one thread instead of one per core per process, which only
# oversubscribed the cores (threads spinning while they wait for one); OMP_NUM_THREADS is read once, at import.
# A value the caller set is kept.
if os.environ.get('PYTEST_XDIST_WORKER'):
    os.environ.setdefault('OMP_NUM_THREADS', '1')
# A Hugging Face home of the session's own, empty (as on a fresh CI machine): no test reads the developer's
# ~/.cache/huggingface (an accelerate default_config.yaml there would change a TRL launch's process count), and every
# worker and the shared parser pool see the same value, so a test needs no HF_HOME of its own to be hermetic (one of
# its own would keep its parses from the pool, which was imported with the session's). A test that builds a cache sets
# its own. Named by the xdist run's id so both workers agree; a value the caller set is kept.
if 'HF_HOME' not in os.environ:
    _run = os.environ.get('PYTEST_XDIST_TESTRUNUID') or f'pid{os.getpid()}'
    os.environ['HF_HOME'] = os.path.join(tempfile.gettempdir(), f'grpo-tests-hf-{_run[:16]}')
    os.makedirs(os.environ['HF_HOME'], exist_ok=True)
SHARED = ROOT.parent / 'shared'


def load_script(path: str):
    """A file of bench/ or scripts/ (``path`` from the repository root) imported as a module named after the file,
    once per process: registered in sys.modules before it runs, since dataclasses look their module up there and a
    bench imports another by name (bench_megatron_gpu imports bench_swift_gpu)."""
    name = Path(path).stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


EXAMPLE = ROOT / 'recipes' / 'examples' / 'qwen2.5-7b-lora-colocate.yaml'


def sigint_default():
    """``preexec_fn`` for a child a test interrupts: SIGINT's default action, whatever the test process inherited. A
    background job of a non-interactive shell, and a pytest-xdist worker, may start with SIGINT ignored, and a child
    inherits that: Python then installs no KeyboardInterrupt handler and bash cannot trap the signal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args, env=None, timeout=600, cwd=None):
    """Run a console command of this package in a fresh process; returns CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, '-m', *args], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd or ROOT
    )


def shared_tmp(tmp_path_factory) -> Path:
    """A directory every test of this session sees, under pytest-xdist too (its workers' base dirs share a parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base


@pytest.fixture(scope='session', autouse=True)
def parse_pool():
    """One warm parser pool per test session (grpo_recipes/parse_pool.py), shared by all pytest-xdist workers: every
    `validate` in this session, in a worker or a CLI child, is served by a process forked after one import of ms-swift
    and TRL, instead of importing them again (6-10 s each). Each parse still runs the real worker in a fresh process;
    a request whose interpreter or environment differs from the pool's goes to a fresh worker as before.
    GRPO_TESTS_FRESH_PARSERS=1 turns it off; tests/test_parse_pool.py checks that both ways give the same results.

    Under xdist the workers meet in a directory named by the run's id (PYTEST_XDIST_TESTRUNUID): under its lock file
    the first one starts the pool, every one registers its pid, and the last to leave stops the pool and removes the
    directory (a worker that died without leaving counts as gone). The pool's environment is its starter's, which
    differs from another worker's only in PYTEST_* keys, which the pool ignores."""
    import signal
    import tempfile

    from grpo_recipes.parse_pool import ENV_VAR

    if os.environ.get('GRPO_TESTS_FRESH_PARSERS') or os.environ.get(ENV_VAR):
        yield None
        return
    uid = os.environ.get('PYTEST_XDIST_TESTRUNUID')
    if uid:  # short: a Unix socket path has at most 107 bytes
        where = Path(tempfile.gettempdir()) / f'grpo-pool-{uid[:16]}'
        where.mkdir(exist_ok=True)
    else:
        where = Path(tempfile.mkdtemp(prefix='grpo-pool-'))
    path = str(where / 's')
    users = where / 'users'
    proc = None
    with _locked(where):
        users.mkdir(exist_ok=True)
        if not (where / 'pid').is_file():
            proc = subprocess.Popen(
                [sys.executable, '-m', 'grpo_recipes.parse_pool', path],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, 'PYTHONWARNINGS': 'ignore'},
            )
            (where / 'pid').write_text(str(proc.pid))
            Path(path + '.starting').write_text(str(proc.pid))  # a parse asked for meanwhile waits for the pool
        (users / str(os.getpid())).write_text('')
    os.environ[ENV_VAR] = path
    try:
        yield path
    finally:
        os.environ.pop(ENV_VAR, None)
        with _locked(where):
            (users / str(os.getpid())).unlink(missing_ok=True)
            left = [int(p.name) for p in users.iterdir() if p.name.isdigit()] if users.is_dir() else []
            if not any(_alive(pid) for pid in left):
                try:
                    os.kill(int((where / 'pid').read_text()), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
                shutil.rmtree(where, ignore_errors=True)
        if proc is not None and not where.exists():
            proc.wait()  # this worker started it: reap it (else the worker's own exit does)


@contextlib.contextmanager
def _locked(where: Path):
    """``where``'s lock file held; ``where`` exists meanwhile (a last worker may remove it while another waits for
    the lock: the waiter then takes the lock of a new directory)."""
    import fcntl

    while True:
        where.mkdir(exist_ok=True)
        try:
            lock = open(where / 'lock', 'a')
        except FileNotFoundError:
            continue
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                same = os.fstat(lock.fileno()).st_ino == os.stat(where / 'lock').st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield
                return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope='session')
def tiny_qwen2(tmp_path_factory) -> Path:
    """The tiny random Qwen2 with its tokenizer (tests/tiny_model.py), built once per session, for every test that
    runs ms-swift on CPU; under xdist the first worker builds it and the others wait on a lock. Read-only."""
    import fcntl

    from tiny_model import build

    shared = shared_tmp(tmp_path_factory)
    out = shared / 'tiny-qwen2'
    with open(shared / 'tiny-qwen2.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / 'tiny-qwen2.built').is_file():
            shutil.rmtree(out, ignore_errors=True)
            build(out)
            (shared / 'tiny-qwen2.built').write_text('')
    return out


@pytest.fixture
def write_yaml(tmp_path):
    def _write(text, name='cfg.yaml'):
        p = tmp_path / name
        p.write_text(text, encoding='utf-8')
        return p

    return _write


def pytest_collection_modifyitems(config, items):
    """The tests that run ms-swift itself (marked slow: CPU training runs, traces, parser subprocesses) first, in
    their order, so that under pytest-xdist the long ones start together instead of one finishing alone at the end.
    Within them, ``slow(rank=0)`` comes first (the launcher runs that train) and ``slow(rank=2)`` last (launcher runs
    whose training is a copy of a rank-0 run's: placed after the other slow tests, they find that run done instead
    of waiting on its lock while the other worker trains). Tests marked ``long`` (tens of seconds without ms-swift:
    the Hypothesis differentials) follow the slow ones, so that neither is the last test of a worker."""

    def rank(item):
        mark = item.get_closest_marker('slow')
        if mark is not None:
            return mark.kwargs.get('rank', 1)
        return 2.5 if item.get_closest_marker('long') else 3

    items.sort(key=rank)
