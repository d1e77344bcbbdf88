"""Divisors for the batch and parallel-size messages, found in sqrt(n) steps: ms-swift's own message walks every
candidate (``[n for n in range(2, gen + 1) if gen % n == 0]``), which a fuzzed batch of 3,410,609 per device turned
into a check that did not end (tests/test_cli_fuzz.py found it)."""

from helpers import make
from hypothesis import given
from hypothesis import strategies as st

from grpo_recipes.divisors import divisors, largest_divisor_at_most


@given(st.integers(min_value=-3, max_value=5000))
def test_divisors_are_the_walks(n):
    assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


@given(st.integers(min_value=1, max_value=3000), st.integers(min_value=1, max_value=3000))
def test_largest_divisor_at_most_is_the_walks(n, cap):
    assert largest_divisor_at_most(n, cap) == max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


def test_numbers_too_large_to_list_are_said_so():
    assert divisors(10**13 + 37) is None
    assert largest_divisor_at_most(2 * (10**13 + 37), 4) == 2


def test_a_huge_batch_is_reported_with_its_divisors():
    # 8 processes x 3,410,609 (= 967 x 3527) completions: 7 generations do not divide it; the message lists what does,
    # in ms-swift's words, as its own walk would
    env = {'NPROC_PER_NODE': 8, 'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7'}
    _, report = make({'per_device_train_batch_size': 3_410_609, 'num_generations': 7}, env=env)
    f = next(f for f in report.findings if f.rule == 'batch.num-generations-divides')
    gen = 8 * 3_410_609
    assert f'Valid values: {[n for n in divisors(gen) if n >= 2]}.' in f.message
    assert [2, 4, 8, 967] == [n for n in divisors(gen) if n >= 2][:4] and f.fix.endswith(
        'per_device_train_batch_size: 3410610'
    )
