"""Modes of what grpo-data writes, and which OS errors are about its input.

``tempfile.mkstemp`` creates its file 0600 and ``mkdtemp`` its dir 0700 (Python's tempfile docs: "readable and
writable only by the creating user"), and a rename keeps that mode, so an output written through a temp file would
be private whatever the umask. The temp path gets the mode a plain ``open(path, 'w')`` would give a new file
(0666 & ~umask; 0777 & ~umask for a dir), or the mode of the file it replaces.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def current_umask() -> int:
    mask = os.umask(0)  # the only portable way to read it: set, then restore at once
    os.umask(mask)
    return mask


def output_mode(tmp: Path, dest: Path, is_dir: bool) -> None:
    """Give ``tmp`` (to be renamed onto ``dest``) the mode ``dest`` has, or a new file's mode under the umask."""
    try:
        mode = stat.S_IMODE(dest.stat().st_mode)
    except OSError:
        mode = (0o777 if is_dir else 0o666) & ~current_umask()
    os.chmod(tmp, mode)


def reading_input(err: OSError, opts) -> bool:
    """True when an OS error names one of the command's inputs (unreadable input: exit 2)."""
    if not err.filename:
        return False
    inputs = getattr(opts, 'input', None)
    inputs = inputs if isinstance(inputs, list) else [inputs]
    names = {os.path.abspath(str(x)) for x in inputs if x is not None}
    tok = getattr(opts, 'tokenizer', None)
    if tok:
        names.add(os.path.abspath(tok))
    path = os.path.abspath(str(err.filename))
    return any(path == n or path.startswith(n + os.sep) for n in names)
