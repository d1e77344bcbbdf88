"""bash's brace expansion (bash(1), "Brace Expansion"), done on a word's text before every other expansion:
``a{b,c}d`` -> ``abd acd``, ``{1..5}``, ``{01..10}`` (zero-padded), ``{a..e..2}``, ``{5..1}``, nested
(``{a,b{1,2}}``) and several in one word (``{a,b}{c,d}``), left to right, not sorted. Quoted braces, ``${...}``,
``$(...)``, ``$((...))`` and backquoted text are left alone; a brace pair with neither a comma nor a valid sequence
(``{}``, ``{a}``, ``{1..x}``) stays as written. The evaluator applies it to a command's words, a ``for`` list and an
array's elements, not to a plain assignment's value (bash does the same).
"""

from __future__ import annotations

import re

from .expand import find_close

LIMIT = 4096  # the most words one word expands to here (bash has no limit; a launch script never needs more)
_SEQ = re.compile(r'(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?')


def expand(word: str) -> list[str]:
    """A word's text -> the words brace expansion makes of it (the word itself when it has no brace expression)."""
    if '{' not in word:
        return [word]
    out: list[str] = []
    _expand(word, out)
    return out


def _expand(word: str, out: list[str]) -> None:
    i = _first(word)
    if i is None:
        out.append(word)
        return
    start, close, alts = i
    pre, post = word[:start], word[close + 1 :]
    for a in alts:
        if len(out) >= LIMIT:
            return
        _expand(pre + a + post, out)


def _first(word: str) -> tuple[int, int, list[str]] | None:
    """(start, end, alternatives) of the first brace expression of the word, None when it has none."""
    for i, c in _plain(word, 0):
        if c != '{':
            continue
        found = _pair(word, i)
        if found is None:
            continue
        close, commas = found
        if commas:
            bounds = [i + 1, *[p + 1 for p in commas]]
            return i, close, [word[b:e] for b, e in zip(bounds, [*commas, close])]
        seq = _sequence(word[i + 1 : close])
        if seq is not None:
            return i, close, seq
    return None


def _plain(word: str, i: int):
    """(index, character) of the word from ``i`` on, outside quotes, backquotes and ``$(...)``/``${...}``."""
    n = len(word)
    while i < n:
        c = word[i]
        if c in '\\\'"`' or (c == '$' and word[i + 1 : i + 2] in ('(', '{')):
            i = _skip(word, i)
            continue
        yield i, c
        i += 1


def _skip(word: str, i: int) -> int:
    """The index after the quoted or substituted text that starts at ``word[i]``."""
    n, c = len(word), word[i]
    if c == '\\':
        return i + 2
    if c == "'":
        j = word.find("'", i + 1)
        return n if j < 0 else j + 1
    if c == '`':
        j = i + 1
        while j < n and word[j] != '`':
            j += 2 if word[j] == '\\' else 1
        return j + 1
    if c == '"':
        j = i + 1
        while j < n and word[j] != '"':
            if word[j] == '\\':
                j += 2
            elif word[j] == '$' and word[j + 1 : j + 2] in ('(', '{'):
                j = _skip(word, j)
            elif word[j] == '`':
                j = _skip(word, j)
            else:
                j += 1
        return j + 1
    # `$((...))`, `$(...)`, `${...}`: to the matching close, as the expander finds it (quotes and nesting inside)
    try:
        if word.startswith('$((', i):
            end = find_close(word, i + 3, '$((')
            if word.startswith('))', end):
                return end + 2
        if word.startswith('$(', i):
            return find_close(word, i + 2, '$(') + 1
        return find_close(word, i + 2, '${') + 1
    except ValueError:  # left open: the rest of the word
        return n


def _pair(word: str, i: int) -> tuple[int, list[int]] | None:
    """(the index of the ``}`` that closes the ``{`` at ``i``, the commas at its own level), None if unclosed."""
    depth, commas = 1, []
    for j, c in _plain(word, i + 1):
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0:
                return j, commas
        elif c == ',' and depth == 1:
            commas.append(j)
    return None


def _sequence(inner: str) -> list[str] | None:
    """``{x..y[..incr]}`` of integers or single letters -> its words, None when ``inner`` is not one."""
    m = _SEQ.fullmatch(inner)
    if m is None:
        return None
    if m.group(1) is not None:
        a, b = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3))) if m.group(3) else 1
        step = step or 1
        width = 0
        for s in (m.group(1), m.group(2)):  # a leading zero pads every word to the longer of the two
            digits = s.lstrip('-')
            if len(digits) > 1 and digits.startswith('0'):
                width = max(width, len(m.group(1)), len(m.group(2)))
        rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        if len(rng) > LIMIT:
            return None
        return [f'{v:0{width}d}' if width else str(v) for v in rng]
    a, b = ord(m.group(4)), ord(m.group(5))
    step = abs(int(m.group(6))) if m.group(6) else 1
    step = step or 1
    rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
    return [chr(v) for v in rng]
