"""How the walk leaves a construct early (``exit``, ``return``, ``break``, ``continue``) and what a command
substitution collects."""

from __future__ import annotations

from dataclasses import dataclass, field


class Exit(Exception):
    def __init__(self, status):
        self.status = status


class Return(Exit):
    pass


class Break(Exception):
    def __init__(self, n=1):
        self.n = n


class Continue(Break):
    pass


@dataclass
class Capture:
    out: list = field(default_factory=list)
    unknown: bool = False


def to_int(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
