"""A line of a launcher split into words the way bash does it, expansions included (for :mod:`.shell`).

bash(1), "EXPANSION": a ``${...}`` is one unit while the line is split into words (a space inside its braces does
not end the word); after parameter expansion, the result of an *unquoted* expansion is split into words at
whitespace ("Word Splitting", default IFS), so ``--x ${V:-a b}`` hands the command two words ``a`` and ``b``, and
an unquoted expansion that is empty leaves no word at all. Inside double quotes nothing is split. Quotes within
the default word of an unquoted ``${V:-"a b"}`` protect it from splitting (they are removed, the text stays one
word). Single quotes expand nothing. A variable set nowhere is kept as written (:func:`.shell_expand.unresolved`).

Pure: nothing is executed. A quote left open raises ValueError, as ``shlex.split`` does.
"""
from __future__ import annotations

import re
import shlex
from typing import MutableMapping

from .shell_expand import _NAME, expand

_SPLIT = object()  # a word boundary that an unquoted expansion's whitespace makes
_ASSIGN_START = re.compile(rf'^{_NAME}=')
_PARAM_RAW = re.compile(rf'^\$\{{({_NAME})(?:(:?[-=+])(.*))?\}}$', re.S)


def _brace_end(text: str, i: int) -> int:
    """Index just past the ``}`` closing the ``${`` at ``text[i]`` (nested ``${}`` and quotes skipped)."""
    depth, j, quote = 0, i, None
    while j < len(text):
        c = text[j]
        if quote:
            if c == quote:
                quote = None
            elif c == '\\' and quote == '"':
                j += 1
        elif c in '"\'':
            quote = c
        elif c == '\\':
            j += 1
        elif text.startswith('${', j):
            depth += 1
            j += 1
        elif c == '}':
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise ValueError('no closing brace')


def _fields(value: str) -> list:
    """An unquoted expansion's value -> pieces, whitespace runs becoming word boundaries."""
    out: list = []
    for part in re.split(r'(\s+)', value):
        if not part:
            continue
        out.append(_SPLIT if part.isspace() else part)
    return out


def _unquoted_expansion(raw: str, scope: MutableMapping[str, str], exported) -> list:
    """``$NAME`` / ``${...}`` outside quotes -> pieces: the value split at whitespace; a default word used is
    read with its own quotes (quoted parts stay one word, as bash removes the quotes after splitting)."""
    m = _PARAM_RAW.match(raw)
    value = expand(raw, scope, exported)
    if value == raw:  # set nowhere: kept as written
        return [raw]
    if m and m.group(2) and not m.group(2).endswith('+') and ('"' in (m.group(3) or '') or "'" in (m.group(3) or '')):
        val = scope.get(m.group(1))
        used_default = val is None or (m.group(2).startswith(':') and val == '') or (
            m.group(2).endswith('=') and val == value)
        if used_default:
            try:
                words = shlex.split(value)
            except ValueError:
                return _fields(value)
            out: list = []
            if value[:1].isspace():
                out.append(_SPLIT)
            for k, w in enumerate(words):
                out += ([_SPLIT] if k else []) + [w]
            if value[-1:].isspace():
                out.append(_SPLIT)
            return out
    return _fields(value)


def _no_split_in_assignment(before: list, pieces: list) -> list:
    """``A=${V:-a b}`` (also after ``export``): bash does not split the value of an assignment word."""
    if all(isinstance(p, str) for p in before) and _ASSIGN_START.match(''.join(before)):
        return [' ' if p is _SPLIT else p for p in pieces]
    return pieces


def split_words(text: str, scope: MutableMapping[str, str],
                exported: MutableMapping[str, str] | None = None) -> list[str]:
    """One logical line -> its words after expansion and word splitting (a ``#`` starting a word ends the line)."""
    words: list[str] = []
    pieces: list = []  # the current word: str pieces and _SPLIT boundaries
    literal = False  # the current word has quoted or literal text (an empty "" is still a word)
    i, n = 0, len(text)

    def finish():
        nonlocal pieces, literal
        cur, has = '', literal
        for p in pieces:
            if p is _SPLIT:
                if cur or has:
                    words.append(cur)
                cur, has = '', False
            else:
                cur += p
                has = has or bool(p)
        if cur or has:
            words.append(cur)
        pieces, literal = [], False

    while i < n:
        c = text[i]
        if c.isspace():
            finish()
            i += 1
        elif c == '#' and not pieces and not literal:
            break
        elif c == '\\':
            if i + 1 < n:
                pieces.append(text[i + 1])
                literal = True
            i += 2
        elif c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise ValueError('No closing quotation')
            pieces.append(text[i + 1:j])
            literal, i = True, j + 1
        elif c == '"':
            i, part = _double_quoted(text, i + 1, scope, exported)
            pieces.append(part)
            literal = True
        elif c == '$' and (m := re.compile(rf'\$({_NAME})').match(text, i)) and not text.startswith('${', i):
            pieces += _no_split_in_assignment(pieces, _unquoted_expansion(m.group(0), scope, exported))
            i = m.end()
        elif text.startswith('${', i):
            j = _brace_end(text, i)
            pieces += _no_split_in_assignment(pieces, _unquoted_expansion(text[i:j], scope, exported))
            i = j
        else:
            pieces.append(c)
            literal = True
            i += 1
    finish()
    return words


def _double_quoted(text: str, i: int, scope, exported) -> tuple[int, str]:
    """The text of a ``"..."`` starting after its quote -> (index after the closing quote, expanded text)."""
    out = ''
    while i < len(text):
        c = text[i]
        if c == '"':
            return i + 1, out
        if c == '\\' and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
            out += text[i + 1]
            i += 2
        elif text.startswith('${', i):
            j = _brace_end(text, i)
            out += expand(text[i:j], scope, exported)
            i = j
        elif c == '$' and (m := re.compile(rf'\$({_NAME})').match(text, i)):
            out += expand(m.group(0), scope, exported)
            i = m.end()
        else:
            out += c
            i += 1
    raise ValueError('No closing quotation')
