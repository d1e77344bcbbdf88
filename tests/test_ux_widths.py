"""Narrow terminals (issue 21, 19): `grpo-recipes ls` at 80 columns keeps every name whole and its peak column;
`grpo-guard calibrate` at 100 columns cuts no value."""

import json
import re

import pytest
from conftest import SHARED, run_cli

from grpo_recipes.recipes import discover

CASES = SHARED / 'calibration' / 'memory_cases.jsonl'


@pytest.mark.parametrize('columns', ['80', '100', '160'])
def test_ls_keeps_names_and_peak(columns):
    proc = run_cli('grpo_recipes.cli.recipes', 'ls', env={'COLUMNS': columns})
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert all(len(ln.rstrip()) <= int(columns) for ln in lines)
    assert '…' not in proc.stdout
    header = next(ln for ln in lines if ln.strip().startswith('recipe'))
    assert 'peak' in header.split()
    text = '\n'.join(ln.strip() for ln in lines)
    rows = json.loads(run_cli('grpo_recipes.cli.recipes', 'ls', '--json').stdout)
    for r in rows:
        model, variant = r['name'].split('/')
        # whole on one line, or "model/" with the variant at the start of the next line
        assert r['name'] in text or re.search(re.escape(model + '/') + r'[^\n]*\n' + re.escape(variant) + r'\b', text)
        assert f'{r["peak_fraction"]:.0%}' in text
    assert len(discover()) == len(rows)


@pytest.mark.skipif(not CASES.is_file(), reason='../shared/calibration not present')
def test_calibrate_cuts_no_value_at_100_columns():
    proc = run_cli('grpo_recipes.cli.guard', 'calibrate', str(CASES), env={'COLUMNS': '100'})
    assert proc.returncode == 0
    assert '…' not in proc.stdout
    assert all(len(ln.rstrip()) <= 100 for ln in proc.stdout.splitlines())
    scored = json.loads(run_cli('grpo_recipes.cli.guard', 'calibrate', str(CASES), '--json').stdout)
    for row in scored['per_case']:
        for key in ('vllm_kv', 'vllm_weights'):
            v = row.get(key)
            if v:
                assert f'{v["predicted"]:.1f}/{v["observed"]:.1f} {v["rel_error"]:.0%}' in proc.stdout, (row['id'], key)
