"""``[ ... ]`` / ``test`` (POSIX test with bash's operators) and ``[[ ... ]]`` (no word splitting, ``==`` against a
pattern, ``=~``, ``&&``, ``||``) decided from known values: an operand the reader could not resolve makes the whole
test undecided (None), and the caller records the branch it assumed. File tests look at the file system (relative
paths against the evaluator's cwd), which is what bash does; nothing is run."""

from __future__ import annotations

import os
import re

from .arith import ArithError, parse_number

_UNARY = {
    '-z',
    '-n',
    '-f',
    '-d',
    '-e',
    '-a',
    '-r',
    '-w',
    '-x',
    '-s',
    '-L',
    '-h',
    '-b',
    '-c',
    '-p',
    '-S',
    '-t',
    '-v',
    '-o',
    '-g',
    '-u',
    '-k',
    '-O',
    '-G',
    '-N',
}
_BINARY = {'=', '==', '!=', '<', '>', '-eq', '-ne', '-lt', '-le', '-gt', '-ge', '-nt', '-ot', '-ef', '=~'}


class Undecided(Exception):
    pass


class TestError(Exception):
    """bash's own error (``integer expression expected``): status 2."""


def file_test(op: str, path: str, cwd: str | None, absent: list | None = None) -> bool:
    """``-e``/``-f``/``-d``/... on this machine's files; a path not here is also recorded in ``absent`` (the machine
    the launch runs on may have it: a venv's binary, a checkpoint, a dataset)."""
    if not path.startswith('/'):
        if cwd is None:
            raise Undecided(path)
        path = os.path.join(cwd, path)
    if absent is not None and not os.path.lexists(path):
        absent.append(path)
    if op in ('-e', '-a'):
        return os.path.exists(path)
    if op == '-f':
        return os.path.isfile(path)
    if op == '-d':
        return os.path.isdir(path)
    if op == '-s':
        return os.path.exists(path) and os.path.getsize(path) > 0
    if op in ('-L', '-h'):
        return os.path.islink(path)
    if op == '-r':
        return os.access(path, os.R_OK)
    if op == '-w':
        return os.access(path, os.W_OK)
    if op == '-x':
        return os.access(path, os.X_OK)
    raise Undecided(op)


def _int(v: str, double: bool, arith) -> int:
    if double:
        return arith(v)
    try:
        return int(v.strip())
    except ValueError:
        raise TestError(f'{v}: integer expression expected') from None


def binary(op: str, a: str, b, double: bool, arith) -> bool:
    if op in ('=', '=='):
        return bool(re.fullmatch(b, a, re.S)) if double else a == b
    if op == '!=':
        return not re.fullmatch(b, a, re.S) if double else a != b
    if op == '<':
        return a < b
    if op == '>':
        return a > b
    if op == '=~':
        try:
            return re.search(b, a) is not None
        except re.error:
            raise TestError('bad regex') from None
    if op in ('-eq', '-ne', '-lt', '-le', '-gt', '-ge'):
        x, y = _int(a, double, arith), _int(b, double, arith)
        return {'-eq': x == y, '-ne': x != y, '-lt': x < y, '-le': x <= y, '-gt': x > y, '-ge': x >= y}[op]
    raise Undecided(op)


def unary(op: str, a: str, cwd: str | None, is_set, absent: list | None = None) -> bool:
    if op == '-z':
        return a == ''
    if op == '-n':
        return a != ''
    if op == '-v':
        return is_set(a)
    if op in ('-t', '-o', '-g', '-u', '-k', '-O', '-G', '-N', '-b', '-c', '-p', '-S'):
        raise Undecided(op)
    return file_test(op, a, cwd, absent)


class _Parser:
    """Tokens ``(kind, value)``: kind 'w' (a word), 'op' (syntax of ``[[``), 'pat' (a regex for ``==``)."""

    def __init__(self, toks, double: bool, cwd, is_set, arith, absent=None):
        self.t, self.i, self.double, self.cwd, self.is_set, self.arith = toks, 0, double, cwd, is_set, arith
        self.absent = absent

    def _peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def _is(self, k, *values):
        tok = self._peek(k)
        return tok is not None and tok[1] in values and (tok[0] == 'op' or not self.double)

    def or_(self) -> bool:
        v = self.and_()
        while self._is(0, '-o' if not self.double else '||'):
            self.i += 1
            r = self.and_()
            v = v or r
        return v

    def and_(self) -> bool:
        v = self.not_()
        while self._is(0, '-a' if not self.double else '&&'):
            self.i += 1
            r = self.not_()
            v = v and r
        return v

    def not_(self) -> bool:
        if self._is(0, '!') and self._peek(1) is not None:
            self.i += 1
            return not self.not_()
        return self.primary()

    def primary(self) -> bool:
        tok = self._peek()
        if tok is None:
            raise TestError('argument expected')
        if self._is(0, '(') and not (
            self._peek(1) is not None and self._peek(1)[1] in _BINARY and self._peek(2) is not None and not self.double
        ):
            self.i += 1
            v = self.or_()
            if not self._is(0, ')'):
                raise TestError("`)' expected")
            self.i += 1
            return v
        nxt = self._peek(1)
        if nxt is not None and nxt[1] in _BINARY and (nxt[0] == 'op' or not self.double) and self._peek(2):
            a, b = tok[1], self._peek(2)[1]
            self.i += 3
            return binary(nxt[1], a, b, self.double, self.arith)
        if tok[1] in _UNARY and tok[0] != 'pat' and nxt is not None:
            self.i += 2
            return unary(tok[1], nxt[1], self.cwd, self.is_set, self.absent)
        self.i += 1
        return tok[1] != ''


def evaluate(toks, double: bool, cwd: str | None, is_set, arith, absent: list | None = None) -> int | None:
    """Exit status of the test (0 true, 1 false, 2 error), or None if it cannot be decided; ``absent`` collects the
    paths a file test found missing here."""
    try:
        if not double and len(toks) == 1:
            return 0 if toks[0][1] != '' else 1
        p = _Parser(toks, double, cwd, is_set, arith, absent)
        v = p.or_()
        if p.i != len(toks):
            return 2
        return 0 if v else 1
    except Undecided:
        return None
    except (TestError, ArithError, ValueError):
        return 2


__all__ = ['evaluate', 'parse_number']
