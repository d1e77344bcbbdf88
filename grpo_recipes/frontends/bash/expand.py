"""A word -> what bash hands the command (bash(1), "EXPANSION"), done once, never to a fixpoint: tilde, parameter
expansion (``$V ${V} ${V:-d} ${V-d} ${V:=d} ${V=d} ${V:+a} ${V+a} ${V:?m} ${#V} ${V#p} ${V##p} ${V%p} ${V%%p}
${V/a/b} ${V//a/b} ${V/#a/b} ${V/%a/b} ${V:off:len} ${V^^} ${V,,} ${!V}``, arrays ``${A[i]} ${A[@]} "${A[@]}"
${#A[@]} ${!A[@]}``, ``$@ $* $# $0 $1``), ``$((...))``, ``$(...)`` and backquotes, then word splitting of unquoted
expansions at IFS white space, then pathname expansion of a command's words against the files here
(:meth:`Expander.pathnames`; a glob that matches nothing stays as written, as bash leaves it), then quote removal.
Brace expansion comes before all of these (``braces.py``).

What cannot be known stays in the word as written (``$RANK``, ``${NNODES}``, ``$(nvidia-smi ...)``) and is named in
the evaluator's ``unresolved`` list, so a caller can say it was not resolved.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Protocol

from .arith import Arith, ArithError, Unresolved, wrap
from .state import State
from .syntax import DQ_MARK, unmark


class Host(Protocol):
    """What an expansion asks of the script's evaluator (evaluator.Evaluator): its state, the line it is on, its
    step count, assignments (``${V:=x}``), ``$(...)`` and the names it could not resolve. The evaluator calls the
    expander and the expander calls back through this, so the two modules do not import each other."""

    state: State
    line: int
    unresolved: list[str]

    def tick(self, n: int = 1) -> None: ...

    def assign(self, name: str, value, index: int | None = None, append: bool = False, taint=None) -> None: ...

    def substitute(self, inner: str) -> str | None: ...

    def note_unresolved(self, names: list[str]) -> None: ...

    def _assume_note(self, text: str) -> None: ...


BREAK = None  # a field boundary that "$@" makes
_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_]*|\d+|[@*#?$!\-_])')
_ANSI = {
    'n': '\n',
    't': '\t',
    'r': '\r',
    'a': '\a',
    'b': '\b',
    'e': '\x1b',
    'E': '\x1b',
    'f': '\f',
    'v': '\v',
    '\\': '\\',
    "'": "'",
    '"': '"',
    '?': '?',
}
_ALWAYS_SET = ('$', '!', '-', '_', '?', 'RANDOM', 'SECONDS', 'BASHPID', 'PPID', 'EPOCHSECONDS', 'SRANDOM')
"""Parameters bash always has a value for (so a ``${V:-default}`` of one is not known either)."""
_PATTERN_MAX = 4096
"""Longest value a ``${V#p}``/``${V/p/r}``/``${V^^}`` is worked out on (pattern matching is quadratic here)."""
# A name the script's own arguments go by, as the reader notes them unresolved: $1 ... $N, $#, $@, $*
SCRIPT_ARG = re.compile(r'\$(?:[1-9][0-9]*|[#@*])')

_OPS = (
    ':-',
    ':=',
    ':+',
    ':?',
    '-',
    '=',
    '+',
    '?',
    '##',
    '#',
    '%%',
    '%',
    '//',
    '/#',
    '/%',
    '/',
    '^^',
    '^',
    ',,',
    ',',
    ':',
)


class NotKnown(Exception):
    """Raised inside an expansion whose value cannot be known; the expansion is kept as written."""

    def __init__(self, names: list[str]):
        super().__init__(names)
        self.names = names


def find_close(text: str, i: int, opener: str) -> int:
    """Index of the character that closes the construct opened just before ``text[i]``: ``}`` for ``${``, ``)`` for
    ``$(`` (nested constructs and quotes skipped), ``))`` for ``$((`` (index of the first of the two)."""
    depth = 1
    quote = None
    n = len(text)
    while i < n:
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif c == '\\':
            i += 2
            continue
        elif quote == '"':
            if c == '"':
                quote = None
            elif c == '$' and text.startswith('${', i):
                i = find_close(text, i + 2, '${') + 1
                continue
            elif c == '$' and text.startswith('$(', i):
                i = find_close(text, i + 2, '$(') + 1
                continue
        elif c in '\'"' and opener != '$((':
            quote = c
        elif c == '`' and opener != '$((':
            j = text.find('`', i + 1)
            i = (j if j > 0 else n) + 1
            continue
        elif opener == '${':
            if text.startswith('${', i):
                i = find_close(text, i + 2, '${') + 1
                continue
            if text.startswith('$(', i):
                i = find_close(text, i + 2, '$(') + 1
                continue
            if c == '}':
                return i
        else:
            if text.startswith('${', i):
                i = find_close(text, i + 2, '${') + 1
                continue
            if c == '(':
                depth += 1
            elif c == ')':
                depth -= 1
                if depth == 0:
                    if opener == '$((':
                        return i - 1 if i > 0 and text[i - 1] == ')' else i
                    return i
            elif opener == '$(' and c == '#' and (i == 0 or text[i - 1] in ' \t\n;'):
                j = text.find('\n', i)
                i = j if j > 0 else n
                continue
        i += 1
    raise ValueError(f'no closing {opener}')


# bash's bracket expressions name POSIX classes (bash manual, "Pattern Matching": [:alnum:] ... [:xdigit:]); as
# Python character-class text, for the ASCII characters launch values hold.
_POSIX = {
    'alnum': 'a-zA-Z0-9', 'alpha': 'a-zA-Z', 'ascii': '\\x00-\\x7f', 'blank': ' \\t', 'cntrl': '\\x00-\\x1f\\x7f',
    'digit': '0-9', 'graph': '!-~', 'lower': 'a-z', 'print': ' -~',
    'punct': re.escape('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'),
    'space': ' \\t\\n\\r\\f\\v', 'upper': 'A-Z', 'word': 'a-zA-Z0-9_', 'xdigit': '0-9A-Fa-f',
}  # fmt: skip


def _bracket(text: str, i: int) -> tuple[str, int] | None:
    """The bracket expression opening at ``text[i]`` ('[') -> (Python character class, index of its closing ']'),
    or None where it does not close (then '[' is literal). A ']' first in the set is literal; [:class:] is read."""
    k = i + 1
    neg = text[k : k + 1] in ('!', '^')
    k += neg
    items: list[str] = []
    first = True
    while k < len(text):
        c = text[k]
        if c == ']' and not first:
            return '[' + ('^' if neg else '') + ''.join(items) + ']', k
        if text.startswith('[:', k) and (e := text.find(':]', k + 2)) > 0 and text[k + 2 : e] in _POSIX:
            items.append(_POSIX[text[k + 2 : e]])
            k = e + 2
        elif c == '\\' and k + 1 < len(text):
            items.append(re.escape(text[k + 1]))
            k += 2
        elif c == '-' and items and k + 1 < len(text) and text[k + 1] != ']':
            items.append('-')
            k += 1
        else:
            items.append(re.escape(c))
            k += 1
        first = False
    return None


def glob_regex(parts: list) -> str:
    """Pattern parts -> a Python regex: quoted text literal, unquoted ``* ? [...]`` as bash's pattern matching."""
    out = []
    for p in parts:
        if p is BREAK:
            out.append(' ')
            continue
        text, _split, quoted = p
        if quoted:
            out.append(re.escape(text))
            continue
        i = 0
        while i < len(text):
            c = text[i]
            if c == '*':
                out.append('.*')
            elif c == '?':
                out.append('.')
            elif c == '[':
                got = _bracket(text, i)
                if got is None:
                    out.append(r'\[')
                else:
                    cls, j = got
                    out.append(cls)
                    i = j
            elif c == '\\' and i + 1 < len(text):
                out.append(re.escape(text[i + 1]))
                i += 1
            else:
                out.append(re.escape(c))
            i += 1
    return ''.join(out)


class Expander:
    def __init__(self, ev: Host):
        self.ev = ev

    @property
    def st(self):
        return self.ev.state

    # -- entry points ------------------------------------------------------------------------------------------
    def fields(self, raw: str) -> list[str]:
        """A word as a command's argument: split, pathname-expanded where files here match (:meth:`pathnames`),
        quotes removed (a word may give several fields, or none)."""
        return self.pathnames(assemble_patterns(self.parts(raw, tilde=True)))

    def pathnames(self, fields: list[tuple[str, str | None]]) -> list[str]:
        """bash's pathname expansion (bash(1), "Pathname Expansion"): a field whose unquoted text holds ``*``, ``?``
        or ``[`` is replaced by the names here that match it, sorted (the C locale's order; names starting with
        ``.`` only where the pattern says so), and kept as written when none does (no ``nullglob``). The files are
        this machine's: a data directory that is only on the launch's machine keeps the pattern, as bash here would."""
        out: list[str] = []
        base = self.st.cwd or os.getcwd()
        for field, pattern in fields:
            if pattern is None:
                out.append(field)
                continue
            try:
                got = glob.glob(pattern) if pattern.startswith('/') else glob.glob(pattern, root_dir=base)
            except (OSError, ValueError, re.error):
                got = []
            if not got:
                where = os.path.dirname(pattern[: _GLOB.search(pattern).start()]) or '.'
                if not os.path.isdir(where if where.startswith('/') else os.path.join(base, where)):
                    # the launch machine's data (`for f in "$DATA"/*.jsonl`): kept as written, as bash here would
                    self.ev._assume_note(f'{field}: matches no file here ({where} is not here); kept as written')
            out += sorted(got) if got else [field]
        return out

    def single(self, raw: str, assignment: bool = False) -> str:
        """A word that is not split: an assignment's value, a ``case`` word, a ``[[`` operand."""
        return join(self.parts(raw, nosplit=True, tilde=True))

    def dquoted(self, raw: str) -> str:
        """Text as inside double quotes (a here-doc's body, :func:`..shell_expand.expand`)."""
        return join(self._dq(raw, 0, len(raw), heredoc=True)[0])

    def pattern(self, raw: str) -> str:
        return glob_regex(self.parts(raw, nosplit=True))

    # -- scanning -----------------------------------------------------------------------------------------------
    def parts(self, text: str, nosplit: bool = False, lit_split: bool = False, tilde: bool = False) -> list:
        """Unquoted text -> parts ``(text, splittable, quoted)`` and BREAKs."""
        self.ev.tick()
        out: list = []
        i, n = 0, len(text)
        if tilde and text.startswith('~'):
            m = re.match(r'~(?=/|$)', text)
            home = self.st.scalar('HOME') if m else None
            if m and home is not None:
                out.append((home, False, True))
                i = 1
        lit = []

        def flush():
            if lit:
                s = unmark(''.join(lit))
                out.append((s, lit_split and not nosplit, False))
                lit.clear()

        while i < n:
            c = text[i]
            if c == '\\':
                flush()
                if i + 1 < n and text[i + 1] == '\n':
                    i += 2
                    continue
                if i + 1 < n:
                    out.append((unmark(text[i + 1]), False, True))
                i += 2
            elif c == "'":
                flush()
                j = text.find("'", i + 1)
                j = n if j < 0 else j
                out.append((unmark(text[i + 1 : j]), False, True))
                i = j + 1
            elif c == '"':
                flush()
                got, i = self._dq(text, i + 1, n)
                out += got
            elif c == '$' and text.startswith("$'", i):
                flush()
                s, i = ansi_c(text, i + 2)
                out.append((s, False, True))
            elif c == '$' and text.startswith('$"', i):
                flush()
                got, i = self._dq(text, i + 2, n)
                out += got
            elif c == '$' or c == '`':
                got, j = self._dollar(text, i, quoted=False)
                if got is None:
                    lit.append(c)
                    i += 1
                    continue
                flush()
                out += [(p[0], p[1] and not nosplit, p[2]) if p is not BREAK else BREAK for p in got]
                i = j
            else:
                lit.append(c)
                i += 1
        flush()
        return out

    def _dq(self, text: str, i: int, n: int, heredoc: bool = False) -> tuple[list, int]:
        """Inside double quotes from ``text[i]`` -> (parts, index after the closing quote)."""
        out: list = []
        buf = []
        saw_at = False  # "$@" with no parameters: no field at all
        while i < n:
            c = text[i]
            if c == '"' and not heredoc:
                i += 1
                break
            if c == '\\' and i + 1 < n and text[i + 1] in ('$`"\\\n' + DQ_MARK if not heredoc else '$`\\\n'):
                if text[i + 1] != '\n':
                    buf.append(text[i + 1])
                i += 2
            elif c in '$`':
                got, j = self._dollar(text, i, quoted=True)
                if got is None:
                    buf.append(c)
                    i += 1
                    continue
                if buf:
                    out.append((''.join(buf), False, True))
                    buf = []
                if got == [('', False, 'at')]:
                    saw_at = True
                else:
                    out += got
                i = j
            else:
                buf.append(c)
                i += 1
        if buf:
            out.append((''.join(buf), False, True))
        out = [(unmark(p[0]), False, True) if p is not BREAK else BREAK for p in out]
        if not out and not saw_at:
            out.append(('', False, True))
        return out, i

    def _dollar(self, text: str, i: int, quoted: bool) -> tuple[list | None, int]:
        """The expansion at ``text[i]`` (``$...`` or a backquote) -> (parts, index after it); None if a lone $."""
        split = not quoted
        if text[i] == '`':
            j = i + 1
            buf = []
            while j < len(text) and text[j] != '`':
                if text[j] == '\\' and j + 1 < len(text) and text[j + 1] in '$`\\':
                    buf.append(text[j + 1])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            return self._subst(''.join(buf), text[i : j + 1], split), j + 1
        if text.startswith('$((', i):
            try:
                end = find_close(text, i + 3, '$((')
            except ValueError:
                end = -1
            if end >= 0 and text.startswith('))', end):
                written = text[i : end + 2]
                return self._arith(text[i + 3 : end], written, split), end + 2
        if text.startswith('$(', i):
            try:
                end = find_close(text, i + 2, '$(')
            except ValueError:
                return [(text[i:], False, True)], len(text)
            return self._subst(text[i + 2 : end], text[i : end + 1], split), end + 1
        if text.startswith('${', i):
            try:
                end = find_close(text, i + 2, '${')
            except ValueError:
                return [(text[i:], False, True)], len(text)
            written = text[i : end + 1]
            try:
                return self._braced(text[i + 2 : end], written, quoted), end + 1
            except NotKnown as e:
                self.ev.note_unresolved(e.names or [written])
                return [(written, False, True)], end + 1
        m = re.compile(r'\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!\-])').match(text, i)
        if not m:
            return None, i
        name = m.group(1)
        try:
            return self._param(name, None, quoted, split), m.end()
        except NotKnown as e:
            self.ev.note_unresolved(e.names or [m.group(0)])
            return [(m.group(0), False, True)], m.end()

    # -- parameters ---------------------------------------------------------------------------------------------
    def _lookup(self, name: str, index: str | None):
        """-> str | list[str] (an ``@``/``*`` subscript or $@) | None (unset). NotKnown if never set anywhere."""
        st = self.st
        if (name.isdigit() and name != '0') or name in ('@', '*', '#'):
            # what the positional parameters carry unresolved: $K its own (Evaluator._positional_taint), else all
            own = f'@{name}' if name.isdigit() else '@'
            self.ev.note_unresolved(st.taint.get(own, st.taint.get('@', [])))
            if st.defaulted.get('@'):  # a function's arguments given from defaults (Evaluator.call)
                self.ev.note_defaults(st.defaulted['@'])
        if name.isdigit():
            k = int(name)
            if k == 0:
                return st.arg0
            if k <= len(st.positional):
                return st.positional[k - 1]
            if st.args_unknown and not st.frames:
                raise NotKnown([])  # `MODEL=$1` of the script: what the user passes is not known here
            return None
        if name in ('@', '*'):
            return list(st.positional)
        if name == '#':
            if st.args_unknown and not st.frames:
                raise NotKnown(['$#'])  # how many arguments the user passes the script is not known here
            return str(len(st.positional))
        if name == '?':
            if st.status is None:
                raise NotKnown(['$?'])
            return str(st.status)
        name = st.resolve(name)  # a nameref reads the variable it names
        if name in _ALWAYS_SET and name != '?':
            raise NotKnown([f'${name}'])
        if name == 'LINENO':
            return str(self.ev.line)
        if name == 'BASH_SOURCE' and 'BASH_SOURCE' not in st.vars:
            arr = {k: v for k, v in enumerate(st.sources or [st.arg0])}
            return self._index(arr, index, name)
        taint = st.taint.get(name)
        if taint and self.ev.args_absent and all(SCRIPT_ARG.fullmatch(t) for t in taint):
            return ''  # set only from the script's arguments, read as run without them (Evaluator._without_arguments)
        if taint:
            self.ev.note_unresolved(taint)
        if st.defaulted.get(name):
            self.ev.note_defaults(st.defaulted[name])
        if name not in st.vars:
            if name in st.known_unset:
                return None
            raise NotKnown([])
        v = st.vars[name]
        if isinstance(v, dict):
            return self._index(v, index, name)
        if index is not None and index not in ('@', '*'):
            if name in st.assoc:
                return v if self.single(index) == '0' else None
            return v if self._subscript(index) == 0 else None
        if index in ('@', '*'):
            return [v]
        return v

    def _index(self, arr: dict, index: str | None, name: str):
        if name in self.st.assoc:  # `${M[$KEY]}`: the key is a word (bash(1), Arrays)
            if index is None:
                return arr.get('0')
            if index in ('@', '*'):
                return list(arr.values())
            return arr.get(self.single(index))
        if index is None:
            return arr.get(0)
        if index in ('@', '*'):
            return [arr[k] for k in sorted(arr)]
        k = self._subscript(index)
        if k < 0:
            k = (max(arr) + 1 + k) if arr else k
        return arr.get(k)

    def _subscript(self, index: str) -> int:
        return self.arith_value(index)

    def _param(self, name: str, index: str | None, quoted: bool, split: bool) -> list:
        v = self._lookup(name, index)
        whole = index in ('@', '*') or name in ('@', '*')
        star = index == '*' or name == '*'
        held = self.st.taint.get(f'@{name}', self.st.taint.get('@')) if name.isdigit() else self.st.taint.get(name)
        if split and isinstance(v, str) and held:
            return self._split_known(v, held)
        return self._value_parts(v, quoted, split, whole, star)

    @staticmethod
    def _split_known(v: str, held: list[str]) -> list:
        """An unquoted value holding text that was not resolved (``A=$(scontrol show hostnames ...)``,
        ``SRUN_ARGS="--nodes=2 --nodelist=$(...)"``): what bash would split inside the unresolved text is the command's
        output, not the text as written, so each unresolved text as written stays within one word; the known text
        around it splits at white space as bash splits it. When an unresolved text with white space is not in the
        value as written, the value stays one word."""
        spans = sorted({t for t in held if t and any(c in t for c in ' \t\n')}, key=len, reverse=True)
        if any(t not in v for t in spans):
            return [(v, False, False)]
        marks = {}
        for k, t in enumerate(spans):
            mark = f'\ue010{k}\ue011'
            marks[mark] = t
            v = v.replace(t, mark)
        out: list = []
        for piece in re.split(r'([ \t\n]+)', v):
            if not piece:
                continue
            if piece[0] in ' \t\n':
                out.append(BREAK)
                continue
            for mark, t in marks.items():
                piece = piece.replace(mark, t)
            out.append((piece, False, False))
        return out

    def _value_parts(self, v, quoted: bool, split: bool, whole: bool = False, star: bool = False) -> list:
        if v is None:
            return []
        if isinstance(v, list):
            if quoted and star:
                return [(self._ifs()[:1].join(v), False, True)]
            if not v:
                return [('', False, 'at')] if quoted else []
            out: list = []
            for k, item in enumerate(v):
                if k:
                    out.append(BREAK if (quoted or split) else (' ', False, quoted))
                out.append((item, split, quoted))
            return out
        return [(v, split, quoted)]

    def _ifs(self) -> str:
        v = self.st.scalar('IFS')
        return ' \t\n' if v is None else v

    def _braced(self, body: str, written: str, quoted: bool) -> list:
        split = not quoted
        if body.startswith('#') and len(body) > 1 and body[1] not in '-=+?':  # ${#V} ${#A[@]}
            name, index, rest = self._name_index(body[1:])
            if rest:
                raise NotKnown([written])
            v = self._lookup(name, index)
            if v is None:
                self._unset_plain(name, written)
                return [('0', split, quoted)]
            return [(str(len(v)), split, quoted)]
        if body.startswith('!') and len(body) > 1:
            name, index, rest = self._name_index(body[1:])
            if index in ('@', '*') and not rest:  # ${!A[@]}: the indices
                arr = self.st.get(name)
                keys = [str(k) for k in sorted(arr)] if isinstance(arr, dict) else (['0'] if arr is not None else [])
                return self._value_parts(keys, quoted, split, True, index == '*')
            if index is None and not rest:
                target = self._lookup(name, None)
                if not isinstance(target, str) or not target:
                    raise NotKnown([written])
                tname, tindex, trest = self._name_index(target)
                if trest:
                    raise NotKnown([written])
                return self._param(tname, tindex, quoted, split)
            raise NotKnown([written])
        name, index, rest = self._name_index(body)
        if not name:
            raise NotKnown([written])
        op = next((o for o in _OPS if rest.startswith(o)), None) if rest else None
        if rest and op is None:
            raise NotKnown([written])
        arg = rest[len(op) :] if op else ''
        if op in (':-', '-', ':=', '=', ':+', '+', ':?', '?'):
            try:
                v = self._lookup(name, index)
            except NotKnown:
                if name in _ALWAYS_SET or name in self.st.vars:
                    raise
                v = None  # set nowhere (or a script argument not given): as bash, the default applies
                if name.isdigit():
                    # a script argument not known here: a default that is text is the value (and a test of it is
                    # not decided, State.defaulted); an empty one (`${1:-}`) stands for what the user passes
                    if op.lstrip(':') in ('-', '=') and not join(self._word(arg, True)):
                        raise NotKnown([f'${name}']) from None
                    self.ev.note_defaults([f'${name}'])
                elif name not in self.st.known_unset:
                    # a variable set nowhere here (the user's environment gives it): the default is the value, and
                    # a test of it does not lead away from the launch (Evaluator._leaves)
                    self.ev.note_defaults([f'${name}'])
                    if op.lstrip(':') in ('-', '=') and not join(self._word(arg, True)):
                        self.ev.empty_defaults.append(f'${name}')  # `${DATASETS:-}`: empty unless the user sets it
            if isinstance(v, list):
                is_null = (not v) or (len(v) == 1 and v[0] == '')
                is_unset = not v
            else:
                is_unset = v is None
                is_null = is_unset or v == ''
            use = is_null if op.startswith(':') else is_unset
            kind = op.lstrip(':')
            if kind == '+':
                return [] if use else self._word(arg, quoted)
            if not use:
                if split and isinstance(v, str) and self.st.taint.get(name):
                    return self._split_known(v, self.st.taint[name])  # unresolved text within one word (_param)
                return self._value_parts(v, quoted, split, isinstance(v, list), index == '*')
            if kind == '?':
                raise NotKnown([written])
            word = self._word(arg, quoted)
            if kind == '=':
                if name.isdigit() or name in '@*#?$!-':
                    raise NotKnown([written])
                value = join(self._word(arg, True))
                self.ev.assign(name, value, index=self._subscript(index) if index not in (None, '@', '*') else None)
            return word
        v = self._lookup(name, index)
        if v is None:
            if name.isdigit() or name in self.st.known_unset or name in ('@', '*'):
                return []
            self._unset_plain(name, written)
            return []
        if not op:
            if split and isinstance(v, str) and self.st.taint.get(name):
                return self._split_known(v, self.st.taint[name])  # unresolved text within one word (_param)
            return self._value_parts(v, quoted, split, isinstance(v, list), index == '*')
        items = v if isinstance(v, list) else [v]
        if op != ':' and sum(len(s) for s in items) > _PATTERN_MAX:
            raise NotKnown([written])  # a pattern over a very long value: not followed (bounded work)
        if op == ':':
            return self._substring(v, arg, quoted, split, index == '*' or name == '*', written)
        if op in ('#', '##', '%', '%%'):
            rx = self.pattern(arg)
            items = [strip(s, rx, op) for s in items]
        elif op in ('/', '//', '/#', '/%'):
            pat, _, rep = split_replacement(arg)
            rx = self.pattern(pat)
            repl = join(self._word(rep, True)) if rep else ''
            items = [replace(s, rx, repl, op) for s in items]
        elif op in ('^^', '^', ',,', ','):
            f = {
                '^^': str.upper,
                ',,': str.lower,
                '^': lambda s: s[:1].upper() + s[1:],
                ',': lambda s: s[:1].lower() + s[1:],
            }[op]
            items = [f(s) for s in items]
        return self._value_parts(
            items if isinstance(v, list) else items[0], quoted, split, isinstance(v, list), index == '*' or name == '*'
        )

    def _unset_plain(self, name: str, written: str):
        """A variable that is not set: '' where the script unset it, else not known."""
        if name not in self.st.known_unset:
            raise NotKnown([])

    def _substring(self, v, arg: str, quoted: bool, split: bool, star: bool, written: str) -> list:
        off_s, sep, len_s = arg.partition(':')
        off = self.arith_value(self.single(off_s)) if off_s.strip() else 0
        length = self.arith_value(self.single(len_s)) if sep else None
        if isinstance(v, list):
            seq = v
            if written.startswith('${@') or written.startswith('${*'):
                seq = [self.st.arg0] + v  # ${@:0} includes $0
            start = off if off >= 0 else len(seq) + off
            if start < 0:
                return []
            end = len(seq) if length is None else start + length
            if length is not None and length < 0:
                raise NotKnown([written])
            return self._value_parts(seq[start:end], quoted, split, True, star)
        s = v
        start = off if off >= 0 else len(s) + off
        if start < 0 or start > len(s):
            return [('', split, quoted)]
        if length is None:
            out = s[start:]
        elif length >= 0:
            out = s[start : start + length]
        else:
            end = len(s) + length
            if end < start:
                raise NotKnown([written])  # bash: substring expression < 0
            out = s[start:end]
        return [(out, split, quoted)]

    def _word(self, arg: str, quoted: bool) -> list:
        """The word of ``${V:-word}``: unquoted, its literal text splits too; inside "...", nothing splits (quotes
        in the word still group)."""
        if quoted:
            return [(p[0], False, True) if p is not BREAK else BREAK for p in self.parts(arg, nosplit=True)]
        return self.parts(arg, lit_split=True, tilde=True)

    def _name_index(self, body: str) -> tuple[str, str | None, str]:
        m = _PARAM.match(body)
        if not m:
            return '', None, body
        name, rest = m.group(1), body[m.end() :]
        index = None
        if rest.startswith('[') and _NAME.fullmatch(name):
            depth, j = 0, 0
            for j, ch in enumerate(rest):
                if ch == '[':
                    depth += 1
                elif ch == ']':
                    depth -= 1
                    if depth == 0:
                        break
            index = rest[1:j]
            if index not in ('@', '*'):
                index = self.single(index)
            rest = rest[j + 1 :]
        return name, index, rest

    # -- arithmetic and command substitution --------------------------------------------------------------------
    def arith_value(self, text: str) -> int:
        """An arithmetic expression (``$`` expansions in it done first) -> int; NotKnown if it cannot be known."""
        before = len(self.ev.unresolved)
        expanded = self.single(text) if ('$' in text or '`' in text) else text
        if len(self.ev.unresolved) > before:
            raise NotKnown(self.ev.unresolved[before:])
        st = self.st
        names: list[str] = []

        def get(name: str) -> str | None:
            name = st.resolve(name)
            if st.taint.get(name):
                names.extend(st.taint[name])
                raise Unresolved(name)
            if name not in st.vars:
                if name in st.known_unset:
                    return None
                names.append(f'${name}')
                raise Unresolved(name)
            return st.scalar(name)

        def put(name: str, value: int) -> None:
            self.ev.assign(name, str(value))

        try:
            return Arith(get, put).evaluate(expanded)
        except Unresolved:
            raise NotKnown(names) from None
        except (ArithError, ValueError, RecursionError) as e:
            raise NotKnown([f'$(({text}))' + f' ({e})']) from None

    def _arith(self, inner: str, written: str, split: bool) -> list:
        before = len(self.ev.unresolved)
        try:
            v = self.arith_value(inner)
        except NotKnown as e:
            del self.ev.unresolved[before:]
            self.ev.note_unresolved([written] if e.names else [written])
            return [(written, False, True)]
        if len(self.ev.unresolved) > before:
            return [(written, False, True)]
        return [(str(wrap(v)), split, not split)]

    def _subst(self, inner: str, written: str, split: bool) -> list:
        out = self.ev.substitute(inner)
        if out is None:
            self.ev.note_unresolved([written])
            return [(written, False, True)]
        return [(out.rstrip('\n'), split, not split)]


def split_replacement(arg: str) -> tuple[str, str, str]:
    """``pat/rep`` of ``${V/pat/rep}``: the first unescaped ``/`` outside quotes and nested expansions."""
    i, quote = 0, None
    while i < len(arg):
        c = arg[i]
        if quote:
            if c == quote:
                quote = None
        elif c == '\\':
            i += 2
            continue
        elif c in '\'"':
            quote = c
        elif arg.startswith('${', i):
            i = find_close(arg, i + 2, '${') + 1
            continue
        elif c == '/':
            return arg[:i], '/', arg[i + 1 :]
        i += 1
    return arg, '', ''


def strip(s: str, rx: str, op: str) -> str:
    """``${V#p}`` (shortest prefix), ``##`` (longest), ``%`` (shortest suffix), ``%%`` (longest)."""
    if op.startswith('#'):
        rng = range(len(s) + 1) if op == '#' else range(len(s), -1, -1)
        for k in rng:
            if re.fullmatch(rx, s[:k], re.S):
                return s[k:]
        return s
    rng = range(len(s), -1, -1) if op == '%' else range(len(s) + 1)
    for k in rng:
        if re.fullmatch(rx, s[k:], re.S):
            return s[:k]
    return s


def replace(s: str, rx: str, rep: str, op: str) -> str:
    """``${V/p/r}`` (first, longest match), ``//`` (all), ``/#`` (at the start), ``/%`` (at the end)."""
    if rx == '':
        return s if op in ('/', '//') else (rep + s if op == '/#' else s + rep)
    if op == '/#':
        for k in range(len(s), -1, -1):
            if re.fullmatch(rx, s[:k], re.S):
                return rep + s[k:]
        return s
    if op == '/%':
        for k in range(len(s) + 1):
            if re.fullmatch(rx, s[k:], re.S):
                return s[:k] + rep
        return s
    out, i, done = [], 0, False
    while i <= len(s):
        if not done:
            for k in range(len(s), i, -1):
                if re.fullmatch(rx, s[i:k], re.S):
                    out.append(rep)
                    i = k
                    done = op == '/'
                    break
            else:
                if i < len(s):
                    out.append(s[i])
                i += 1
            continue
        out.append(s[i:])
        break
    return ''.join(out)


def ansi_c(text: str, i: int) -> tuple[str, int]:
    """``$'...'`` from after its quote -> (value, index after the closing quote)."""
    out = []
    while i < len(text):
        c = text[i]
        if c == "'":
            return ''.join(out), i + 1
        if c == '\\' and i + 1 < len(text):
            d = text[i + 1]
            if d in _ANSI:
                out.append(_ANSI[d])
                i += 2
            elif d == 'x':
                m = re.compile(r'[0-9A-Fa-f]{1,2}').match(text, i + 2)
                out.append(chr(int(m.group(0), 16)) if m else '\\x')
                i = m.end() if m else i + 2
            elif d in '01234567':
                m = re.compile(r'[0-7]{1,3}').match(text, i + 1)
                out.append(chr(int(m.group(0), 8) & 0xFF))
                i = m.end()
            else:
                out.append('\\' + d)
                i += 2
            continue
        out.append(c)
        i += 1
    return ''.join(out), i


def assemble(parts: list) -> list[str]:
    """Parts -> fields: splittable text splits at IFS white space; quoted text (even empty) makes a field."""
    return [field for field, _ in assemble_patterns(parts)]


_GLOB = re.compile(r'[*?\[]')


def assemble_patterns(parts: list) -> list[tuple[str, str | None]]:
    """``assemble``, each field with its pathname pattern: its unquoted text as it is (``*``, ``?`` and ``[`` active),
    its quoted text escaped; None when no unquoted text holds a pattern character."""
    out: list[tuple[str, str | None]] = []
    cur, pat, has, active = [], [], False, False

    def end():
        out.append((''.join(cur), ''.join(pat) if active else None))

    for p in parts:
        if p is BREAK:
            if cur or has:
                end()
            cur, pat, has, active = [], [], False, False
            continue
        text, split, quoted = p
        if quoted == 'at':
            continue
        if split:
            for piece in re.split(r'([ \t\n]+)', text):
                if not piece:
                    continue
                if piece[0] in ' \t\n':
                    if cur or has:
                        end()
                    cur, pat, has, active = [], [], False, False
                else:
                    cur.append(piece)
                    pat.append(piece)
                    active = active or bool(_GLOB.search(piece))
        else:
            cur.append(text)
            if quoted:
                pat.append(glob.escape(text))
            else:
                pat.append(text)
                active = active or bool(_GLOB.search(text))
            has = has or bool(quoted) or bool(text)
    if cur or has:
        end()
    return out


def join(parts: list) -> str:
    return ''.join(' ' if p is BREAK else p[0] for p in parts if p is BREAK or p[2] != 'at')
