"""A line of a launcher split into words the way bash does it, expansions included: a thin wrapper over
:mod:`.bash` (kept for callers of the old line reader).

bash(1), "EXPANSION": a ``${...}`` is one unit while the line is split into words (a space inside its braces does
not end the word); after parameter expansion, the result of an *unquoted* expansion is split into words at
whitespace ("Word Splitting", default IFS), so ``--x ${V:-a b}`` hands the command two words ``a`` and ``b``, and
an unquoted expansion that is empty leaves no word at all. Inside double quotes nothing is split. A variable set
nowhere is kept as written (:func:`.shell_expand.unresolved`).
"""

from __future__ import annotations

from typing import MutableMapping

from ..errors import GuardError


def split_words(
    text: str, scope: MutableMapping[str, str], exported: MutableMapping[str, str] | None = None
) -> list[str]:
    """One line -> the words of its simple commands after expansion and word splitting (``;`` between two
    commands). Assignments the line makes (``A=1``, ``${A:=1}``) are written back into ``scope`` (and into
    ``exported`` where the name is there). A line bash cannot parse raises ValueError."""
    from .bash.evaluator import Evaluator, _Exit

    ev = Evaluator(dict(scope), '<line>', None)
    try:
        ev.run_text(text, '<line>')
    except GuardError as e:
        raise ValueError(str(e)) from None
    except _Exit:
        pass
    for name in ev.state.touched:
        v = ev.state.scalar(name)
        if v is not None and scope.get(name) != v:
            scope[name] = v
            if exported is not None and name in exported:
                exported[name] = v
    words: list[str] = []
    for k, c in enumerate(ev.commands):
        words += ([';'] if k else []) + c.argv
    return words
