"""`grpo-guard trace` under ZeRO-3 reports its categories on the basis of its peak: this process's shards of the
parameters and optimizer state (DeepSpeed's accounting), not the whole model the single process traced; the
categories add up to the peak, and the cache the step leaves for the next phase is reported."""

import pytest
from test_trace_reserved import TINY

from grpo_recipes.config import GRPOConfig
from grpo_recipes.hardware import Hardware
from grpo_recipes.plan import build_plan


def _trace(extra):
    pytest.importorskip('torch')
    from grpo_recipes.memory.trace import trace_launch

    argv = ['--rlhf_type', 'grpo', '--tuner_type', 'full', '--per_device_train_batch_size', '2']
    argv += ['--max_completion_length', '128', '--torch_dtype', 'bfloat16', '--beta', '0', *extra]
    cfg, _ = GRPOConfig.from_argv(argv)
    return trace_launch(cfg, build_plan(cfg, {'NPROC_PER_NODE': '8'}, Hardware(gpus=8)), TINY, 64, 'tiny')


def test_zero3_categories_are_the_shards_and_add_up_to_the_peak():
    whole = _trace([])
    sharded = _trace(['--deepspeed', 'zero3'])
    cats = sharded.categories_gib
    assert abs(sum(cats.values()) - sharded.traced_peak_gib) <= 0.005
    # the whole-model categories of the unsharded trace are larger than the shards of the same model
    assert (
        cats['parameters'] + cats['optimizer state']
        < whole.categories_gib['parameters']
        + whole.categories_gib['optimizer state']
        + whole.categories_gib['gradients']
    )
    assert any('same basis as the peak' in n for n in sharded.notes)


def test_the_step_leaves_its_cache_reported():
    r = _trace([])
    assert r.cached_after_step_gib is not None and 0 < r.cached_after_step_gib <= r.reserved_peak_gib
