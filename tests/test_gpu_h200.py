"""The H200 is a catalogue card of its own (139.81 GiB as torch reports it, from a published OOM message on an
"NVIDIA H200"): `--gpu-type H200` and the name nvidia-smi prints resolve to it, never to the H20 (95 GiB)."""

import pytest
from conftest import EXAMPLE, run_cli

from grpo_recipes.gpu_names import lookup, resolve
from grpo_recipes.gpus import candidates


@pytest.mark.parametrize('name', ['H200', 'NVIDIA H200', 'h200', 'H200 141GB'])
def test_h200_is_its_own_card(name):
    assert resolve(name) == ('H200', 139.81) and lookup(name) == ('H200', 139.81)


def test_h20_is_still_the_h20_and_loose_sources_tell_them_apart():
    assert resolve('NVIDIA H20') == ('H20', 95.0)
    assert [c for c, _ in candidates('8xH200')] == ['H200'] and [c for c, _ in candidates('H20 96G')] == ['H20']


def test_check_with_gpu_type_h200_plans_on_it():
    r = run_cli('grpo_recipes.cli.guard', 'check', str(EXAMPLE), '--gpus', '1', '--gpu-type', 'H200')
    assert r.returncode != 2, r.stderr[-2000:]
    assert 'H200 (139.81 GiB)' in r.stdout and 'H20 (95' not in r.stdout
