"""Files a launch script writes before its launch (``cat > grpo.yaml <<EOF ... EOF``, then ``swift rlhf grpo.yaml``):
their text as the script would leave them, so a reader opens them as the launch would. Only the script's own here-
documents are known; nothing is written to disk. The script reader records them per command
(``bash.Command.files``); ``frontends._from_script`` makes them readable while it reads the launch."""

from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar

_FILES: ContextVar[dict[str, str]] = ContextVar('written_files', default={})


@contextmanager
def written(files: dict[str, str]):
    """Within: the files a script wrote (absolute path -> text) are read before the disk."""
    token = _FILES.set(dict(files or {}))
    try:
        yield
    finally:
        _FILES.reset(token)


def text_of(path: str | os.PathLike) -> str | None:
    """The text the script wrote at ``path`` (None: not one of them)."""
    files = _FILES.get()
    if not files:
        return None
    return files.get(os.path.abspath(os.fspath(path)))
