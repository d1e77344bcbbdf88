"""Scripts with CRLF (Windows) line endings, read as bash reads them.

bash splits lines at LF only, so each line keeps its CR: the last word of a line ends in ``\\r``, and a line
ending in a backslash followed by that CR is *not* continued (the backslash quotes the CR, which becomes a word
of its own, ``$'\\r'``); the lines below run as commands of their own. Checked with bash 5: ``printf '[%q]' a \\``
+ CRLF + ``b`` prints ``[a][$'\\r']`` and then runs ``b`` as a command.
"""

from __future__ import annotations

from ..errors import GuardError


def crlf_note(text: str, source: str) -> list[str]:
    """The warning for a script with CRLF line endings (none when it has none)."""
    if '\r\n' not in text:
        return []
    return [
        f"{source} has CRLF (Windows) line endings: bash keeps the CR at the end of each line's last word "
        f'(a value "8\\r", a path "train.jsonl\\r") and does not continue a line ending in `\\` + CR; read as '
        f'bash reads it. Convert it with `dos2unix {source}` (or `sed -i "s/\\r$//" {source}`)'
    ]


def lost_continuation(argv: list[str], source: str) -> None:
    """A command whose line ended in ``\\`` + CR: bash runs it without the lines below. Exit 2, naming the line."""
    if '\r' not in argv:
        return
    shown = ' '.join(w for w in argv[:4] if w != '\r')
    raise GuardError(
        f'{source}: `{shown} ...` ends at this line: it ends in `\\` followed by a CR (CRLF line '
        f'endings), which bash does not read as a line continuation, so the command runs without the '
        f'lines below it; convert the file to LF line endings (dos2unix)'
    )
