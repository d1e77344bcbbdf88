"""Commented commands (ms-swift's examples show ``# swift rollout ...`` in their header): a comment block that
starts its lines is read as code, continuations joined, in a copy of the state (it assigns nothing and runs nothing:
no ``source``, no command substitution), its commands marked ``commented``. ``Command.above`` is the comment lines
right above a command. A mixin of :class:`.evaluator.Evaluator`."""

from __future__ import annotations

import re

from ...errors import GuardError
from .control import Break, Exit
from .expand import NotKnown
from .syntax import Src


class Comments:
    def comment(self, node, src: Src) -> None:
        line_start = src.data.rfind(b'\n', 0, node.start_byte) + 1
        if src.data[line_start : node.start_byte].strip():
            return  # `cmd  # note`: not a commented command
        body = src.text(node.start_byte, node.end_byte).lstrip('#').strip()
        line = src.line_of(node)
        pend = self._pending_comment
        if pend is not None and pend[0].endswith('\\'):
            self._pending_comment = (pend[0][:-1] + ' ' + body, pend[1], src)
        else:
            self._flush_comment()
            self._pending_comment = (body, line, src)
        if not self._pending_comment[0].endswith('\\'):
            self._flush_comment()

    def _flush_comment(self) -> None:
        pend, self._pending_comment = self._pending_comment, None
        if pend is None or self.commented or self.captures:
            return
        text, line, src = pend
        if text.endswith('\\'):
            text = text[:-1]
        if not text.strip() or not re.match(r'[A-Za-z_./$"\']', text):
            return
        saved_state, saved_unres, saved_line, saved_src = self.state, self.unresolved, self.line, self.src
        saved_assume, saved_loops = self.assume_stack, self.loop_stack
        self.state = saved_state.copy()
        self.commented = True
        self.comment_above = _above(src, line) if src.line is None else ''
        n = len(self.commands)
        try:
            self.run_text(text, src.name, line=line if src.line is None else src.line)
        except (GuardError, Exit, Break, NotKnown, RecursionError):
            del self.commands[n:]
        finally:
            self.state, self.unresolved, self.line, self.src = saved_state, saved_unres, saved_line, saved_src
            self.assume_stack, self.loop_stack = saved_assume, saved_loops
            self.commented = False
            self.comment_above = ''


def _comment_lines(root, src: Src) -> dict[int, str]:
    out: dict[int, str] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == 'comment':
            start = src.data.rfind(b'\n', 0, n.start_byte) + 1
            if not src.data[start : n.start_byte].strip():
                out[n.start_point[0] + src.first_line] = src.text(n.start_byte, n.end_byte).lstrip('#').strip()
            continue
        stack.extend(n.children)
    return out


def _above(src: Src | None, line: int) -> str:
    if src is None or src.line is not None:
        return ''
    comments = getattr(src, 'comments', {})
    lines = []
    k = line - 1
    while k in comments:
        lines.insert(0, comments[k])
        k -= 1
    return '\n'.join(lines)
