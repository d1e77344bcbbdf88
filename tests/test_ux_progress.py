"""Progress on stderr for the slow verbs when stderr is a terminal, nothing when it is not (issue 21, 22).
A pseudo-terminal (pty) stands in for the user's terminal."""

import os
import pty
import subprocess
import sys

import pytest
from conftest import ROOT

SNIPPET = """
import threading
from grpo_recipes.cli.progress import progress
done = threading.Event()
with progress("work: step one") as p:
    done.wait(0.7)
    p.set("work: step two")
    done.wait(0.7)
print("RESULT")
"""


def _run(args, tty: bool, env=None):
    """(stdout, stderr) of a command whose stderr is a pty (tty) or a pipe."""
    # the package is installed (make install); no PYTHONPATH, so validate's parse can be the suite's warm pool's
    full_env = {**os.environ, **(env or {})}
    if not tty:
        p = subprocess.run(args, capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=600)
        return p.stdout, p.stderr
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, env=full_env, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out = p.stdout.read().decode()
    p.wait(timeout=600)
    os.close(master)
    return out, b''.join(chunks).decode(errors='replace')


def test_progress_draws_on_a_terminal_and_erases_itself():
    out, err = _run([sys.executable, '-c', SNIPPET], tty=True)
    assert out.strip() == 'RESULT'
    assert 'work: step one' in err and 'work: step two' in err
    assert err.endswith('\r')  # the line is erased at the end: the next output starts clean


def test_progress_is_silent_when_stderr_is_not_a_terminal():
    out, err = _run([sys.executable, '-c', SNIPPET], tty=False)
    assert out.strip() == 'RESULT' and err == ''


@pytest.mark.slow
def test_validate_shows_progress_only_on_a_terminal():
    cmd = [
        sys.executable,
        '-m',
        'grpo_recipes.cli.guard',
        'validate',
        '--',
        'trl',
        'vllm-serve',
        '--model',
        'Qwen/Qwen2.5-7B-Instruct',
        '--tensor_parallel_size',
        '1',
    ]
    out, err = _run(cmd, tty=True)
    assert "validate: running TRL's own parser" in err
    piped_out, piped_err = _run(cmd, tty=False)
    assert 'validate:' not in piped_err and 'VALID' in piped_out
