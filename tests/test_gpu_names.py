"""--gpu-type resolves names exactly: the catalogue's names and the names nvidia-smi prints
(`nvidia-smi --query-gpu=name`, as NVIDIA's drivers report them); a name that could be several cards is refused."""

import pytest
from conftest import EXAMPLE, run_cli

from grpo_recipes.errors import GuardError
from grpo_recipes.gpu_names import check_hardware_flags, lookup, resolve


@pytest.mark.parametrize(
    'name,card',
    [
        ('NVIDIA A100-SXM4-40GB', 'A100-40G'),
        ('NVIDIA A100-SXM4-80GB', 'A100-80G'),
        ('NVIDIA A100 80GB PCIe', 'A100-80G'),
        ('NVIDIA A100-PCIE-40GB', 'A100-40G'),
        ('A100-40G', 'A100-40G'),
        ('A100-40', 'A100-40G'),
        ('a100 80gb', 'A100-80G'),
        ('NVIDIA A800-SXM4-80GB', 'A800-80G'),
        ('NVIDIA H100 80GB HBM3', 'H100-80G'),
        ('NVIDIA H100 PCIe', 'H100-80G'),
        ('H100', 'H100-80G'),
        ('NVIDIA H800', 'H800-80G'),
        ('NVIDIA H20', 'H20'),
        ('NVIDIA L40S', 'L40S'),
        ('NVIDIA A10', 'A10'),
        ('NVIDIA GeForce RTX 4090', 'RTX4090'),
        ('NVIDIA GeForce RTX 3090', 'RTX3090'),
        ('4090', 'RTX4090'),
        ('RTX3090', 'RTX3090'),
        ('Tesla V100-SXM2-32GB', 'V100-32G'),
        ('Tesla V100-PCIE-16GB', 'V100-16G'),
        ('Tesla T4', 'T4'),
        ('NVIDIA L4', 'L4'),
    ],
)
def test_names_resolve_to_one_card(name, card):
    assert resolve(name)[0] == card and lookup(name)[0] == card


@pytest.mark.parametrize(
    'name',
    [
        'NVIDIA H200 NVL',
        'NVIDIA H100 NVL',
        'NVIDIA A10G',
        'NVIDIA GeForce RTX 4090 D',
        'NVIDIA GeForce RTX 3090 Ti',
        'A100-96G',
        'V100S',
        'NVIDIA L40',
    ],
)
def test_other_cards_are_not_matched_by_a_part_of_their_name(name):
    assert lookup(name) is None  # H200 is not the H20, the A10G not the A10
    with pytest.raises(GuardError, match='not a card of the catalogue'):
        resolve(name)


@pytest.mark.parametrize(
    'name,cards',
    [('A100', ['A100-40G', 'A100-80G']), ('NVIDIA A800', ['A800-40G', 'A800-80G']), ('V100', ['V100-32G', 'V100-16G'])],
)
def test_a_name_with_two_sizes_is_ambiguous(name, cards):
    assert lookup(name) is None
    with pytest.raises(GuardError) as e:
        resolve(name)
    assert all(c in str(e.value) for c in cards) and e.value.exit_code == 2


@pytest.mark.parametrize('mem', [0.0, -4.0, float('nan')])
def test_gpu_mem_must_be_positive(mem):
    with pytest.raises(GuardError, match='--gpu-mem'):
        check_hardware_flags(None, mem)
    check_hardware_flags('A100', 39.39)  # with a capacity, the name is only a label


def test_check_refuses_ambiguous_and_prints_the_resolved_card():
    bad = run_cli('grpo_recipes.cli.guard', 'check', str(EXAMPLE), '--gpus', '1', '--gpu-type', 'A100')
    assert bad.returncode == 2 and 'A100-40G' in bad.stderr and 'A100-80G' in bad.stderr
    assert 'Traceback' not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    bad = run_cli('grpo_recipes.cli.guard', 'check', str(EXAMPLE), '--gpus', '1', '--gpu-mem', '0')
    assert bad.returncode == 2 and '--gpu-mem' in bad.stderr
    ok = run_cli('grpo_recipes.cli.guard', 'check', str(EXAMPLE), '--gpus', '1', '--gpu-type', 'NVIDIA H100 80GB HBM3')
    assert 'H100-80G (79.18 GiB)' in ok.stdout
