"""GPU ids written as ranges, for the memory table's GPU column and the bars' labels (render.py, bars.py)."""

from __future__ import annotations


def id_ranges(ids: list[str]) -> str:
    """'0,1,2,3,5' -> '0-3,5' so a GPU column stays narrow."""
    prefix = ids[0].rstrip('0123456789') if ids else ''
    if prefix and all(i.startswith(prefix) for i in ids):
        return prefix + id_ranges([i[len(prefix) :] for i in ids])  # 'remote:0,remote:1' -> 'remote:0-1'
    if not ids or not all(i.isdigit() for i in ids):
        return ','.join(ids)
    nums, out = sorted(int(i) for i in ids), []
    start = prev = nums[0]
    for n in nums[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f'{start}-{prev}')
        if n is not None:
            start = prev = n
    return ','.join(out)
