"""Divisors of a batch or a parallel size, found in time proportional to the square root of the number (never a walk
over every candidate: a fuzzed ``per_device_train_batch_size`` of 10^9 must not hang a check)."""

from __future__ import annotations

import math

MAX_TRIALS = 10**6
"""Trial divisions one call may make: numbers up to 10^12 are listed whole."""


def divisors(n: int) -> list[int] | None:
    """The divisors of ``n`` in increasing order ([] for n < 1); None when n is too large to list here."""
    if n < 1:
        return []
    root = math.isqrt(n)
    if root > MAX_TRIALS:
        return None
    small, large = [], []
    for d in range(1, root + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return small + large[::-1]


def largest_divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of ``n`` (>= 1) that is at most ``cap`` (>= 1); 1 when neither fits the bound above."""
    if n < 1 or cap < 1:
        return 1
    found = divisors(n)
    if found is not None:
        return max(d for d in found if d <= cap)
    for d in range(min(cap, MAX_TRIALS), 0, -1):  # n too large to factor: the nearest candidates below the cap
        if n % d == 0:
            return d
    return 1
