"""A model of PyTorch's CUDA caching allocator: replay allocations and frees, get what torch *reserves*.

Pure Python, no torch. Every rule below is PyTorch's ``c10/cuda/CUDACachingAllocator.cpp``
(``DeviceCachingAllocator``; pytorch/pytorch at commit 001074d2, 2026; the constants are also in torch 2.13's
``c10/core/AllocatorConfig.h``), cited by function:

- ``round_size``: every request is rounded up to a multiple of ``kMinBlockSize`` (512 B).
- ``get_pool``: requests <= ``kSmallSize`` (1 MiB) go to the small pool, larger ones to the large pool.
- ``get_allocation_size``: a new segment (one ``cudaMalloc``) is ``kSmallBuffer`` (2 MiB) for a small request,
  ``kLargeBuffer`` (20 MiB) for a request under ``kMinLargeAlloc`` (10 MiB), else the request rounded up to
  ``kRoundLarge`` (2 MiB).
- ``get_free_block``: best fit, the smallest cached block of the pool (same stream) at least as large (the pool is
  a set ordered by size, then address). With ``max_split_size_mb``: a request below it never takes a block at or
  above it, and a request at or above it takes a block only if the block is less than
  ``max_non_split_rounding_mb`` (default ``kLargeBuffer``, 20 MiB) larger.
- ``should_split``: the rest of a found block becomes a free block of its own when it is >= ``kMinBlockSize`` in
  the small pool or with expandable segments, and otherwise when it is > ``kSmallSize`` and the request is under
  ``max_split_size``.
- ``free_block`` / ``try_merge_blocks``: a freed block merges with its free neighbours, which are only ever the
  pieces of the same segment (blocks of different segments never merge; mapped never with unmapped).
- ``malloc``: no cached block fits -> ``alloc_block`` (a new segment); if that fails,
  ``release_available_cached_blocks`` (only with ``max_split_size_mb``: free oversize cached blocks, the smallest
  large enough, else the largest ones) and retry; then ``release_cached_blocks`` (free every cached block that is
  a whole segment, i.e. not split; what ``torch.cuda.empty_cache()`` does too) and retry; then out of memory.
- ``expandable_segments:True`` (Note [Expandable Segments], ``try_allocate_expandable_block``,
  ``find_expandable_block``, ``map_block``, ``unmap_block``): one segment per stream and pool reserves address
  space for 1 1/8 of the device and maps physical pages as needed, 2 MiB pages in the small pool and 20 MiB in
  the large pool, at the lowest address where free and unmapped space together fit the request; best fit counts
  a free block's unmapped tail as part of its size; releasing unmaps the whole free pages of free blocks.

Configuration: ``allocconf.AllocConf`` (``allocconf.conf_of`` parses PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF).

Not modelled (the differences from a real run are listed in bench/bench_allocator.py): one stream only (no
``record_stream`` events, no side streams), the addresses ``cudaMalloc`` returns (new segments here get increasing
addresses, which only breaks ties between equal-size blocks), and memory the allocator never sees.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ..allocconf import AllocConf

MiB = 2**20
K_MIN_BLOCK = 512  # kMinBlockSize
K_SMALL_SIZE = 1 * MiB  # kSmallSize
K_SMALL_BUFFER = 2 * MiB  # kSmallBuffer
K_LARGE_BUFFER = 20 * MiB  # kLargeBuffer
K_MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
K_ROUND_LARGE = 2 * MiB  # kRoundLarge
ADDRESS_SPACE_OF_DEVICE = 9 / 8  # an expandable segment reserves 1 1/8 of the device's memory (find_expandable_block)


def round_size(n: int) -> int:
    """round_size (roundup_power2_divisions unset)."""
    return K_MIN_BLOCK if n < K_MIN_BLOCK else K_MIN_BLOCK * -(-n // K_MIN_BLOCK)


def allocation_size(size: int) -> int:
    """get_allocation_size: the bytes of a new segment for a rounded request."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * -(-size // K_ROUND_LARGE)


class OutOfMemory(RuntimeError):
    pass


class _Segment:
    __slots__ = ('base', 'expandable', 'page')

    def __init__(self, base: int, expandable: bool, page: int = 0):
        self.base, self.expandable, self.page = base, expandable, page


class _Block:
    __slots__ = ('size', 'addr', 'seg', 'small', 'prev', 'next', 'allocated', 'mapped')

    def __init__(self, size: int, addr: int, seg: _Segment, small: bool, mapped: bool = True):
        self.size, self.addr, self.seg, self.small = size, addr, seg, small
        self.prev = self.next = None
        self.allocated = False
        self.mapped = mapped

    def key(self) -> tuple[int, int]:
        return self.size, self.addr


class _Pool:
    """A BlockPool: free mapped blocks ordered by (size, address); unmapped blocks by address."""

    def __init__(self, small: bool):
        self.small = small
        self.keys: list[tuple[int, int]] = []
        self.by_key: dict[tuple[int, int], _Block] = {}
        self.unmapped: list[tuple[int, int]] = []  # (addr, size) keys of unmapped blocks
        self.unmapped_by_addr: dict[int, _Block] = {}

    def insert(self, b: _Block) -> None:
        if b.mapped:
            bisect.insort(self.keys, b.key())
            self.by_key[b.key()] = b
        else:
            bisect.insort(self.unmapped, (b.addr, b.size))
            self.unmapped_by_addr[b.addr] = b

    def remove(self, b: _Block) -> None:
        if b.mapped:
            k = b.key()
            del self.keys[bisect.bisect_left(self.keys, k)]
            del self.by_key[k]
        else:
            del self.unmapped[bisect.bisect_left(self.unmapped, (b.addr, b.size))]
            del self.unmapped_by_addr[b.addr]


@dataclass
class AllocStats:
    peak_allocated: int = 0
    """Largest sum of the allocated blocks' sizes (torch.cuda.max_memory_allocated counts rounded block sizes)."""
    peak_reserved: int = 0
    """Largest reserved total: cudaMalloc'd segments, or mapped pages of expandable segments
    (torch.cuda.max_memory_reserved)."""
    peak_requested: int = 0
    """Largest sum of the bytes requested (before rounding)."""
    segments: int = 0
    """Segments held at the end (cudaMalloc'd blocks; an expandable segment counts once)."""
    peak_segments: int = 0
    segment_sizes: list = field(default_factory=list)
    """Sizes in bytes of the segments held at the end (expandable: the mapped bytes of each)."""
    retries: int = 0
    """Allocations that needed the free-cached-blocks-and-retry path (num_alloc_retries)."""
    ooms: int = 0
    reserved_at_stage_end: dict = field(default_factory=dict)
    """With ``replay(stages=...)``: the bytes reserved where each stage hands over to the next, by stage."""


class CachingAllocator:
    """One device, one stream. ``capacity``: bytes the allocator can obtain from the device (None: unlimited)."""

    def __init__(self, conf: AllocConf | None = None, capacity: int | None = None):
        self.conf = conf or AllocConf()
        self.capacity = capacity
        self.pools = {True: _Pool(True), False: _Pool(False)}
        self.live: dict = {}
        self.requested: dict = {}
        self.allocated = self.reserved = self.req_total = 0
        self.whole: set[_Block] = set()  # first block of each non-expandable segment
        self.exp_segments: list[_Segment] = []
        self.stats = AllocStats()
        self._next_addr = 1 << 40

    # -- segments ------------------------------------------------------------------------------------------------
    def _new_addr(self, size: int, align: int = K_LARGE_BUFFER) -> int:
        addr = -(-self._next_addr // align) * align
        self._next_addr = addr + size
        return addr

    def _grow(self, n: int) -> None:
        self.reserved += n
        self.stats.peak_reserved = max(self.stats.peak_reserved, self.reserved)

    def _fits(self, n: int) -> bool:
        return self.capacity is None or self.reserved + n <= self.capacity

    def _alloc_block(self, pool: _Pool, size: int, alloc_size: int) -> _Block | None:
        """alloc_block: a new cudaMalloc'd segment, or (expandable) pages mapped onto the pool's segment."""
        if self.conf.expandable_segments:
            return self._alloc_expandable(pool, size)
        if not self._fits(alloc_size):
            return None
        b = _Block(alloc_size, self._new_addr(alloc_size), _Segment(0, False), pool.small)
        self._grow(alloc_size)
        self.whole.add(b)
        self.stats.peak_segments = max(self.stats.peak_segments, self._segment_count())
        return b

    def _segment_count(self) -> int:
        return len(self.whole) + len(self.exp_segments)

    def _release_block(self, b: _Block) -> None:
        """release_block: cudaFree a cached whole segment."""
        self.pools[b.small].remove(b)
        self.whole.discard(b)
        self.reserved -= b.size

    # -- expandable segments -------------------------------------------------------------------------------------
    def _find_expandable_block(self, pool: _Pool, size: int) -> _Block:
        """find_expandable_block: the lowest address where free + unmapped space fits ``size``, else a new segment."""

        def allocatable(b):
            return b is not None and not b.allocated

        for addr, _ in pool.unmapped:
            c = pool.unmapped_by_addr[addr]
            if allocatable(c.prev):
                c = c.prev
            got, b = 0, c
            while got < size and allocatable(b):
                got, b = got + b.size, b.next
            if got >= size:
                return c
        page = K_SMALL_BUFFER if pool.small else K_LARGE_BUFFER
        space = int((self.capacity or 2**44) * ADDRESS_SPACE_OF_DEVICE) // page * page + page
        seg = _Segment(self._new_addr(space, page), True, page)
        self.exp_segments.append(seg)
        b = _Block(space, seg.base, seg, pool.small, mapped=False)
        pool.insert(b)
        return b

    def _map_block(self, b: _Block, size: int) -> bool:
        """map_block: map whole pages from the start of unmapped ``b`` covering ``size``; merge with free neighbours."""
        page = b.seg.page
        mapped = min(b.size, -(-size // page) * page)
        if not self._fits(mapped):
            return False
        pool = self.pools[b.small]
        pool.remove(b)
        b.mapped = True
        if mapped < b.size:
            rest = _Block(b.size - mapped, b.addr + mapped, b.seg, b.small, mapped=False)
            rest.prev, rest.next = b, b.next
            if b.next:
                b.next.prev = rest
            b.next = rest
            pool.insert(rest)
            b.size = mapped
        self._merge(b, b.prev, pool)
        self._merge(b, b.next, pool)
        pool.insert(b)
        self._grow(mapped)
        return True

    def _alloc_expandable(self, pool: _Pool, size: int) -> _Block | None:
        """try_allocate_expandable_block."""
        c = self._find_expandable_block(pool, size)
        if not c.mapped and not self._map_block(c, min(c.size, size)):
            return None
        while c.size < size:
            nxt = c.next
            if not self._map_block(nxt, min(size - c.size, nxt.size)):
                return None
            c = nxt
        pool.remove(c)
        return c

    def _unmap_block(self, b: _Block) -> None:
        """unmap_block: unmap the whole pages inside free block ``b``; the ragged ends stay mapped and free."""
        page, pool = b.seg.page, self.pools[b.small]
        off = b.addr - b.seg.base
        begin, end = -(-off // page) * page, (off + b.size) // page * page
        if begin >= end:
            return
        pool.remove(b)
        start, stop = b.seg.base + begin, b.seg.base + end
        if start > b.addr:
            before = _Block(start - b.addr, b.addr, b.seg, b.small)
            before.prev, before.next = b.prev, b
            if b.prev:
                b.prev.next = before
            b.prev = before
            pool.insert(before)
        if stop < b.addr + b.size:
            after = _Block(b.addr + b.size - stop, stop, b.seg, b.small)
            after.prev, after.next = b, b.next
            if b.next:
                b.next.prev = after
            b.next = after
            pool.insert(after)
        b.addr, b.size, b.mapped = start, stop - start, False
        self.reserved -= stop - start
        self._merge(b, b.prev, pool)
        self._merge(b, b.next, pool)
        pool.insert(b)

    # -- the public operations -----------------------------------------------------------------------------------
    def _merge(self, dst: _Block, src: _Block | None, pool: _Pool) -> None:
        """try_merge_blocks: only a free neighbour in the same segment with the same mapped state."""
        if src is None or src.allocated or src.mapped != dst.mapped:
            return
        pool.remove(src)
        if dst.prev is src:
            dst.addr, dst.prev = src.addr, src.prev
            if dst.prev:
                dst.prev.next = dst
            if src in self.whole:
                self.whole.discard(src)
                self.whole.add(dst)
        else:
            dst.next = src.next
            if dst.next:
                dst.next.prev = dst
        dst.size += src.size

    def _get_free_block(self, pool: _Pool, size: int) -> _Block | None:
        i = bisect.bisect_left(pool.keys, (size, -1))
        if i == len(pool.keys):
            return None
        b = pool.by_key[pool.keys[i]]
        if b.seg.expandable:
            if self.conf.expandable_segments:

                def exp_size(x):
                    return x.size + (x.next.size if x.next is not None and not x.next.mapped else 0)

                j = i + 1
                while b.seg.expandable and j < len(pool.keys) and exp_size(pool.by_key[pool.keys[j]]) < exp_size(b):
                    b = pool.by_key[pool.keys[j]]
                    j += 1
            else:
                while b.seg.expandable:
                    i += 1
                    if i == len(pool.keys):
                        return None
                    b = pool.by_key[pool.keys[i]]
        ms = self.conf.max_split_size
        if ms is not None:
            if size < ms and b.size >= ms:
                return None  # do not return an oversized block for a large request
            if size >= ms and b.size >= size + self.conf.max_non_split_rounding:
                return None
        pool.remove(b)
        return b

    def _release_available(self, pool: _Pool, size: int) -> bool:
        """release_available_cached_blocks: free oversize cached blocks (only with max_split_size_mb)."""
        ms = self.conf.max_split_size
        if ms is None or self.conf.expandable_segments:
            return False
        key = max(size, ms)
        i = bisect.bisect_left(pool.keys, (key, -1))
        if i < len(pool.keys):
            self._release_block(pool.by_key[pool.keys[i]])
            return True
        released = 0
        while released < key and i > 0 and pool.keys[i - 1][0] >= ms:
            i -= 1
            b = pool.by_key[pool.keys[i]]
            released += b.size
            self._release_block(b)
        return released >= key

    def empty_cache(self) -> None:
        """release_cached_blocks (torch.cuda.empty_cache, and the last resort before out of memory): free every
        cached block that is a whole segment; unmap the free pages of expandable segments."""
        for pool in self.pools.values():
            for k in list(pool.keys):
                b = pool.by_key.get(k)
                if b is None:
                    continue
                if b.seg.expandable:
                    self._unmap_block(b)
                elif b.prev is None and b.next is None:
                    self._release_block(b)
            for seg in list(self.exp_segments):
                heads = [pool.unmapped_by_addr[a] for a, _ in pool.unmapped if pool.unmapped_by_addr[a].seg is seg]
                if len(heads) == 1 and heads[0].prev is None and heads[0].next is None:
                    pool.remove(heads[0])  # release_expandable_segment
                    self.exp_segments.remove(seg)

    def malloc(self, rid, nbytes: int) -> None:
        size = round_size(nbytes)
        pool = self.pools[size <= K_SMALL_SIZE]
        b = self._get_free_block(pool, size)
        if b is None:
            alloc_size = allocation_size(size)
            b = self._alloc_block(pool, size, alloc_size)
            if b is None and self._release_available(pool, size):
                b = self._alloc_block(pool, size, alloc_size)
            if b is None:
                self.stats.retries += 1
                self.empty_cache()
                b = self._alloc_block(pool, size, alloc_size)
            if b is None:
                self.stats.ooms += 1
                raise OutOfMemory(
                    f'Tried to allocate {alloc_size / MiB:.2f} MiB with {self.reserved / MiB:.0f} MiB '
                    f'reserved and {self.allocated / MiB:.0f} MiB allocated'
                )
        remaining = b.size - size
        ms = self.conf.max_split_size
        if b.small or self.conf.expandable_segments:
            split = remaining >= K_MIN_BLOCK
        else:
            split = (ms is None or size < ms) and remaining > K_SMALL_SIZE
        if split:  # alloc_found_block: the request takes the front, the rest stays cached
            rest = _Block(remaining, b.addr + size, b.seg, b.small)
            rest.prev, rest.next = b, b.next
            if b.next:
                b.next.prev = rest
            b.next = rest
            b.size = size
            pool.insert(rest)
        b.allocated = True
        self.live[rid] = b
        self.requested[rid] = nbytes
        self.allocated += b.size
        self.req_total += nbytes
        s = self.stats
        s.peak_allocated = max(s.peak_allocated, self.allocated)
        s.peak_requested = max(s.peak_requested, self.req_total)

    def free(self, rid) -> None:
        b = self.live.pop(rid)
        self.allocated -= b.size
        self.req_total -= self.requested.pop(rid)
        b.allocated = False
        pool = self.pools[b.small]
        self._merge(b, b.prev, pool)
        self._merge(b, b.next, pool)
        pool.insert(b)

    def reset_peak(self) -> None:
        """torch.cuda.reset_peak_memory_stats: peaks restart from the current figures."""
        s = self.stats
        s.peak_allocated, s.peak_reserved, s.peak_requested = self.allocated, self.reserved, self.req_total

    def finish(self) -> AllocStats:
        s = self.stats
        sizes = {id(h): 0 for h in self.whole}
        sizes.update({id(g): 0 for g in self.exp_segments})
        blocks = [b for p in self.pools.values() for b in p.by_key.values()] + list(self.live.values())
        for b in blocks:  # every mapped block, free or allocated, counted into its segment
            head = b
            while not head.seg.expandable and head.prev is not None:
                head = head.prev
            sizes[id(head.seg if head.seg.expandable else head)] += b.size
        s.segment_sizes = sorted((x for x in sizes.values() if x), reverse=True)
        s.segments = len(s.segment_sizes)
        return s


def replay(events, conf: AllocConf | None = None, capacity: int | None = None, stages=None) -> AllocStats:
    """Replay ``events``: ``(id, nbytes)`` allocates, ``(id, None)`` frees, ``'empty_cache'`` and ``'reset_peak'``
    call those; a free of an id never allocated (a storage made before the events began) is skipped, as are
    zero-byte requests (torch hands those no memory). Returns the peaks and the segments held at the end; with
    ``stages`` (each event's stage, ``LiveBytes.event_stages``) also the reserve where each stage ends."""
    a = CachingAllocator(conf, capacity)
    ends, prev = {}, None
    for i, ev in enumerate(events):
        if stages is not None:
            if prev is not None and stages[i] != prev:
                ends[prev] = a.reserved
            prev = stages[i]
        if ev == 'empty_cache':
            a.empty_cache()
        elif ev == 'reset_peak':
            a.reset_peak()
        else:
            rid, n = ev
            if n is None:
                if rid in a.live:
                    a.free(rid)
            elif n > 0:
                a.malloc(rid, n)
    if prev is not None:
        ends[prev] = a.reserved
    stats = a.finish()
    stats.reserved_at_stage_end = ends
    return stats


def handover(step_events, new_sizes, conf: AllocConf | None = None, empty: bool = False) -> tuple[int, int]:
    """A train step, then the next phase on the same allocator: the step's events replayed (what the step frees
    stays cached), ``torch.cuda.empty_cache()`` when ``empty``, then the next phase's requests held together
    (``new_sizes``: the ZeRO-3 weights gathered for the weight sync, one request per parameter as DeepSpeed's
    ``_allgather_params_coalesced`` makes them). Returns (bytes cached at the step's end: reserved - allocated,
    bytes the next phase holds reserved above the step's resident allocations). The fast path's
    ``reserve.carried`` is the same handover in closed form."""
    a = CachingAllocator(conf)
    for ev in step_events:
        if ev == 'empty_cache':
            a.empty_cache()
        elif ev != 'reset_peak':
            rid, n = ev
            if n is None:
                if rid in a.live:
                    a.free(rid)
            elif n > 0:
                a.malloc(rid, n)
    resident, cached = a.allocated, a.reserved - a.allocated
    if empty:
        a.empty_cache()
    for i, n in enumerate(new_sizes):
        if n > 0:
            a.malloc(('next phase', i), n)
    return cached, a.reserved - resident
