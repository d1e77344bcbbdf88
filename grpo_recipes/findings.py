"""What a check says: one :class:`Finding` per problem, with its severity, the rule id that made it, the
argument(s) it names, the message (in the framework's own wording where it has one) and the fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass

ERROR, WARNING, INFO = 'error', 'warning', 'info'
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}
"""Findings are listed errors first, then warnings, then notes (a stable sort: rule order within each)."""


@dataclass
class Finding:
    severity: str
    """ERROR (the launch fails or the guard refuses it), WARNING or INFO."""
    rule: str
    """The rule id (``batch.num-generations-divides``); a grep for it finds the code."""
    arguments: list[str]
    """The arguments / environment variables the finding is about."""
    message: str
    fix: str | None = None
    """The change that clears it, in the launch's own syntax."""
    source: str | None = None
    """The framework file (or issue) whose check or behaviour the message quotes."""

    def to_dict(self) -> dict:
        return asdict(self)


RULE_IDS: dict[str, str] = {}
"""Every rule id the code can emit -> the function that emits it (``module.function``)."""


def declare(owner: str, ids) -> None:
    """Record the ids ``owner`` can emit; an id has one owner."""
    for i in ids:
        if RULE_IDS.setdefault(i, owner) != owner:
            raise ValueError(f'rule id {i} is declared by {RULE_IDS[i]} and {owner}')
