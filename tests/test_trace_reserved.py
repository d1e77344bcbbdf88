"""`grpo-guard trace`'s reserved figure: the traced allocations and frees replayed through the caching-allocator model.
No GPU here: the check is that the replay sees the trace's own allocations (its allocated peak equals the trace's,
up to the 512-byte rounding) and that what torch would reserve is at least what it allocates, for the default
allocator and for expandable segments."""

import pytest

from grpo_recipes.config import GRPOConfig
from grpo_recipes.hardware import Hardware
from grpo_recipes.plan import build_plan

GiB = 2**30
TINY = {
    'architectures': ['Qwen2ForCausalLM'],
    'model_type': 'qwen2',
    'hidden_size': 64,
    'intermediate_size': 160,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 2,
    'vocab_size': 4096,
    'tie_word_embeddings': False,
    'max_position_embeddings': 2048,
    'torch_dtype': 'bfloat16',
}


@pytest.mark.parametrize('conf', [None, 'expandable_segments:True'])
def test_trace_reports_reserved_at_least_allocated(conf):
    pytest.importorskip('torch')
    from grpo_recipes.allocconf import conf_of as parse_alloc_conf
    from grpo_recipes.memory.allocator import replay
    from grpo_recipes.memory.trace import trace_launch, trace_step

    cfg, _ = GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--tuner_type',
            'lora',
            '--per_device_train_batch_size',
            '4',
            '--max_completion_length',
            '256',
            '--gradient_checkpointing',
            'true',
            '--torch_dtype',
            'bfloat16',
            '--beta',
            '0',
        ]
    )
    r = trace_launch(cfg, build_plan(cfg, {}, Hardware(gpus=1)), TINY, 64, 'tiny', alloc_conf=conf)
    assert r.reserved_peak_gib is not None and r.reserved_peak_gib >= r.traced_peak_gib > 0
    assert r.allocator == (conf or '')
    counter, _, _ = trace_step(cfg, TINY, 64)
    st = replay(counter.events, parse_alloc_conf(conf))
    # every traced storage went through the allocator: the allocated peak is the trace's, rounded to 512 B blocks
    assert counter.peak <= st.peak_allocated <= counter.peak + 512 * len(counter.events)
    assert st.peak_reserved >= st.peak_allocated


def test_gather_backward_is_recorded_in_place():
    """Under a dispatch mode autograd runs gather's backward out of place (new_zeros, then scatter_add); the GPU step
    fills the zeros in place (FunctionsManual.cpp gather_backward), and the events must say so: one buffer, not two."""
    torch = pytest.importorskip('torch')
    from grpo_recipes.memory.allocator import replay
    from grpo_recipes.memory.trace import LiveBytes

    reused = []

    class Counting(LiveBytes):
        def track(self, t, reuse=None):
            if reuse is not None:
                reused.append(reuse)
            super().track(t, reuse)

    c = Counting()
    x = torch.randn(8, 4096, requires_grad=True)
    with c.mode:
        y = x * 2
        torch.gather(y, -1, torch.zeros(8, 1, dtype=torch.long)).sum().backward()
        del y
    assert len(reused) == 1 and reused[0] in c.zeros
    ids = [e[0] for e in c.events if e[1] is not None]
    freed = [e[0] for e in c.events if e[1] is None]
    assert len(ids) == len(set(ids)) and len(freed) == len(set(freed)) and set(freed) <= set(ids)
    full = 8 * 4096 * 4
    # y, the zeros gather's backward fills, x's gradient (mul's backward): 3; the out-of-place scatter_add would be
    # a 4th
    assert sum(1 for e in c.events if e[1] == full) == 3
    assert replay(c.events).peak_requested <= c.peak  # in place can only lower the bytes live at once


# TINY's layers with Qwen2.5's vocabulary, so each fp32 logits block is a large-pool segment of its own (> 10 MiB)
WIDE_VOCAB = {**TINY, 'vocab_size': 151936}


def _full_training(bs: int):
    cfg, _ = GRPOConfig.from_argv(
        ['--rlhf_type', 'grpo', '--tuner_type', 'full', '--per_device_train_batch_size', str(bs)]
        + ['--max_completion_length', '64', '--torch_dtype', 'bfloat16', '--beta', '0.04']
    )
    return cfg


def _replayed(shapes):
    from grpo_recipes.allocconf import conf_of
    from grpo_recipes.memory.allocator import replay
    from grpo_recipes.memory.trace import trace_step

    counter, _, _ = trace_step(_full_training(4), WIDE_VOCAB, 32, shapes=shapes)
    st = replay(counter.events, conf_of(''))
    return counter.peak, st.peak_reserved


def test_the_steps_settle_when_the_window_repeats():
    """Qwen3-1.7B full 16 x 512 on an H200 (bench_swift_gpu.py, 2026-11-27, windows 549, 545, 534, 537): allocated
    33.84 and reserved 36.54 GiB at steps 2, 3 and 4 alike. A third step at the same window allocates and reserves
    what the second did: nothing of one step (its gradients included) outlives the optimizer's zero_grad."""
    pytest.importorskip('torch')
    two, three = _replayed([(32, 64)] * 2), _replayed([(32, 64)] * 3)
    assert three == two


def test_a_window_longer_than_any_before_reserves_new_logits_segments():
    """Qwen2.5-1.5B full 32 x 512 on an H200 (bench_swift_gpu.py, 2026-11-27): windows 566, 550, then 568 took torch's
    reserve from 64.37 to 105.56 GiB (four new logits-sized segments) while allocated rose 53.32 to 54.69. Freed
    segments serve a block no larger than themselves, so the same windows in falling order reserve far less."""
    pytest.importorskip('torch')
    rising_alloc, rising = _replayed([(32, 64), (32, 62), (32, 66)])
    falling_alloc, falling = _replayed([(32, 66), (32, 64), (32, 62)])
    block = 4 * 67 * 151936 * 4  # micro-batch x (window + 1) x vocabulary x fp32: the largest logits block
    # nearly the same bytes in use (the rising order's peak step has the longest window and the optimizer states)...
    assert abs(rising_alloc - falling_alloc) < 0.25 * block
    assert rising - falling >= block  # ...but at least one more whole logits block of segments held


def test_weights_loaded_with_a_device_map_sit_in_one_segment_of_their_size():
    """transformers' from_pretrained with a device_map warms the caching allocator with one fp16 block of the
    checkpoint's bytes, tied weights once, and frees it (modeling_utils.py caching_allocator_warmup): replayed, the
    weights then fill exactly that one segment (the measured H200 runs held one of the model's 16-bit size). Moved
    weights (loaded on the CPU, one by one) make no such segment, and a tied embedding is allocated once either way."""
    pytest.importorskip('torch')
    from grpo_recipes.allocconf import DEFAULT
    from grpo_recipes.memory.allocator import CachingAllocator
    from grpo_recipes.memory.trace import trace_step

    tied = {**TINY, 'vocab_size': 32000, 'hidden_size': 256, 'intermediate_size': 704, 'tie_word_embeddings': True}
    cfg, _ = GRPOConfig.from_argv(
        ['--rlhf_type', 'grpo', '--tuner_type', 'full', '--per_device_train_batch_size', '2']
        + ['--max_completion_length', '32', '--torch_dtype', 'bfloat16', '--beta', '0']
    )
    # the checkpoint's bytes: embedding (tied to the head) and the two layers, 16 bits each
    h, i, v, q, kv = 256, 704, 32000, 256, 2 * 256 // 4
    layer = h * q + q + 2 * (h * kv + kv) + q * h + 3 * h * i + 2 * h
    weights = 2 * (v * h + 2 * layer + h)

    def segments_after_load(load):
        counter, _, _ = trace_step(cfg, tied, 16, steps=1, load=load)
        alloc = CachingAllocator(DEFAULT)
        for (rid, n), stage in zip(counter.events, counter.event_stages):
            if stage != 'load':
                break
            alloc.free(rid) if n is None else alloc.malloc(rid, n)
        return alloc.finish().segment_sizes, alloc.allocated

    warm, warm_allocated = segments_after_load('device_map')
    moved, moved_allocated = segments_after_load('moved')
    block = -(-weights // 2**21) * 2**21  # a request above 10 MiB gets a segment of its size, rounded to 2 MiB
    assert block in warm and block not in moved
    # the same weights live either way, the tied one once (the allocator's 512-byte rounding and the unsplit tail of
    # a carved block aside, a few hundred KiB here)
    for allocated in (warm_allocated, moved_allocated):
        assert weights <= allocated < weights + 2**20 < weights + v * h * 2
