"""Megatron-SWIFT (``megatron rlhf``) as the shared pipeline sees it: ms-swift's facts and hooks (its parser, its
release, its rollout server), but ``grpo-guard run`` does not start it. Its plan, rules and memory are its own
(``checked.py``, OWN_CHECKS in ``frontends/__init__.py``)."""

from __future__ import annotations

from dataclasses import replace

from ..swift.framework import SWIFT

MEGATRON = replace(
    SWIFT,
    name='megatron',
    runnable=False,
    validator='grpo_recipes.frontends.megatron.checked:snapshot_parse',
    fixed_launch='grpo_recipes.frontends.megatron.search:fixed_launch',
)
