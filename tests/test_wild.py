"""Launches written outside this project and outside ms-swift's examples/ (tests/data/wild/index.json: source,
hardware, version, expected verdict and why). Each expected verdict comes from what its source says happened or
from the real library at the version it was written for, never from the guard. A case the guard is known to get
wrong says why in `known_miss` and is a strict xfail, so fixing it shows up."""

import json
from pathlib import Path

import pytest
from conftest import run_cli

WILD = Path(__file__).resolve().parent / 'data' / 'wild'
CASES = json.loads((WILD / 'index.json').read_text())


def _params():
    return [
        pytest.param(
            c, id=c['id'], marks=[pytest.mark.xfail(strict=True, reason=c['known_miss'])] if c.get('known_miss') else []
        )
        for c in CASES
    ]


def test_index_is_complete():
    for c in CASES:
        assert {'id', 'launch', 'source', 'hardware', 'version', 'expected', 'why'} <= set(c), c.get('id')
        assert c['expected'] in ('accepted', 'refused') and (WILD / c['launch']).is_file()
    assert len({c['id'] for c in CASES}) == len(CASES)


@pytest.mark.parametrize('case', _params())
def test_wild_launch_verdict(case):
    cwd = WILD / case.get('cwd', '.')
    # a model path on the author's machine: its config.json given as the guard's message asks (--model-config)
    mc = ['--model-config', str((WILD / case['model_config']).resolve())] if case.get('model_config') else []
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        *case['hardware'],
        *case['version'],
        *mc,
        str((WILD / case['launch']).relative_to(cwd)),
        cwd=cwd,
    )
    assert 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    errors = [(f['rule'], f['message']) for f in out['findings'] if f['severity'] == 'error']
    verdict = 'refused' if errors else 'accepted'
    assert verdict == case['expected'], errors
    # where the source names the cause (an OOM), the guard must refuse for that cause, not another
    assert set(case.get('expected_rules', [])) <= {r for r, _ in errors}, errors
