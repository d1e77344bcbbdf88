"""``$((...))``, ``((...))``, ``let`` and C-style ``for``: bash's shell arithmetic (bash(1), "ARITHMETIC
EVALUATION") on 64-bit signed integers: division truncates toward zero, ``%`` takes the dividend's sign, ``**``,
shifts, bitwise and logical operators, comparisons, ``?:``, assignments (``= += -= ...``), ``++``/``--``, ``,``.
A variable's value is itself evaluated as an expression; an unset one is 0 (a variable the script never set and the
environment does not hold is not known: :class:`Unresolved`). Numbers: decimal, ``0x`` hex, leading-0 octal, ``B#N``.
"""

from __future__ import annotations

import re
from typing import Callable

_TOKEN = re.compile(
    r'\s*(?:(?P<num>\d+#[0-9A-Za-z@_]+|0[xX][0-9A-Fa-f]+|\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)'
    r'|(?P<op>\*\*=|<<=|>>=|\+\+|--|\*\*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[-+*/%<>&|^!~?:=(),]))'
)
_BINARY = {  # precedence, bash(1) from lowest
    ',': 1,
    '||': 4,
    '&&': 5,
    '|': 6,
    '^': 7,
    '&': 8,
    '==': 9,
    '!=': 9,
    '<': 10,
    '>': 10,
    '<=': 10,
    '>=': 10,
    '<<': 11,
    '>>': 11,
    '+': 12,
    '-': 12,
    '*': 13,
    '/': 13,
    '%': 13,
    '**': 15,
}
_ASSIGN = {'=', '+=', '-=', '*=', '/=', '%=', '<<=', '>>=', '&=', '|=', '^=', '**='}
_MASK = (1 << 64) - 1


class Unresolved(Exception):
    """A name whose value is not known (the caller keeps the expression as written)."""


class ArithError(Exception):
    """What bash reports as an error (division by 0, a syntax error): the expansion fails."""


def wrap(v: int) -> int:
    v &= _MASK
    return v - (1 << 64) if v >> 63 else v


def parse_number(text: str) -> int:
    t = text.strip()
    neg = t.startswith('-')
    t = t.lstrip('+-') if t[:1] in '+-' else t
    if '#' in t:
        base_s, digits = t.split('#', 1)
        base = int(base_s)
        if not 2 <= base <= 64:
            raise ArithError(f'invalid arithmetic base: {text}')
        alphabet = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ@_'
        if base <= 36:
            digits = digits.lower()
        v = 0
        for ch in digits:
            d = alphabet.index(ch) if ch in alphabet else 99
            if d >= base:
                raise ArithError(f'value too great for base: {text}')
            v = v * base + d
    elif t[:2] in ('0x', '0X'):
        v = int(t[2:], 16)
    elif len(t) > 1 and t.startswith('0'):
        if not re.fullmatch(r'[0-7]+', t):
            raise ArithError(f'value too great for base: {text}')
        v = int(t, 8)
    else:
        v = int(t)
    return wrap(-v if neg else v)


class Arith:
    """One evaluation: ``get(name) -> str | None`` (None: unset, 0), ``put(name, int)``; ``known(name)``."""

    def __init__(self, get: Callable[[str], str | None], put: Callable[[str, int], None], depth: int = 0):
        self.get, self.put, self.depth = get, put, depth

    def evaluate(self, text: str) -> int:
        self.toks = self._lex(text)
        self.i = 0
        if not self.toks:
            return 0
        v = self._expr(0)
        if self.i != len(self.toks):
            raise ArithError(f'syntax error in expression (error token is "{self.toks[self.i][1]}")')
        return self._val(v)

    def _lex(self, text: str) -> list[tuple[str, str]]:
        out, i = [], 0
        text = text.rstrip()
        while i < len(text):
            m = _TOKEN.match(text, i)
            if not m or m.end() == i:
                raise ArithError(f'syntax error: invalid arithmetic operator (error token is "{text[i:]}")')
            kind = m.lastgroup
            out.append((kind, m.group(kind)))
            i = m.end()
        return out

    def _peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _val(self, v) -> int:
        if isinstance(v, tuple):  # ('ref', name)
            return self._var(v[1])
        return v

    def _var(self, name: str) -> int:
        raw = self.get(name)
        if raw is None or raw.strip() == '':
            return 0
        if self.depth > 64:
            raise ArithError('expression recursion level exceeded')
        try:
            return parse_number(raw)
        except (ValueError, ArithError):
            return Arith(self.get, self.put, self.depth + 1).evaluate(raw)

    def _expr(self, min_prec: int):
        left = self._unary()
        while True:
            tok = self._peek()
            if tok is None or tok[0] != 'op':
                return left
            op = tok[1]
            if op in _ASSIGN:
                if not isinstance(left, tuple) or min_prec > 2:
                    return left
                self.i += 1
                right = self._val(self._expr(2))
                if op != '=':
                    right = self._binary(op[:-1], self._var(left[1]), right)
                self.put(left[1], right)
                left = right
                continue
            if op == '?':
                if min_prec > 3:
                    return left
                self.i += 1
                cond = self._val(left)
                a = self._expr(2)
                if self._peek() != ('op', ':'):
                    raise ArithError("`:' expected for conditional expression")
                self.i += 1
                b = self._expr(3)
                left = self._val(a) if cond else self._val(b)
                continue
            prec = _BINARY.get(op)
            if prec is None or prec < min_prec:
                return left
            self.i += 1
            if op == '&&' and not self._val(left):
                self._expr(prec + 1)  # bash skips the right side's effects; evaluated here for syntax only
                left = 0
                continue
            if op == '||' and self._val(left):
                self._expr(prec + 1)
                left = 1
                continue
            right = self._expr(prec if op == '**' else prec + 1)
            left = self._binary(op, self._val(left), self._val(right))

    def _binary(self, op: str, a: int, b: int) -> int:
        if op in ('/', '%'):
            if b == 0:
                raise ArithError('division by 0 (error token is "0")')
            q = abs(a) // abs(b)
            q = q if (a >= 0) == (b >= 0) else -q
            return wrap(q if op == '/' else a - q * b)
        if op == '**':
            if b < 0:
                raise ArithError('exponent less than 0')
            return wrap(pow(a, b, 1 << 64))
        res = {
            '+': lambda: a + b,
            '-': lambda: a - b,
            '*': lambda: a * b,
            '<<': lambda: a << (b & 63),
            '>>': lambda: a >> (b & 63),
            '&': lambda: a & b,
            '|': lambda: a | b,
            '^': lambda: a ^ b,
            '==': lambda: int(a == b),
            '!=': lambda: int(a != b),
            '<': lambda: int(a < b),
            '>': lambda: int(a > b),
            '<=': lambda: int(a <= b),
            '>=': lambda: int(a >= b),
            '&&': lambda: int(bool(a) and bool(b)),
            '||': lambda: int(bool(a) or bool(b)),
            ',': lambda: b,
        }[op]()
        return wrap(res)

    def _unary(self):
        tok = self._peek()
        if tok is None:
            raise ArithError('syntax error: operand expected')
        kind, text = tok
        self.i += 1
        if kind == 'num':
            return parse_number(text)
        if kind == 'name':
            nxt = self._peek()
            if nxt in (('op', '++'), ('op', '--')):
                self.i += 1
                old = self._var(text)
                self.put(text, wrap(old + (1 if nxt[1] == '++' else -1)))
                return old
            return ('ref', text)
        if text in ('++', '--'):
            nt = self._peek()
            if nt is None or nt[0] != 'name':
                raise ArithError('syntax error: operand expected')
            self.i += 1
            v = wrap(self._var(nt[1]) + (1 if text == '++' else -1))
            self.put(nt[1], v)
            return v
        if text == '(':
            v = self._val(self._expr(0))
            if self._peek() != ('op', ')'):
                raise ArithError("missing `)'")
            self.i += 1
            return v
        if text in ('-', '+', '!', '~'):
            v = self._val(self._expr(16))
            return {'-': lambda: wrap(-v), '+': lambda: v, '!': lambda: int(not v), '~': lambda: wrap(~v)}[text]()
        raise ArithError(f'syntax error: operand expected (error token is "{text}")')
