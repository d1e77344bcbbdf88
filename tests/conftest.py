import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The launchers call grpo-data, grpo-guard, grpo-recipes and swift by name, as a user with the venv
# activated would: put this interpreter's bin dir first on PATH even when pytest runs as .venv/bin/python.
os.environ['PATH'] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get('PATH', '')])
SHARED = ROOT.parent / 'shared'
EXAMPLE = ROOT / 'recipes' / 'examples' / 'qwen2.5-7b-lora-colocate.yaml'


def run_cli(*args, env=None, timeout=600, cwd=None):
    """Run a console command of this package in a fresh process; returns CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, '-m', *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=cwd or ROOT)


@pytest.fixture
def write_yaml(tmp_path):
    def _write(text, name='cfg.yaml'):
        p = tmp_path / name
        p.write_text(text, encoding='utf-8')
        return p
    return _write
