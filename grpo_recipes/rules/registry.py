"""The rule registry: the :class:`Context` every rule reads, and ``@rule(ids...)``, which records the rule ids a
function can emit (a test holds every declared id to a test that triggers it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..config import GRPOConfig
from ..findings import Finding, declare
from ..hardware import Hardware
from ..launch import Launch
from ..plan import Plan


@dataclass
class Context:
    """Everything a rule may look at. Built at the edge (CLI); rules never do I/O."""

    cfg: GRPOConfig
    launch: Launch
    plan: Plan
    hw: Hardware
    model: dict | None = None
    """The model's config.json (None: unavailable; rules that need it are skipped)."""
    remaining: list[str] = field(default_factory=list)
    """Strings ms-swift's parser would not recognise."""
    packages: dict[str, str | None] = field(default_factory=dict)
    """Installed versions by distribution name (None: not installed)."""
    dataset_columns: dict[str, list[str] | None] = field(default_factory=dict)
    """Columns of the first row of each local dataset file (None: not readable here)."""
    environ: dict[str, str] = field(default_factory=dict)
    """Other environment variables that matter (PYTORCH_CUDA_ALLOC_CONF)."""
    data_stats: dict | None = None
    """``grpo-data stats --json`` of the training data (``--data-stats``), for data-aware planning."""
    pass_rate: float | None = None
    """``--pass-rate``: one pass rate for every prompt, for the learning-signal estimate (rules/signal.py)."""


Rule = Callable[[Context], list[Finding]]


def rule(*ids: str) -> Callable[[Rule], Rule]:
    """Mark a function ``Context -> list[Finding]`` as a rule that can emit ``ids``."""

    def register(fn: Rule) -> Rule:
        fn.ids = ids
        declare(f'{fn.__module__}.{fn.__name__}', ids)
        return fn

    return register
