"""`grpo-guard trace --snapshot FILE.pickle`: the traced step in PyTorch's memory-snapshot format.

The trace records every allocation and free of the step (``live_bytes.LiveBytes.events``); replayed through the
caching-allocator model (``allocator.CachingAllocator``) they get the addresses, blocks and segments a real
``torch.cuda.memory._snapshot()`` holds, so the file opens in https://pytorch.org/memory_viz (and in torch's own
``torch.cuda._memory_viz``: ``trace_plot``, ``segment_plot``, ``segsum``, ``trace``).

The format is torch's (torch/cuda/memory.py ``_snapshot``, ``Snapshot``/``Segment``/``Block``/``TraceEntry``):
``{'segments': [...], 'device_traces': [[...]]}``; each segment has ``address``, ``total_size``, ``stream``,
``segment_type`` (``small``/``large``), ``allocated_size``, ``active_size``, ``requested_size``, ``device``,
``is_expandable``, ``frames`` and ``blocks`` (``address``, ``size``, ``requested_size``, ``state``, ``frames``);
each trace entry has ``action`` (``alloc``, ``free_requested``, ``free_completed``, ``segment_alloc``,
``segment_free``, ``segment_map``, ``segment_unmap``), ``addr``, ``size``, ``stream``, ``time_us`` and ``frames``.
Addresses and times are the model's (increasing segment addresses; the event's index as its time), and the
frames hold the step's stage (load, forward, backward, optimizer) instead of a Python stack: the trace runs on
fake tensors, so no CUDA call and no real stack exists to record. Pure Python, no torch.
"""

from __future__ import annotations

import pickle

from ..allocconf import AllocConf, conf_of
from .allocator import CachingAllocator

RELEASED = 'released after the step'  # memory.trace.RELEASED (not imported: trace imports torch)


def _frames(stage: str) -> list[dict]:
    return [{'filename': 'grpo-guard trace', 'line': 0, 'name': stage or 'step'}]


def _segments(a: CachingAllocator) -> dict[int, tuple[int, list, bool, bool]]:
    """Every segment the allocator holds: base address -> (mapped bytes, its blocks in address order, small pool,
    expandable). A block is ``(address, size, allocated)``."""
    out: dict[int, tuple[int, list, bool, bool]] = {}
    for head in a.whole:  # cudaMalloc'd segments: the chain of blocks from the head
        blocks, b = [], head
        while b is not None:
            blocks.append(b)
            b = b.next
        out[head.addr] = (sum(x.size for x in blocks), blocks, head.small, False)
    for seg in a.exp_segments:
        blocks = [b for p in a.pools.values() for b in p.by_key.values() if b.seg is seg]
        blocks += [b for b in a.live.values() if b.seg is seg]
        blocks = sorted((b for b in blocks if b.mapped), key=lambda b: b.addr)
        small = bool(blocks) and blocks[0].small
        out[seg.base] = (sum(b.size for b in blocks), blocks, small, True)
    return out


def snapshot(events, stages=None, conf: AllocConf | str | None = None) -> dict:
    """Replay the trace's ``events`` (``(id, nbytes)`` allocates, ``(id, None)`` frees: ``allocator.replay``'s
    input) and return the dict ``torch.cuda.memory._snapshot()`` returns. ``stages``: the step's stage at each event
    (the same length as ``events``; None: unnamed)."""
    a = CachingAllocator(conf if isinstance(conf, AllocConf) else conf_of(conf))
    trace: list[dict] = []
    seg_sizes: dict[int, int] = {}
    requested: dict[int, int] = {}  # address of a live block -> the bytes asked for
    made_in: dict[int, str] = {}  # address of a live block -> the stage that allocated it

    def entry(action, addr, size, stage, t):
        trace.append(
            {
                'action': action,
                'addr': addr,
                'size': size,
                'stream': 0,
                'time_us': t,
                'pool_id': (0, 0),
                'frames': _frames(stage),
            }
        )

    def segments_changed(stage, t):
        now = {base: (size, exp) for base, (size, _, _, exp) in _segments(a).items()}
        for base, size in list(seg_sizes.items()):
            if base not in now:
                entry('segment_free', base, size, stage, t)
                del seg_sizes[base]
            elif now[base][0] < size:
                entry('segment_unmap', base + now[base][0], size - now[base][0], stage, t)
                seg_sizes[base] = now[base][0]
        for base, (size, exp) in now.items():
            old = seg_sizes.get(base)
            if old is None and not exp:
                entry('segment_alloc', base, size, stage, t)
            elif size > (old or 0):
                entry('segment_map', base + (old or 0), size - (old or 0), stage, t)
            seg_sizes[base] = size

    for i, ev in enumerate(events):
        if not isinstance(ev, tuple):
            continue  # 'empty_cache' / 'reset_peak' markers: not part of a traced step
        stage = stages[i] if stages is not None and i < len(stages) else ''
        if stage == RELEASED:
            break  # the model and optimizer freed after the step: the snapshot is taken at the step's end
        rid, n = ev
        if n is None:
            b = a.live.get(rid)
            if b is None:
                continue  # a storage made before the events began
            addr, size = b.addr, b.size
            entry('free_requested', addr, size, stage, i)
            reserved = a.reserved
            a.free(rid)
            requested.pop(addr, None)
            made_in.pop(addr, None)
            entry('free_completed', addr, size, stage, i)
            if a.reserved != reserved:
                segments_changed(stage, i)
        elif n > 0:
            reserved = a.reserved
            a.malloc(rid, n)
            if a.reserved != reserved:
                segments_changed(stage, i)
            b = a.live[rid]
            requested[b.addr] = n
            made_in[b.addr] = stage
            entry('alloc', b.addr, b.size, stage, i)
    segments = []
    for base, (total, blocks, small, exp) in sorted(_segments(a).items()):
        bl = [
            {
                'address': b.addr,
                'size': b.size,
                'requested_size': requested.get(b.addr, b.size) if b.allocated else b.size,
                'state': 'active_allocated' if b.allocated else 'inactive',
                'frames': _frames(made_in.get(b.addr, '')) if b.allocated else [],
            }
            for b in blocks
        ]
        allocated = sum(b.size for b in blocks if b.allocated)
        segments.append(
            {
                'device': 0,
                'address': base,
                'total_size': total,
                'stream': 0,
                'segment_type': 'small' if small else 'large',
                'segment_pool_id': (0, 0),
                'allocated_size': allocated,
                'active_size': allocated,
                'requested_size': sum(x['requested_size'] for x in bl if x['state'] == 'active_allocated'),
                'is_expandable': exp,
                'frames': [],
                'blocks': bl,
            }
        )
    return {'segments': segments, 'device_traces': [trace]}


def write_snapshot(path: str, events, stages=None, conf: AllocConf | str | None = None) -> dict:
    """Write ``snapshot(...)`` as a pickle (what ``torch.cuda.memory._dump_snapshot`` writes); return the dict."""
    data = snapshot(events, stages, conf)
    with open(path, 'wb') as f:
        pickle.dump(data, f)
    return data
