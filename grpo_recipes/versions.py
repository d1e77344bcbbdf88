"""Version strings as tuples, the one helper every version comparison uses."""

from __future__ import annotations

import re


def version_tuple(v) -> tuple[int, ...] | None:
    """The first three numbers of a version string ("0.10.1.1 (V1 engine)" -> (0, 10, 1)); None if none."""
    if v is None or v == '':
        return None
    parts = re.findall(r'\d+', str(v))[:3]
    return tuple(int(p) for p in parts) if parts else None
