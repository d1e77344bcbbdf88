"""The script's grammar: tree-sitter-bash (MIT, github.com/tree-sitter/tree-sitter-bash) parses the text into a
syntax tree; :mod:`.evaluator` walks it. Two things bash does differently from a plain parse are prepared here:

- CRLF: bash splits lines at LF only, so a CR is an ordinary character of the line's last word, and a ``\\`` before
  it quotes the CR instead of continuing the line (see :mod:`..crlf`). tree-sitter reads CR as white space, so each
  CR is handed to it as :data:`CR_MARK` (a private-use character, a word character to the grammar) and turned back
  into a CR when the word is expanded.
- ``<DATA_PATH>``: an example's placeholder. bash reads it as two redirections; the guard keeps it as the word it
  stands for (quoted here, outside quotes and comments), so it can say that it is a placeholder to fill in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from ...errors import GuardError

CR_MARK = '\ue000'
# `\"` inside a double-quoted word, handed to the grammar as `\` + DQ_MARK when the text does not parse otherwise:
# tree-sitter-bash loses its place on `"${V:-... En=\"...\"); (...)}"` (a prompt default), which bash reads
# (`bash -n`); the expander reads `\` + DQ_MARK as the escaped quote it stands for (:func:`unmark`)
DQ_MARK = '\ue001'


def unmark(s: str) -> str:
    """A word's text as bash has it: the marks this module hands the grammar turned back."""
    return s.replace(CR_MARK, '\r').replace(DQ_MARK, '"') if ('\ue000' in s or '\ue001' in s) else s


_LANGUAGE = Language(tree_sitter_bash.language())
_PLACEHOLDER = re.compile(r'<([A-Za-z_][A-Za-z0-9_\-]*)>(?=[\s;|&)]|$)')


@dataclass
class Src:
    """One text the evaluator walks: the script, a sourced file, a ``bash -c`` string, an ``eval``, a comment."""

    data: bytes
    name: str
    line: int | None = None
    """Every command of this text is reported at this line of the script (``bash -c``, ``source``, a comment)."""
    first_line: int = 1
    """Line number of the text's first line (a comment block read as code)."""
    comments: dict = field(default_factory=dict)
    """line -> text of a comment that starts its line (what :attr:`Command.above` is made of)."""

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode('utf-8', 'replace')

    def line_of(self, node: Node) -> int:
        return self.line if self.line is not None else node.start_point[0] + self.first_line


def mark_placeholders(text: str) -> str:
    """``--dataset <DATA_PATH>`` -> ``--dataset '<DATA_PATH>'`` (outside quotes only)."""
    if '<' not in text:
        return text
    out, i, n, quote = [], 0, len(text), None
    while i < n:
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == '\\':
                out.append(text[i : i + 2])
                i += 2
                continue
            if c == '"':
                quote = None
        elif c == '\\':
            out.append(text[i : i + 2])
            i += 2
            continue
        elif c in '\'"':
            quote = c
        elif c == '<' and (i == 0 or text[i - 1] in ' \t\n=') and (m := _PLACEHOLDER.match(text, i)):
            out.append(f"'{m.group(0)}'")
            i = m.end()
            continue
        out.append(c)
        i += 1
    return ''.join(out)


def mark_escaped_quotes(text: str) -> str:
    """Each ``\\"`` inside double quotes (not in single quotes or comments) -> ``\\`` + :data:`DQ_MARK`."""
    out, i, n, quote = [], 0, len(text), None
    while i < n:
        c = text[i]
        if quote == "'":
            quote = None if c == "'" else quote
        elif c == '\\':
            nxt = text[i + 1 : i + 2]
            out.append('\\' + (DQ_MARK if quote == '"' and nxt == '"' else nxt))
            i += 2
            continue
        elif quote == '"':
            quote = None if c == '"' else quote
        elif c == '#' and (i == 0 or text[i - 1] in ' \t\n;'):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
            continue
        elif c in '\'"':
            quote = c
        out.append(c)
        i += 1
    return ''.join(out)


# A backtick substitution holding only a comment, a "comment" inside a continued command (`# step 2` \): bash
# expands it to nothing; tree-sitter-bash cannot parse it
_BACKTICK_COMMENT = re.compile(r'`#[^`\n]*`')
_ARITH_SAFE = re.compile(r'[\w\s$+\-*/%()<>=!&|^~?:,]*')


def drop_backtick_comments(text: str) -> str:
    """Each `` `# ...` `` (its expansion is empty) removed."""
    return _BACKTICK_COMMENT.sub('', text)


def _inside_braces(text: str, end: int) -> bool:
    """Whether ``text[end]`` lies inside a ``${...}`` parameter expansion opened before it (on its line)."""
    start = text.rfind('\n', 0, end) + 1
    depth = 0
    for m in re.finditer(r'\$\{|\}', text[start:end]):
        depth = depth + 1 if m.group() == '${' else max(0, depth - 1)
    return depth > 0


def compact_arithmetic(text: str) -> str:
    """The blanks inside each ``$(( ... ))`` of arithmetic only (names, numbers, operators, parentheses) removed:
    bash ignores them, and tree-sitter-bash loses its place on ``${N:-$(( A * B / (C * D) ))}``. Inside a ``${...}``
    an expansion with parentheses is also double-quoted (``${Q:-"$(((N+1)*P))"}``), which the grammar reads: its
    value is one integer, so the quotes change no field bash makes of it."""
    out, i = [], 0
    while True:
        j = text.find('$((', i)
        if j < 0:
            out.append(text[i:])
            return ''.join(out)
        depth, k = 2, j + 3
        while k < len(text) and depth:
            depth += {'(': 1, ')': -1}.get(text[k], 0)
            k += 1
        inner = text[j + 3 : k - 2]
        if depth == 0 and text[k - 2 : k] == '))' and _ARITH_SAFE.fullmatch(inner) and '\n' not in inner:
            arith = '$((' + re.sub(r'[ \t]+', '', inner) + '))'
            if '(' in inner and text[j - 1 : j] != '"' and _inside_braces(text, j):
                arith = f'"{arith}"'
            out.append(text[i:j] + arith)
        else:
            out.append(text[i : j + 3])
            k = j + 3
        i = k


def parse(text: str, name: str, line: int | None = None, first_line: int = 1) -> tuple[Node, Src]:
    """Text -> (root node, Src). A syntax error raises GuardError naming the line (as bash refuses to run it)."""
    text = text.replace('\r', CR_MARK)
    tail = text.rstrip(' \t\n')
    if (len(tail) == len(text) or text[len(tail)] == '\n') and (len(tail) - len(tail.rstrip('\\'))) % 2:
        # a `\` continuing into the end of the text (also with no newline after it): bash ends the command there
        text = tail[:-1] + '\n'
    src = Src(mark_placeholders(text).encode('utf-8'), name, line, first_line)
    tree = Parser(_LANGUAGE).parse(src.data)
    root = tree.root_node
    if root.has_error:  # forms bash reads and the grammar does not: the same text with each made plain
        for prepare in (mark_escaped_quotes, drop_backtick_comments, compact_arithmetic):
            text = prepare(text)
            marked = Src(mark_placeholders(text).encode('utf-8'), name, line, first_line)
            again = Parser(_LANGUAGE).parse(marked.data).root_node
            if not again.has_error:
                return again, marked
    if root.has_error:
        bad = _first_error(root)
        where = src.line_of(bad) if bad is not None else (line or first_line)
        raise GuardError(
            f'{name}:{where}: cannot read this line as bash (a quote, bracket or `fi`/`done` left open?); '
            f'fix the script, or paste the command after --'
        )
    return root, src


def _first_error(node: Node) -> Node | None:
    if node.is_error or node.is_missing:
        return node
    for c in node.children:
        if c.has_error or c.is_error or c.is_missing:
            found = _first_error(c)
            if found is not None:
                return found
    return None


def raw(src: Src, group) -> str:
    """The source text of a word (nodes that touch, see evaluator._groups)."""
    return src.text(group[0].start_byte, group[-1].end_byte)
