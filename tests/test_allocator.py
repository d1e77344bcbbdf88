"""The caching-allocator model against sequences worked by hand from c10/cuda/CUDACachingAllocator.cpp's rules, and its
configuration parser against torch's own parser (``torch._C._accelerator_setAllocatorSettings``, which the CPU build
has: c10/core/AllocatorConfig.cpp). No GPU: the expected values are worked out from the C++ rules named in each test."""

import pytest

from grpo_recipes.allocconf import AllocConf, read_setting
from grpo_recipes.allocconf import conf_of as parse_alloc_conf
from grpo_recipes.errors import GuardError as AllocConfError
from grpo_recipes.memory.allocator import CachingAllocator, OutOfMemory, replay

MiB = 2**20
KiB = 2**10


def test_a_1_5_mib_request_takes_a_20_mib_segment():
    # get_allocation_size: 1 MiB < size < kMinLargeAlloc (10 MiB) -> kLargeBuffer (20 MiB)
    s = replay([(1, 3 * MiB // 2)])
    assert s.peak_reserved == 20 * MiB and s.segment_sizes == [20 * MiB] and s.peak_allocated == 3 * MiB // 2


def test_a_12_mib_request_rounds_to_12_mib_and_13_to_14():
    # >= 10 MiB: rounded up to kRoundLarge (2 MiB)
    assert replay([(1, 12 * MiB)]).peak_reserved == 12 * MiB
    s = replay([(1, 13 * MiB)])
    # the 1 MiB left is not > kSmallSize, so should_split keeps the block whole: 14 MiB allocated for 13 requested
    assert s.peak_reserved == 14 * MiB and s.peak_allocated == 14 * MiB and s.peak_requested == 13 * MiB


def test_300_kib_requests_share_a_2_mib_segment():
    # small pool (<= 1 MiB) in kSmallBuffer (2 MiB) segments, split while >= kMinBlockSize is left
    six = [(i, 300 * KiB) for i in range(6)]  # 1,800 KiB: one segment
    assert replay(six).peak_reserved == 2 * MiB and replay(six).segments == 1
    seven = [(i, 300 * KiB) for i in range(7)]  # 2,100 KiB: a second segment
    assert replay(seven).peak_reserved == 4 * MiB and replay(seven).segments == 2


def test_512_byte_rounding():
    s = replay([(1, 1), (2, 513)])
    assert s.peak_allocated == 512 + 1024 and s.peak_reserved == 2 * MiB


def test_a_freed_20_mib_block_is_split_for_5_mib_requests():
    s = replay([(1, 20 * MiB), (1, None), (2, 5 * MiB), (3, 5 * MiB), (4, 10 * MiB)])
    # best fit takes the cached 20 MiB block; the rest (15, then 10 MiB) is > kSmallSize, so it is split off
    assert s.peak_reserved == 20 * MiB and s.segments == 1 and s.peak_allocated == 20 * MiB


def test_max_split_size_keeps_oversize_blocks_whole():
    events = [(1, 20 * MiB), (1, None), (2, 5 * MiB)]
    # get_free_block: a request below max_split_size never takes a block at or above it -> a new 20 MiB segment
    s = replay(events, parse_alloc_conf('max_split_size_mb:20'))
    assert s.peak_reserved == 40 * MiB and s.segments == 2
    # an oversize request reuses an oversize block only if it is < kLargeBuffer larger
    s = replay([(1, 64 * MiB), (1, None), (2, 40 * MiB)], parse_alloc_conf('max_split_size_mb:20'))
    assert s.peak_reserved == 104 * MiB
    s = replay([(1, 50 * MiB), (1, None), (2, 40 * MiB)], parse_alloc_conf('max_split_size_mb:20'))
    assert s.peak_reserved == 50 * MiB and s.peak_allocated == 50 * MiB  # reused whole, not split


def test_blocks_merge_only_within_a_segment_and_empty_cache_frees_whole_segments():
    a = CachingAllocator()
    a.malloc(1, 12 * MiB)
    a.malloc(2, 12 * MiB)
    a.free(1)
    a.free(2)
    a.malloc(3, 24 * MiB)  # two free 12 MiB segments side by side do not merge: a new segment
    assert a.reserved == 48 * MiB
    a.empty_cache()  # release_cached_blocks: the two whole cached segments go back
    assert a.reserved == 24 * MiB
    a.malloc(4, 5 * MiB)
    a.free(3)
    a.malloc(5, 2 * MiB)  # splits the 20 MiB segment of request 4; empty_cache cannot free a split segment
    a.free(4)
    a.empty_cache()
    assert a.reserved == 20 * MiB and a.finish().segment_sizes == [20 * MiB]


def test_out_of_memory_retry_releases_cached_blocks_first():
    a = CachingAllocator(capacity=30 * MiB)
    a.malloc(1, 12 * MiB)
    a.free(1)
    a.malloc(2, 24 * MiB)  # cudaMalloc would exceed 30 MiB: free the cached 12 MiB, retry
    assert a.stats.retries == 1 and a.reserved == 24 * MiB and a.stats.peak_reserved == 24 * MiB
    with pytest.raises(OutOfMemory):
        a.malloc(3, 12 * MiB)


def test_expandable_segments_reserve_less_on_a_fragmenting_sequence():
    events = [(1, 100 * MiB), (1, None), (2, 120 * MiB)]
    # default: the cached 100 MiB block is too small for 120 MiB, a second segment: 220 MiB
    assert replay(events).peak_reserved == 220 * MiB
    # expandable: the free 100 MiB sits at the end of the mapped range, so one more 20 MiB page makes 120
    s = replay(events, AllocConf(expandable_segments=True))
    assert s.peak_reserved == 120 * MiB and s.segments == 1
    # small pool pages are 2 MiB: 300 KiB then 2 MiB of small requests map 2 MiB pages one at a time
    s = replay([(i, 1 * MiB) for i in range(3)], AllocConf(expandable_segments=True))
    assert s.peak_reserved == 4 * MiB


def test_expandable_empty_cache_unmaps_free_pages():
    a = CachingAllocator(AllocConf(expandable_segments=True))
    a.malloc(1, 30 * MiB)  # two 20 MiB pages; 10 MiB free tail
    a.malloc(2, 30 * MiB)  # 10 MiB free + one more page
    a.free(1)
    a.empty_cache()  # pages wholly inside the free [0, 30) MiB: the first one only
    assert a.reserved == 40 * MiB


@pytest.mark.parametrize(
    'text',
    [
        'expandable_segments:True',
        'expandable_segments:False',
        'max_split_size_mb:128,garbage_collection_threshold:0.6',
        'roundup_power2_divisions:[64:8,>:1]',
        'backend:native',
        'expandable_segments:yes',
        'expandable_segments:true',
        'max_split_size_mb:10',
        'garbage_collection_threshold:1.5',
        'max_non_split_rounding_mb:5',
    ],
)
def test_the_parser_accepts_and_refuses_what_torch_does(text):
    torch = pytest.importorskip('torch')
    try:
        torch._C._accelerator_setAllocatorSettings(text)
        torch_ok = True
    except (ValueError, RuntimeError):
        torch_ok = False
    finally:
        torch._C._accelerator_setAllocatorSettings('')
    try:
        parse_alloc_conf(text)
        ours = True
    except AllocConfError as e:
        ours = False
        assert '\n' not in str(e) and 'PYTORCH_CUDA_ALLOC_CONF' in str(e)
    assert ours == torch_ok


def test_parser_values_and_errors():
    c = parse_alloc_conf('max_split_size_mb:128, garbage_collection_threshold:0.6')
    assert c.max_split_size == 128 * MiB and not c.expandable_segments
    assert c.unmodelled == ['garbage_collection_threshold']
    assert parse_alloc_conf('expandable_segments:True').expandable_segments
    # CUDAAllocatorConfig::parseArgs refuses unknown keys ("Unrecognized CachingAllocator option")
    with pytest.raises(AllocConfError, match="Unrecognized key 'expandable_segment'"):
        parse_alloc_conf('expandable_segment:True')
    with pytest.raises(AllocConfError, match='must be a whole number of MiB >= 20'):
        parse_alloc_conf('max_split_size_mb:10', 'PYTORCH_ALLOC_CONF')
    # which name wins when both are set is measured against the installed torch in test_allocconf.py
    assert read_setting({}) is None and parse_alloc_conf('') == AllocConf()
