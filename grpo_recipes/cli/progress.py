"""A one-line progress indicator on stderr for the slow verbs (``trace``: 13-27 s, ``validate``: about 7 s,
``check --replay``: about a minute), shown
only when stderr is a terminal: piped or redirected output stays exactly as before (tests and scripts pin it).

    with progress('trace: building the model') as p:
        ...
        p.set('trace: one training step on fake tensors')
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

FRAMES = '|/-\\'
INTERVAL_S = 0.25
"""How often the line is redrawn."""


class _Line:
    def __init__(self, stream, label: str):
        self.stream, self.label, self.t0, self.width = stream, label, time.monotonic(), 0
        self._lock = threading.Lock()

    def set(self, label: str) -> None:
        with self._lock:
            self.label = label
        self.draw(0)

    def draw(self, i: int) -> None:
        with self._lock:
            text = f'{self.label} {FRAMES[i % len(FRAMES)]} {time.monotonic() - self.t0:.0f}s'
            pad = max(0, self.width - len(text))
            self.width = max(self.width, len(text))
            self.stream.write('\r' + text + ' ' * pad)
            self.stream.flush()

    def clear(self) -> None:
        with self._lock:
            self.stream.write('\r' + ' ' * self.width + '\r')
            self.stream.flush()


class _Silent:
    def set(self, label: str) -> None:
        pass


@contextmanager
def progress(label: str, stream=None):
    """Redraw ``label``, a spinner and the seconds elapsed until the block ends, then erase the line. Nothing at
    all when ``stream`` (default stderr) is not a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        yield _Silent()
        return
    line = _Line(stream, label)
    stop = threading.Event()

    def tick() -> None:
        i = 1
        while not stop.wait(INTERVAL_S):
            line.draw(i)
            i += 1

    line.draw(0)
    thread = threading.Thread(target=tick, name='grpo-progress', daemon=True)
    thread.start()
    try:
        yield line
    finally:
        stop.set()
        thread.join()
        line.clear()
