"""The walk: a tree-sitter-bash tree evaluated as bash would run it, with nothing run. External commands are
recorded as :class:`Command` values (their exit status taken as success where a list needs one); builtins that
change the shell's state (assignments, ``export``, ``local``, ``declare``, ``readonly``, ``unset``, ``cd``,
``source``, ``eval``, ``set --``, ``shift``) are carried out on :class:`State`; functions are called with their
positional parameters; ``if``/``elif``/``case``/``while`` decide from known values, else take the first branch (or
run the body once) and record it in :attr:`Command.assumed`; ``for`` runs its body once per value (a sweep gives
one command per value, each with :attr:`Command.loops`); ``bash -c``/``sh -c`` strings are read with a child
shell that sees the exported variables only; ``$(...)`` runs the pure commands of :mod:`.pure` (anything else
makes the substitution unresolved).

Every walk is bounded (:class:`Limits`): evaluated nodes, loop iterations, call and source depth, word length and
about five seconds of work. Past any bound: GuardError naming the script and line.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

from ...errors import GuardError
from . import braces, conditions, pure
from .builtins import Builtins
from .command import Command
from .comments import Comments, _above, _comment_lines
from .control import Break as _Break
from .control import Capture as _Capture
from .control import Continue as _Continue
from .control import Exit as _Exit
from .control import Return as _Return
from .expand import SCRIPT_ARG, Expander, NotKnown, assemble, glob_regex, join
from .state import State
from .syntax import Src, parse
from .syntax import raw as _raw
from .wrappers import SHELLS, container_exec, shell_c, strip_wrapper

_ASSIGN = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)', re.S)
_ENV_ASSIGN = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.S)
_PLACEHOLDER = re.compile(r'<[A-Za-z_][A-Za-z0-9_\-]*>')
REDIRECTS = {'file_redirect', 'heredoc_redirect', 'herestring_redirect'}
_JOB_NODELIST = r'\$\{?SLURM_(JOB_)?NODELIST\}?'
DECLARE = {'export', 'local', 'declare', 'typeset', 'readonly'}
QUIET = DECLARE | {
    'unset',
    'cd',
    'pushd',
    'popd',
    'source',
    '.',
    'eval',
    'exit',
    'return',
    'break',
    'continue',
    'set',
    'shift',
    'let',
    'true',
    'false',
    ':',
    'test',
    '[',
    'shopt',
    'trap',
    'wait',
    'umask',
    'ulimit',
    'alias',
    'unalias',
    'read',
    'hash',
    'type',
    'builtin',
    'getopts',
    'dirs',
    'disown',
    'mapfile',
    'readarray',
    'enable',
    'jobs',
    'kill',
    'sleep',
}
"""Builtins (and sleep) that the reader carries out or skips rather than report as commands."""
_OPERANDS = {
    'word',
    'string',
    'raw_string',
    'concatenation',
    'simple_expansion',
    'expansion',
    'number',
    'command_substitution',
    'arithmetic_expansion',
    'ansi_c_string',
    'translated_string',
    'extglob_pattern',
    'regex',
    'process_substitution',
    'brace_expression',
}


@dataclass
class Limits:
    steps: int = 200_000
    """Syntax nodes and words evaluated, all together."""
    loop: int = 1_000
    """Iterations of one loop."""
    depth: int = 64
    """Nested function calls, command substitutions and child shells."""
    source_depth: int = 8
    word: int = 100_000
    """Characters of one word or value."""
    commands: int = 10_000
    seconds: float = 5.0


# How deep a function that calls itself on values not known here is followed (Evaluator.call).
RECURSION = 3


class Evaluator(Builtins, Comments):
    def __init__(
        self, environ, source: str, cwd: str | None, limits: Limits | None = None, machine: pure.Machine | None = None
    ):
        self.limits = limits or Limits()
        self.machine = machine
        self.prefer = None  # argv -> bool: the commands an undecided `case` should lead to (evaluate_script)
        self.sidecar = None  # argv -> bool: what another role of the script runs beside them (a rollout server)
        self.args_absent = False  # a test read as the script runs without arguments (_without_arguments)
        self.background = 0  # inside a statement run with `&` (Command.background)
        self.test_read: list[str] = []  # what the last tests read that was not known (if_, _test)
        self.launcher = None  # argv -> (env, argv) | None: a job launcher that runs a command (srun; evaluate_script)
        self.calls: dict[str, int] = {}  # function name -> how many of its calls are running (recursion)
        self.by_absent = False  # the last test was decided from a file missing here (while_)
        self.source = source
        env = {k: v for k, v in (environ or {}).items() if isinstance(v, str)}
        self.state = State(vars=dict(env), exported=set(env), arg0=source, cwd=cwd, sources=[source])
        if cwd is not None:
            self.state.vars['PWD'] = cwd
        self.exp = Expander(self)
        self.commands: list[Command] = []
        self.unresolved: list[str] = []
        self.defaults: list[str] = []
        """Script arguments (``$2``) and variables set nowhere here whose default an expansion used."""
        self.empty_defaults: list[str] = []
        """Of those variables, the ones whose default is empty (``${DATASETS:-}``), since the script started."""
        self.written: dict[str, str] = {}
        """Files the script wrote from here-documents (Command.files)."""
        self.stdin_taint: list[str] = []
        """What the command's here-string holds unresolved (``read ... <<< "$3"``: the variables read carry it)."""
        self.stdin_defaults: list[str] = []
        """... and the defaults it took (State.defaulted)."""
        self.by_default = False
        """The last test was decided from such a default, or from a file missing here: the user may pass the
        argument, the launch's machine may have the file, so a branch it leads to that ends the script with an error
        (a usage check, a "venv not found") is assumed not taken."""
        self.line = 0
        self.steps = 0
        self.started = time.monotonic()
        self.depth = 0
        self.source_depth = 0
        self.captures: list[_Capture] = []
        self.assume_stack: list[str] = []
        self.loop_stack: list[str] = []
        self.commented = False
        self.comment_above = ''
        self.src: Src | None = None
        self._pending_comment: tuple[str, int, Src] | None = None
        self.notes: list[str] = []
        self.pipe_stdin: str | None = None
        self.trailing_words: list[str] = []
        """Words of the command being read that tree-sitter-bash left out of its node (see :meth:`redirected`)."""
        """Inside ``$(a | b)``: what the command before wrote, for the next one to read."""

    # -- bounds -------------------------------------------------------------------------------------------------
    def too_long(self, what: str) -> GuardError:
        return GuardError(f'{self.source}:{self.line}: could not be read within {what}; paste the command after --')

    def tick(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.limits.steps:
            raise self.too_long(f'{self.limits.steps} steps')
        if self.steps % 256 == 0 and time.monotonic() - self.started > self.limits.seconds:
            raise self.too_long(f'{self.limits.seconds:g} s of work')

    def note_unresolved(self, names: list[str]) -> None:
        for n in names:
            if n not in self.unresolved:
                self.unresolved.append(n)

    def note_defaults(self, names: list[str]) -> None:
        self.defaults += names  # every read counts: a test measures what its own expansion read

    # -- entry --------------------------------------------------------------------------------------------------
    def run_text(self, text: str, name: str, line: int | None = None, first_line: int = 1) -> int | None:
        root, src = parse(text, name, line, first_line)
        src.comments = _comment_lines(root, src)
        old = self.src
        self.src = src
        try:
            status = self.seq(root.children, src)
            self._flush_comment()
            return status
        finally:
            self.src = old

    def seq(self, children, src: Src) -> int | None:
        status: int | None = 0
        kids = list(children)
        for k, node in enumerate(kids):
            t = node.type
            if t == 'comment':
                self.comment(node, src)
                continue
            if not node.is_named or t in ('heredoc_body', 'heredoc_start', 'heredoc_end'):
                continue
            self._flush_comment()
            background = k + 1 < len(kids) and kids[k + 1].type == '&'
            if background:
                saved = self.state
                self.state = saved.copy()
                self.background += 1
                try:
                    self.stmt(node, src)
                except _Exit:
                    pass
                finally:
                    self.state = saved
                    self.background -= 1
                status = 0
            else:
                status = self.stmt(node, src)
            self.state.status = status
        return status

    # -- statements ---------------------------------------------------------------------------------------------
    def stmt(self, node, src: Src) -> int | None:
        self.tick()
        t = node.type
        self.line = src.line_of(node)
        if t in ('command', 'declaration_command', 'unset_command', 'variable_assignment', 'variable_assignments'):
            return self.simple(node, src)
        if t == 'redirected_statement':
            return self.redirected(node, src)
        if t == 'list':
            return self.list_(node, src)
        if t == 'pipeline':
            return self.pipeline(node, src)
        if t == 'negated_command':
            inner = [c for c in node.named_children if c.type != 'comment']
            st = self.stmt(inner[0], src) if inner else 0
            return None if st is None else int(st == 0)
        if t == 'subshell':
            return self.subshell(lambda: self.seq(node.children, src))
        if t == 'compound_statement':
            if node.children and node.children[0].type == '((':
                return self.arith_command(src.text(node.children[0].end_byte, node.children[-1].start_byte))
            return self.seq(node.children, src)
        if t == 'function_definition':
            name = node.child_by_field_name('name')
            body = node.child_by_field_name('body')
            if name is not None and body is not None and not self.commented:
                self.state.funcs[src.text(name.start_byte, name.end_byte)] = (body, src)
            return 0
        if t == 'if_statement':
            return self.if_(node, src)
        if t == 'case_statement':
            return self.case(node, src)
        if t == 'for_statement':
            return self.for_(node, src)
        if t == 'c_style_for_statement':
            return self.c_for(node, src)
        if t == 'while_statement':
            return self.while_(node, src)
        if t == 'test_command':
            return self.test(node, src)
        if t in ('do_group', 'program'):
            return self.seq(node.children, src)
        return 0

    def subshell(self, fn) -> int | None:
        saved = self.state
        self.state = saved.copy()
        self.depth += 1
        if self.depth > self.limits.depth:
            raise self.too_long(f'{self.limits.depth} nested shells')
        try:
            return fn()
        except _Exit as e:
            return e.status
        finally:
            self.depth -= 1
            self.state = saved

    def list_(self, node, src: Src) -> int | None:
        kids = [c for c in node.children if c.type != 'comment']
        self.by_default = False
        left = self.stmt(kids[0], src)
        for k in range(1, len(kids) - 1, 2):
            op, right = kids[k].type, kids[k + 1]
            defaulted, self.by_default = self.by_default, False
            # `[ -z "$1" ] && { echo usage; exit 1; }`: undecided, or decided from a default the user may replace
            runs = left is None or (defaulted and (left == 0) == (op == '&&'))
            leaves = self._leaves([right], src) if runs else None
            if leaves is not None:
                self._passes_check(src.line_of(right), leaves)
                left = 1 if op == '&&' else 0
            elif op == '&&':
                if left is None or left == 0:
                    r = self.stmt(right, src)
                    left = r if left == 0 else (r if r != 0 else None)
            elif op == '||':
                if left is not None and left != 0:
                    left = self.stmt(right, src)
        return left

    def pipeline(self, node, src: Src) -> int | None:
        parts = [c for c in node.named_children if c.type != 'comment']
        if len(parts) == 1:
            return self.stmt(parts[0], src)
        status = 0
        if not self.captures:
            for p in parts:
                status = self.subshell(lambda p=p: self.stmt(p, src))
            return status
        # inside $(...): each command's output is the next one's input (`echo $X | tr , '\\n' | wc -l`)
        outer = self.captures[-1]
        data = None
        for p in parts:
            cap = _Capture()
            self.captures.append(cap)
            self.pipe_stdin = data
            try:
                status = self.subshell(lambda p=p: self.stmt(p, src))
            finally:
                self.captures.pop()
                self.pipe_stdin = None
            outer.unknown = outer.unknown or cap.unknown
            data = ''.join(cap.out)
        outer.out.append(data or '')
        return status

    def redirected(self, node, src: Src) -> int | None:
        body = node.child_by_field_name('body')
        extra, stdin, after, out = [], None, [], None
        for r in node.children:
            if r.type == 'file_redirect':
                dests = [c for c in r.named_children if c.type != 'file_descriptor']
                extra += dests[1:]  # `cmd > log arg`: arg is the command's
                op = next((c.type for c in r.children if not c.is_named), '')
                if op in ('>', '>>', '>|') and dests and not any(c.type == 'file_descriptor' for c in r.children):
                    out = (op, dests[0])
            elif r.type == 'heredoc_redirect':
                stdin = self._heredoc(r, src)
                after += [
                    c for c in r.named_children if c.type in ('pipeline', 'command', 'list', 'redirected_statement')
                ]
            elif r.type == 'herestring_redirect':
                stdin = self._herestring(r, src)
        status = 0
        if out is not None and stdin is not None and body is not None and body.type == 'command':
            self._write_heredoc(body, out, stdin, src)  # `cat > cfg.yaml <<EOF`: the file's text is known
        if body is not None:
            if body.type == 'command':
                # tree-sitter-bash leaves out a lone `-` word just before `<<` (`python - <<'PY'`): bash passes it
                gap = [r for r in node.children if r.type == 'heredoc_redirect' and r.start_byte >= body.end_byte]
                if gap and src.text(body.end_byte, gap[0].start_byte).split() == ['-']:
                    self.trailing_words = ['-']
                status = self.simple(body, src, extra, stdin)
            else:
                status = self.stmt(body, src)
        for a in after:
            status = self.stmt(a, src)
        return status

    def _herestring(self, r, src: Src) -> str:
        """``cmd <<< WORD``: WORD expanded, and a newline. What it holds unresolved, and the defaults it took, go to
        ``stdin_taint``/``stdin_defaults``: the variables ``read`` sets from it carry them."""
        word = list(r.named_children)
        outer, self.unresolved, defaults = self.unresolved, [], len(self.defaults)
        text = (self.exp.single(src.text(word[0].start_byte, word[-1].end_byte)) + '\n') if word else ''
        self.stdin_taint, self.unresolved = self.unresolved, outer
        self.stdin_defaults = self.defaults[defaults:]
        return text

    def _write_heredoc(self, body, out, text: str, src: Src) -> None:
        """``cat > FILE <<EOF`` / ``cat >> FILE <<EOF``: record FILE's text (frontends/written.py)."""
        words = [c for c in body.children if c.type not in REDIRECTS and c.type != 'comment']
        if len(words) != 1 or src.text(words[0].start_byte, words[0].end_byte) != 'cat' or self.unresolved:
            return
        path = self.exp.single(_raw(src, [out[1]]))
        if self.unresolved or not path or self.state.cwd is None and not path.startswith('/'):
            self.unresolved = []  # a name not known here: the file is not recorded, and nothing else is marked
            return
        path = os.path.normpath(os.path.join(self.state.cwd or '/', path))
        self.written[path] = (self.written.get(path, '') if out[0] == '>>' else '') + text

    def _heredoc(self, r, src: Src) -> str | None:
        start = next((c for c in r.children if c.type == 'heredoc_start'), None)
        body = next((c for c in r.children if c.type == 'heredoc_body'), None)
        if body is None:
            return ''
        text = src.text(body.start_byte, body.end_byte)
        end = next((c for c in r.children if c.type == 'heredoc_end'), None)
        if end is not None and body.end_byte < end.start_byte:
            text = src.text(body.start_byte, end.start_byte)
        if any(c.type == '<<-' for c in r.children):
            text = '\n'.join(line.lstrip('\t') for line in text.split('\n'))
        quoted = start is not None and re.search(r'[\'"\\]', src.text(start.start_byte, start.end_byte))
        return text if quoted else self.exp.dquoted(text)

    # -- conditions and loops -----------------------------------------------------------------------------------
    def _assume(self, what: str) -> None:
        self.assume_stack.append(what)

    def _on_arguments_only(self, conds, src: Src) -> bool:
        """The condition reads the script's own arguments (``$#``, ``$1``, ``${1:-}``, ``$@``) and nothing else that
        could be unknown, at the script's top level with its arguments not given."""
        if not self.state.args_unknown or self.state.frames or not conds:
            return False
        text = src.text(conds[0].start_byte, conds[-1].end_byte)
        refs = re.findall(r'\$(?:\{[#!]?)?([A-Za-z_][A-Za-z0-9_]*|[0-9#@*?])', text)
        return bool(refs) and all(r in '#@*' or r.isdigit() for r in refs) and '$(' not in text and '`' not in text

    def _branch(self, stmts, src: Src, assumed: str | None) -> int | None:
        if assumed:
            self._assume(assumed)
        try:
            return self.seq(stmts, src)
        finally:
            if assumed:
                self.assume_stack.pop()

    def _probe(self, stmts, src: Src) -> tuple[int | None, bool]:
        """Run an undecided branch on a copy of the shell and forget it: (the status with which it ends the script,
        ``exit N`` with N > 0, else None; whether it runs a command the caller looks for, ``prefer``)."""
        status, wanted, _ = self._probe_all(stmts, src)
        return status, wanted

    def _probe_all(self, stmts, src: Src, keep=None) -> tuple[int | None, bool, str | None]:
        """``_probe``, and how the branch ends what runs it: ``exit N`` / ``return`` (None: it goes on). ``keep``:
        argv -> bool, the commands of the branch that are kept (the rest is forgotten)."""
        state, made, unresolved = self.state, len(self.commands), list(self.unresolved)
        assumed = list(self.assume_stack)
        printed = [(c, len(c.out), c.unknown) for c in self.captures]  # inside `$(...)`: what it prints is forgotten
        self.state = state.copy()
        status, ends = None, None
        try:
            self.seq(stmts, src)
        except _Return:
            ends = 'return'
        except _Exit as e:
            status = e.status if isinstance(e.status, int) and e.status > 0 else None
            ends = f'exit {e.status if e.status is not None else ""}'.strip()
        finally:
            wanted = self.prefer is not None and any(
                self.prefer(c.argv) for c in self.commands[made:] if not c.captured
            )
            kept = [c for c in self.commands[made:] if keep is not None and keep(c.argv)]
            self.state = state
            self.commands[made:] = kept
            self.unresolved, self.assume_stack = unresolved, assumed
            for cap, n, unknown in printed:
                del cap.out[n:]
                cap.unknown = unknown
        return status, wanted, ends

    def _leaves(self, stmts, src: Src) -> str | None:
        """How a branch decided from what the user gives (an argument or variable not known here, its default, a
        file missing here) leaves without the launch: ``exit N`` (a usage check), or ``return``/``exit 0`` before any
        training launch (``[ -z "$MODEL" ] && return 0``); None when it goes on or runs the launch. What the user
        runs is the launch past it, so such a branch is assumed not taken."""
        if not self._may_leave(stmts, src):
            return None  # no `exit`/`return` in it nor in a function it may call: it cannot leave (no probe)
        status, wanted, ends = self._probe_all(stmts, src)
        if status is not None:
            return f'exit {status}'
        return ends if ends and not wanted else None

    _LEAVES = re.compile(r'\b(exit|return)\b')

    def _may_leave(self, stmts, src: Src) -> bool:
        """Whether a branch's text, or a function defined so far, holds ``exit``/``return`` (or an ``eval``/``source``
        that could): the cheap test before probing a branch, so nested branches are not probed again and again."""
        text = '\n'.join(src.text(n.start_byte, n.end_byte) for n in stmts)
        if self._LEAVES.search(text) or re.search(r'\b(eval|source|\.)\s', text):
            return True
        return any(self._LEAVES.search(fsrc.text(b.start_byte, b.end_byte)) for b, fsrc in self.state.funcs.values())

    def _exits(self, stmts, src: Src) -> int | None:
        """The status with which an undecided branch would end the script (``exit N``, N > 0); None when it does not
        end it so. A script's own check of its arguments (``[ $# -lt 1 ] && { echo usage; exit 1; }``) is such a
        branch: what the user runs is the launch past it."""
        return self._probe(stmts, src)[0]

    def _passes_check(self, line: int, leaves) -> None:
        how = f'exit {leaves}' if isinstance(leaves, int) else leaves
        what = 'the function' if how == 'return' else 'the script'
        note = (
            f"line {line}: a check the reader cannot decide (the script's arguments, environment or files) ends "
            f'{what} with {how}; assumed it passes'
        )
        if note not in self.notes:
            self.notes.append(note)

    def if_(self, node, src: Src) -> int | None:
        clauses = []  # (condition nodes, body nodes, line)
        cond, body, mode = [], [], None
        for c in node.children:
            if c.type in ('if', 'elif'):
                mode = 'cond'
            elif c.type == 'then':
                mode = 'body'
            elif c.type == 'fi':
                pass
            elif c.type == 'elif_clause':
                sub_cond, sub_body, m = [], [], None
                for d in c.children:
                    if d.type == 'elif':
                        m = 'cond'
                    elif d.type == 'then':
                        m = 'body'
                    elif m == 'cond':
                        sub_cond.append(d)
                    elif m == 'body':
                        sub_body.append(d)
                clauses.append((sub_cond, sub_body, src.line_of(c)))
            elif c.type == 'else_clause':
                clauses.append((None, [d for d in c.children if d.type != 'else'], src.line_of(c)))
            elif mode == 'cond':
                cond.append(c)
            elif mode == 'body':
                body.append(c)
        clauses.insert(0, (cond, body, src.line_of(node)))
        for k, (conds, stmts, line) in enumerate(clauses):
            if conds is None:
                return self.seq(stmts, src)
            self.by_default = False
            self.test_read = []  # what the tests of the condition read that is not known here
            st = self.seq(conds, src)
            read = list(dict.fromkeys(self.test_read))
            if st is not None and self.by_default:
                # decided from a script argument's default: a usage exit is assumed not taken, and an `else` that
                # is one leaves this branch as the one run
                taken, other = (stmts, None) if st == 0 else (None, stmts)
                leaves = self._leaves(taken, src) if taken is not None else None
                if leaves is not None:
                    self._passes_check(line, leaves)
                    continue
                rest = clauses[k + 1] if k + 1 < len(clauses) else None
                if other is not None and rest is not None and rest[0] is None:
                    leaves = self._leaves(rest[1], src)
                    if leaves is not None and self._leaves(other, src) is None:
                        self._passes_check(rest[2], leaves)
                        return self.seq(other, src)
            if st is None:
                leaves = self._leaves(stmts, src)
                if leaves is not None:
                    self._passes_check(line, leaves)
                    continue
                if k == len(clauses) - 1 and self._on_arguments_only(conds, src) and not self._probe(stmts, src)[1]:
                    # `if [[ $# -ge 1 ]]; then MODEL_ID=$1; fi`, the script's arguments not given: the optional
                    # override is taken as not given, so the values set before it are planned (as getopts and
                    # ${1:-default} read them); a branch that runs the launch is still read
                    self._assume_note(
                        f"line {line}: a test of the script's own arguments, which are not given here: its branch is "
                        'taken as not run, so the values set before it are planned (grpo-guard check -- bash SCRIPT '
                        'ARGS reads it with them)'
                    )
                    return 0
                other = self._launching_clause(clauses, k, src)
                if other is not None:
                    # `if [ "$NODE_RANK" -eq "$ROLLOUT_NODE" ]; then swift rollout ...; else megatron rlhf ...; fi`:
                    # the branch with the training launch is read, as an undecided `case` reads its branch with it,
                    # and the server the branch before it starts is read as the script's other role
                    stmts, at = other
                    test = src.text(conds[0].start_byte, conds[-1].end_byte) if conds else ''
                    for _conds, body, at2 in clauses[k:]:
                        if at2 != at and not self._probe(body, src)[1]:
                            self._other_role(body, src, at2, test, line)
                    return self._branch(
                        stmts,
                        src,
                        f'assumed branch at line {at} (the condition at line {line} could not be decided from known '
                        'values; the branch with the launch)',
                    )
                absent = self._without_arguments(conds, src, read)
                if absent is not None and (absent == 0 or not self._probe(stmts, src)[1]):
                    # `CONFIG=${1:-}; if [ -n "$CONFIG" ]; then <read it>; else <defaults>; fi`: the script's
                    # arguments are not given here, so the branch bash takes without them is read (a branch that
                    # runs the launch is still read, as above)
                    self._assume_note(
                        f"line {line}: a test of the script's own arguments, which are not given here: read as "
                        '`bash SCRIPT` runs it without them (grpo-guard check -- bash SCRIPT ARGS reads it with them)'
                    )
                    if absent == 0:
                        return self.seq(stmts, src)
                    continue
                return self._branch(
                    stmts, src, f'assumed branch at line {line} (its condition could not be decided from known values)'
                )
            if st == 0:
                return self.seq(stmts, src)
        return 0

    # A test that picks the node a script runs on (its rank or name): the role it picks runs on another node.
    _NODE_TEST = re.compile(r'(?i)node|rank|host|slurm_procid|master_addr')

    def _other_role(self, stmts, src: Src, line: int, test: str, at: int) -> None:
        """An undecided branch beside the one with the training launch, at ``line``, that runs none: another role of
        the same script (``bash run.sh rollout`` / ``bash run.sh train``, or a node rank picking the rollout node).
        The servers it starts (``sidecar``) are kept, each marked with that role; the rest of it is forgotten."""
        if self.sidecar is None:
            return
        node = self._NODE_TEST.search(test)
        where = 'another node' if node else 'another run of the script'
        self.assume_stack.append(
            f"line {line}: read as the script's other role (the test at line {at} picks it in {where}): the rollout "
            'server it starts is the one the launch uses'
        )
        made = len(self.commands)
        try:
            self._probe_all(stmts, src, keep=self.sidecar)
        finally:
            self.assume_stack.pop()
        for c in self.commands[made:]:
            c.role, c.role_node = f'the test at line {at}, {test.strip()[:60]}', bool(node)

    def _without_arguments(self, conds, src: Src, read: list[str]) -> int | None:
        """The status of a test that reads nothing unknown but the script's own arguments (``$1``, ``$#``, or a
        variable set from them, ``CONFIG=${1:-}``), at the script's top level with its arguments not given, as bash
        gives it when the script is run without arguments: those arguments unset, a variable set only from them
        empty. None when the test reads anything else not known here, or is still not decided."""
        if not self.state.args_unknown or self.state.frames or not read:
            return None
        if not all(SCRIPT_ARG.fullmatch(n) for n in read):
            return None
        state, made, unresolved = self.state, len(self.commands), list(self.unresolved)
        self.state = state.copy()
        self.state.args_unknown, self.state.positional = False, []
        self.args_absent = True
        try:
            st = self.seq(conds, src)
        except (_Exit, _Return):
            st = None
        finally:
            self.state, self.args_absent, self.unresolved = state, False, unresolved
            del self.commands[made:]
        return st

    def _launching_clause(self, clauses, k: int, src: Src):
        """For an undecided ``if`` clause ``k`` whose own branch runs no training launch (``prefer``): the first later
        clause whose branch runs one, as (its statements, its line); None when clause ``k`` runs one or none does.
        Each branch is probed on a copy of the shell."""
        if self.prefer is None or k + 1 >= len(clauses) or self._probe(clauses[k][1], src)[1]:
            return None
        for _conds, stmts, line in clauses[k + 1 :]:
            if self._probe(stmts, src)[1]:
                return stmts, line
        return None

    def case(self, node, src: Src) -> int | None:
        value_node = node.child_by_field_name('value')
        outer = self.unresolved
        self.unresolved, defaults = [], len(self.defaults)  # what this word reads, even if read before
        word = self.exp.single(_raw(src, [value_node])) if value_node is not None else ''
        unknown, defaulted = bool(self.unresolved), len(self.defaults) > defaults
        self.unresolved = outer + [n for n in self.unresolved if n not in outer]
        items = [c for c in node.children if c.type == 'case_item']
        falling = False
        for item in items:
            pats = item.children_by_field_name('value')
            body, seen_paren, term = [], False, ';;'
            for c in item.children:
                if c.type == ')' and not seen_paren:
                    seen_paren = True
                elif seen_paren and c.type in (';;', ';&', ';;&'):
                    term = c.type
                elif seen_paren:
                    body.append(c)
            if unknown:
                return self._undecided_case(node, items, src)
            matched = falling
            if not matched:
                for p in pats:
                    b2 = len(self.unresolved)
                    rx = self.exp.pattern(_raw(src, [p]))
                    if len(self.unresolved) > b2:
                        return self._branch(
                            body,
                            src,
                            f'assumed branch at line {src.line_of(item)} (a case pattern could not be resolved)',
                        )
                    if re.fullmatch(rx, word, re.S):
                        matched = True
                        break
            if matched:
                if defaulted and not falling and self._exits(body, src) is not None:
                    # the branch a script argument's default leads to ends the script with an error (its usage):
                    # what the user passes is not known, so read the case as undecided
                    return self._undecided_case(node, items, src)
                status = self.seq(body, src)
                if term == ';&':
                    falling = True
                    continue
                if term == ';;&':
                    falling = False
                    continue
                return status
        return 0

    def _undecided_case(self, node, items, src: Src) -> int | None:
        """A ``case`` on a value not known here (a script's ``case "$1" in rollout) ...;; train) ...;; esac``): bash
        runs one branch, picked by what the user passes. Read the first branch that runs a command the caller looks
        for (``prefer``: a training launch), else the first that goes on past the ``case`` (no ``exit``, not even
        ``exit 0``: a ``baseline) echo "no training needed"; exit 0`` branch leaves before the launch after it), else
        the first that does not end the script with an error, else the first; the choice is recorded with every
        command it gives."""
        bodies = []
        for item in items:
            body, seen_paren = [], False
            for c in item.children:
                if c.type == ')' and not seen_paren:
                    seen_paren = True
                elif seen_paren and c.type not in (';;', ';&', ';;&'):
                    body.append(c)
            bodies.append((item, body))
        probes = [self._probe_all(body, src) for _, body in bodies]
        pick = next((i for i, (_, wanted, _) in enumerate(probes) if wanted), None)
        if pick is None:
            pick = next((i for i, (_, _, ends) in enumerate(probes) if ends is None), None)
        if pick is None:
            pick = next((i for i, (status, _, _) in enumerate(probes) if status is None), 0)
        item, body = bodies[pick]
        if probes[pick][1]:
            value_node = node.child_by_field_name('value')
            test = _raw(src, [value_node]) if value_node is not None else ''
            for i, (other, obody) in enumerate(bodies):
                if i != pick and not probes[i][1]:
                    self._other_role(obody, src, src.line_of(other), test, src.line_of(node))
        return self._branch(
            body,
            src,
            f'assumed branch at line {src.line_of(item)} (case on a value that could not be resolved'
            + (', the branch with the launch)' if probes[pick][1] else ')'),
        )

    def words(self, raw: str) -> list[str]:
        """A command's word, a ``for`` list's or an array element's: brace expansion first (``braces``), then the
        expansions, splitting and pathname expansion of each (``expand.Expander.fields``)."""
        return [f for w in braces.expand(raw) for f in self.exp.fields(w)]

    def _loop_body(self, body, src: Src) -> bool:
        """Runs one iteration; False when the loop is left (break)."""
        try:
            self.stmt(body, src)
        except _Continue as c:
            if c.n > 1:
                c.n -= 1
                raise
        except _Break as b:
            if b.n > 1:
                b.n -= 1
                raise
            return False
        return True

    def for_(self, node, src: Src) -> int | None:
        var_node = node.child_by_field_name('variable')
        body = node.child_by_field_name('body')
        var = src.text(var_node.start_byte, var_node.end_byte)
        values_nodes = node.children_by_field_name('value')
        taints: list[list[str]] = []  # what each value holds unresolved (`for c in $(ps --ppid $pid)`)
        if any(c.type == 'in' for c in node.children):
            values = []
            for g in _groups(values_nodes):
                before = len(self.unresolved)
                got = self.words(_raw(src, g))
                values += got
                taints += [list(self.unresolved[before:])] * len(got)
        else:
            values = list(self.state.positional)
        if len(values) > self.limits.loop:
            raise self.too_long(f'{self.limits.loop} loop iterations')
        line = src.line_of(node)
        for k, v in enumerate(values):
            self.tick()
            self.assign(var, v, taint=(taints[k] if k < len(taints) else None) or None)
            self.loop_stack.append(f'{var}={v} (for loop at line {line}, {k + 1} of {len(values)})')
            try:
                if not self._loop_body(body, src):
                    break
            finally:
                self.loop_stack.pop()
        return 0

    def c_for(self, node, src: Src) -> int | None:
        body = node.child_by_field_name('body')
        toks = [c for c in node.children if c.type in ('((', ';', '))')]
        if len(toks) < 4:
            return self._branch([body], src, f'assumed one pass of the loop at line {src.line_of(node)}')
        init = src.text(toks[0].end_byte, toks[1].start_byte)
        cond = src.text(toks[1].end_byte, toks[2].start_byte)
        upd = src.text(toks[2].end_byte, toks[3].start_byte)
        line = src.line_of(node)
        try:
            if init.strip():
                self.exp.arith_value(init)
            k = 0
            while not cond.strip() or self.exp.arith_value(cond):
                k += 1
                if k > self.limits.loop:
                    raise self.too_long(f'{self.limits.loop} loop iterations')
                self.loop_stack.append(f'for (({init};{cond};{upd})) at line {line}, pass {k}')
                try:
                    if not self._loop_body(body, src):
                        break
                finally:
                    self.loop_stack.pop()
                if upd.strip():
                    self.exp.arith_value(upd)
        except NotKnown:
            return self._branch(
                [body],
                src,
                f'assumed one pass of the loop at line {line} (its condition could not be decided from known values)',
            )
        return 0

    def while_(self, node, src: Src) -> int | None:
        until = node.children[0].type == 'until'
        body = node.child_by_field_name('body')
        cond = [c for c in node.children if c.type not in ('while', 'until') and c != body]
        line = src.line_of(node)
        k = 0
        while True:
            k += 1
            if k > self.limits.loop:
                raise self.too_long(f'{self.limits.loop} loop iterations')
            self.by_absent = False
            st = self.seq(cond, src)
            if st is not None and self.by_absent and (st == 0) != until:
                # `until [ -f "$ENDPOINT_FILE" ]; do sleep 15; ...; exit 1; done`: a wait for a file another job
                # writes, which is not here; on the launch's machine it comes, and the loop ends (noted)
                self._assume_note(
                    f'line {line}: the loop waits for a file that is not here; taken as there, so the loop ends'
                )
                return 0
            if st is None:
                self._assume(
                    f'assumed one pass of the loop at line {line} (its condition could not be decided '
                    f'from known values)'
                )
                try:
                    self._loop_body(body, src)
                finally:
                    self.assume_stack.pop()
                return 0
            if (st == 0) == until:
                return 0
            if not self._loop_body(body, src):
                return 0

    def arith_command(self, text: str) -> int | None:
        try:
            return 0 if self.exp.arith_value(text) != 0 else 1
        except NotKnown:
            return None

    def test(self, node, src: Src) -> int | None:
        double = node.children[0].type == '[['
        outer = self.unresolved
        self.unresolved, defaults = [], len(self.defaults)  # what this test reads, even if read before
        try:
            return self._test(node, src, double, defaults)
        finally:
            self.unresolved = outer

    def _test(self, node, src: Src, double: bool, defaults: int) -> int | None:
        before = 0
        if not double:
            leaves = []
            _test_leaves(node, leaves, double)
            args = []
            for g in _groups([n for _, n in leaves]):
                args += self.exp.fields(_raw(src, g))
            toks = [('w', a) for a in args]
        else:
            leaves = []
            _test_leaves(node, leaves, double)
            toks = []
            for kind, n in leaves:
                raw = src.text(n.start_byte, n.end_byte)
                if kind == 'op':
                    toks.append(('op', raw))
                elif toks and toks[-1] in (('op', '=='), ('op', '='), ('op', '!=')):
                    toks.append(('pat', self.exp.pattern(raw)))
                elif toks and toks[-1] == ('op', '=~'):
                    toks.append(('pat', _regex(self.exp.parts(raw, nosplit=True))))
                else:
                    toks.append(('w', self.exp.single(raw)))
        if len(self.unresolved) > before:
            self.test_read += self.unresolved[before:]
            del self.unresolved[before:]
            return None
        if len(self.defaults) > defaults:
            self.by_default = True  # decided from a script argument's default (see if_ / list_)
        return self._decide(toks, double)

    def _decide(self, toks, double: bool) -> int | None:
        def arith(v):
            return self.exp.arith_value(v)

        absent: list[str] = []
        try:
            status = conditions.evaluate(toks, double, self.state.cwd, self.state.is_known, arith, absent)
        except NotKnown:
            return None
        if absent:
            self.by_default = True  # decided from a file missing here: the launch's machine may have it
            self.by_absent = True
        return status

    # -- simple commands ----------------------------------------------------------------------------------------
    def assign(
        self, name: str, value, index: int | None = None, append: bool = False, taint=None, defaults=None
    ) -> None:
        if isinstance(value, str) and len(value) > self.limits.word:
            raise self.too_long(f'{self.limits.word} characters of a value')
        self.state.assign(name, value, self.line, taint, index, append, defaults)

    def _assignment(self, group, src: Src) -> tuple[str, object, int | None, bool, list, list]:
        """(name, value, index, append, taint, defaults) of an assignment word (``A=x``, ``A+=x``, ``A[i]=x``,
        ``A=(x y)``); defaults: the script arguments whose default the value holds (``State.defaulted``)."""
        raw = _raw(src, group)
        m = _ASSIGN.match(raw)
        name, sub, op = m.group(1), m.group(2), m.group(3)
        before, defaults = len(self.unresolved), len(self.defaults)
        first = group[0]
        value_node = first.child_by_field_name('value') if first.type == 'variable_assignment' else None
        if value_node is not None and value_node.type == 'array' and value_node.end_byte == group[-1].end_byte:
            elems = [c for c in value_node.named_children if c.type != 'comment']
            arr, k = {}, 0
            assoc = name in self.state.assoc
            for g in _groups(elems):
                text = _raw(src, g)
                mm = re.match(r'^\[([^\]]*)\]=(.*)$', text, re.S)
                if mm and assoc:  # `declare -A M=([qwen]=zero3 ...)`: keys are words
                    arr[self.exp.single(mm.group(1))] = self.exp.single(mm.group(2))
                    continue
                if mm:
                    k = self.exp.arith_value(mm.group(1))
                    arr[k] = self.exp.single(mm.group(2))
                    k += 1
                    continue
                for f in self.words(text):
                    arr[k] = f
                    k += 1
            value = arr
        else:
            value = self.exp.single(raw[m.end() :], assignment=True)
        if sub and name in self.state.assoc:
            index = self.exp.single(sub[1:-1])  # M[$KEY]=v: the key is a word
        else:
            index = self.exp.arith_value(sub[1:-1]) if sub else None
        return name, value, index, op == '+=', self.unresolved[before:], list(dict.fromkeys(self.defaults[defaults:]))

    def simple(self, node, src: Src, extra=(), stdin: str | None = None) -> int | None:
        try:
            return self._simple(node, src, extra, stdin)
        except NotKnown as e:  # A[$X]=1 with $X unknown: nothing known is assigned
            self.note_unresolved(e.names)
            return None

    def _simple(self, node, src: Src, extra=(), stdin: str | None = None) -> int | None:
        trailing, self.trailing_words = self.trailing_words, []
        self.line = src.line_of(node)
        if node.type in ('variable_assignment',):
            nodes = [node]
        else:
            nodes = [c for c in node.children if c.type not in REDIRECTS and c.type != 'comment']
            for r in node.children:  # tree-sitter-bash keeps `cmd <<< "$S"` inside the command node
                if r.type == 'herestring_redirect' and stdin is None:
                    stdin = self._herestring(r, src)
        if stdin is None:
            self.stdin_taint, self.stdin_defaults = [], []
        nodes += list(extra)
        groups = _groups(nodes)
        self.unresolved, self.defaults = [], []
        assigns, words = [], []
        for g in groups:
            if not words and _ASSIGN.match(_raw(src, g)) and g[0].type != 'command_name':
                assigns.append(g)
            else:
                words.append(g)
        if not words:
            for g in assigns:
                name, value, index, append, taint, defaults = self._assignment(g, src)
                if not self.commented:
                    self.assign(name, value, index, append, taint, defaults)
            return self.state.status if self.captures else 0
        head_raw = _raw(src, words[0])
        if head_raw in DECLARE:
            self._apply_prefix(assigns, src, temporary=False)
            return self.declare(head_raw, words[1:], src)
        argv: list[str] = []
        for g in words:
            argv += self.words(_raw(src, g))
            if sum(len(a) for a in argv) > self.limits.word:
                raise self.too_long(f'{self.limits.word} characters of a command')
        argv += trailing
        prefix, restore = self._apply_prefix(assigns, src, temporary=True)
        try:
            return self.run_argv(argv, prefix, src, stdin)
        finally:
            restore()

    def _apply_prefix(self, assigns, src: Src, temporary: bool):
        prefix: dict[str, str] = {}
        saved = {}
        for g in assigns:
            name, value, index, append, taint, defaults = self._assignment(g, src)
            if temporary and name not in saved:
                saved[name] = self.state._snapshot(name)
            self.assign(name, value, index, append, taint, defaults)
            v = self.state.scalar(name)
            if temporary and v is not None:
                prefix[name] = v

        def restore():
            for name, (present, value, exported, taint, unset) in saved.items():
                if present:
                    self.state.vars[name] = value
                else:
                    self.state.vars.pop(name, None)
                if taint:
                    self.state.taint[name] = taint
                else:
                    self.state.taint.pop(name, None)
                (self.state.known_unset.add if unset else self.state.known_unset.discard)(name)

        return prefix, restore

    def _unwrap(self, argv: list[str]) -> tuple[dict, list[str], bool]:
        env: dict[str, str] = {}
        rest, is_exec = list(argv), False
        while rest:
            head = rest[0]
            if head == 'env':
                i = 1
                while i < len(rest) and rest[i].startswith('-') and rest[i] != '--':
                    i += 2 if rest[i] in ('-u', '--unset', '-C', '--chdir', '-S', '--split-string') else 1
                if rest[i : i + 1] == ['--']:
                    i += 1
                while i < len(rest) and _ENV_ASSIGN.match(rest[i]):
                    m = _ENV_ASSIGN.match(rest[i])
                    env[m.group(1)] = m.group(2)
                    i += 1
                rest = rest[i:]
                continue
            if head == 'command' and rest[1:2] and rest[1] in ('-v', '-V'):
                return env, rest, is_exec
            if (inside := container_exec(rest)) is not None:  # apptainer exec IMAGE CMD: CMD, with its --env
                env.update(inside[0])
                rest = inside[1]
                continue
            if head == 'exec':
                if len(rest) == 1:  # `exec > >(tee log) 2>&1`: redirections only, the shell goes on (bash(1))
                    return env, [], False
                is_exec = True
            inner = strip_wrapper(rest)
            if inner is not None:
                rest = inner
                continue
            break
        return env, rest, is_exec

    def run_argv(self, argv: list[str], prefix: dict, src: Src, stdin: str | None) -> int | None:
        if not argv:
            return 0
        wenv, rest, is_exec = self._unwrap(argv)
        if not rest:
            return 0
        env = {**prefix, **wenv}
        name = rest[0]
        if name in self.state.funcs and not wenv:
            status = self.call(name, rest[1:])
        elif name == 'read' and stdin is not None and (got := self.read_stdin(rest[1:], stdin, env)) is not None:
            status = got  # `read -r -a A <<< "$S"`: the here-string or here-document is known
        elif name == 'command' and rest[1:2] == ['-v'] and self.captures:
            status = self.in_capture(rest, env, stdin)  # `$(command -v swift)`: pure.run prints the name
        elif name in QUIET or (name == 'command' and rest[1:2] in (['-v'], ['-V'])):
            status = self.builtin(name, rest, src)
        elif (text := shell_c(rest)) is not None:
            status = self.child_shell(text, rest, env, src)
        elif (script := self.script_file(rest, strict=False)) is not None:
            path, text = script  # `bash tools/train/x.sh ARGS`: the script runs in a new shell, as `bash -c` does
            status = self.child_shell(text, [text, *rest[rest.index(path) :]], env, src, name=path)
        elif self.launcher is not None and (ran := self._job_step(rest, env, src)) is not None:
            status = ran[0]
        elif self.captures:
            status = self.in_capture(rest, env, stdin)
        else:
            self.emit(rest, env)
            status = 0 if name in ('echo', 'printf') else None
        if is_exec:
            raise _Exit(status)
        return status

    def _job_step(self, argv: list[str], env: dict, src: Src) -> tuple[int | None] | None:
        """A job launcher's step (``launcher``: srun) that runs a shell here: ``srun --nodes=1 bash train.sh ARGS``
        (the script), ``srun --jobid $SLURM_JOB_ID bash -c "$LAUNCHER $CMD"`` (the string), also inside a container
        (``srun -N1 singularity exec --nv IMAGE bash x.sh``), read with the job step's variables: (its status,); None
        when the step runs no shell (``srun accelerate launch ...`` is the command itself)."""
        step = self.launcher(argv)
        if step is None:
            return None
        inside, cmd, _ = self._unwrap(step[1])
        env = {**env, **step[0], **inside}
        if (text := shell_c(cmd)) is not None:
            return (self.child_shell(text, cmd, env, src),)
        if (script := self.script_file(cmd, strict=False)) is not None:
            path, text = script
            return (self.child_shell(text, [text, *cmd[cmd.index(path) :]], env, src, name=path),)
        return None

    def in_capture(self, argv: list[str], env: dict, stdin: str | None) -> int | None:
        cap = self.captures[-1]
        if stdin is None:
            stdin, self.pipe_stdin = self.pipe_stdin, None
        job_nodes = argv[:1] == ['scontrol'] and all(re.fullmatch(_JOB_NODELIST, n) for n in self.unresolved)
        if self.unresolved and not job_nodes:  # `scontrol show hostnames $SLURM_JOB_NODELIST`: the job's own nodes
            cap.unknown = True
        visible = self.state.scalar('CUDA_VISIBLE_DEVICES')
        if visible is not None and self.state.taint.get('CUDA_VISIBLE_DEVICES'):
            visible = None
        try:
            out, status = pure.run(argv, self.state.cwd, visible, stdin, self.machine)
        except pure.Impure:
            self.emit(argv, env)
            cap.unknown = True
            return None
        cap.out.append(out)
        return status

    def emit(self, argv: list[str], prefix: dict) -> None:
        if len(self.commands) >= self.limits.commands:
            raise self.too_long(f'{self.limits.commands} commands')
        env = {**self.state.env(), **prefix}
        lines = {k: self.state.set_line.get(k, self.line) for k in env}
        lines.update({k: self.line for k in prefix})
        unresolved = list(self.unresolved)
        for k in env:
            if k not in prefix:
                for t in self.state.taint.get(k, []):
                    if t not in unresolved:
                        unresolved.append(t)
        holders = []
        for w in list(argv) + list(env.values()):
            for p in _PLACEHOLDER.findall(w):
                if p not in holders and re.fullmatch(r'<[A-Za-z_][A-Za-z0-9_\-]*>', w.split('=', 1)[-1]):
                    holders.append(p)
        above = self.comment_above if self.commented else _above(self.src, self.line) if self.src else ''
        self.commands.append(
            Command(
                env=env,
                argv=list(argv),
                line=self.line,
                commented=self.commented,
                above=above,
                env_lines=lines,
                unresolved=unresolved,
                placeholders=holders,
                assumed=self.notes + self.assume_stack,
                loops=list(self.loop_stack),
                cwd=self.state.cwd,
                defaults=[d for d in dict.fromkeys(self.empty_defaults) if d in self.defaults],
                files=dict(self.written),
                captured=bool(self.captures),
                background=self.background > 0,
            )
        )

    def call(self, name: str, args: list[str]) -> int | None:
        body, src = self.state.funcs[name]
        active = self.calls.get(name, 0)
        if active >= RECURSION and self.unresolved:
            # `kill_tree() { for child in $(ps --ppid "$1"); do kill_tree "$child"; done; }`: a function that calls
            # itself on values not known here would not end here; what it does further is not known (noted)
            self._assume_note(
                f'line {self.line}: {name} calls itself on values not known here; not followed past {RECURSION} levels'
            )
            return None
        self.calls[name] = active + 1
        try:
            return self._call(name, body, src, args)
        finally:
            self.calls[name] = active

    def _call(self, name: str, body, src: Src, args: list[str]) -> int | None:
        self.depth += 1
        if self.depth > self.limits.depth:
            raise self.too_long(f'{self.limits.depth} nested function calls')
        st = self.state
        old_pos, old_taint = st.positional, st.arg_taint()
        old_defaults = st.defaulted.pop('@', None)
        st.positional = list(args)
        self._positional_taint(st, self.unresolved)
        if self.defaults:  # `run "${MODEL:-}"`: the arguments hold defaults of what the user gives (State.defaulted)
            st.defaulted['@'] = list(dict.fromkeys(self.defaults))
        st.frames.append({})
        old_src = self.src
        self.src = src
        try:
            return self.stmt(body, src)
        except _Return as r:
            return r.status
        finally:
            self.src = old_src
            self.depth -= 1
            # the frame belongs to the state that called (a subshell in the body has its own copy)
            st.positional = old_pos
            st.set_arg_taint(old_taint)
            st.defaulted.pop('@', None)
            if old_defaults:
                st.defaulted['@'] = old_defaults
            st.pop_frame()

    @staticmethod
    def _positional_taint(st: State, names: list[str]) -> None:
        """What the positional parameters carry unresolved: ``@`` all of it (``$@``, ``$*``, ``$#``), and ``@K`` what
        ``$K`` carries: the unresolved names written in that argument, and any that appear in none (kept as written
        elsewhere, they may have reached any), so a known argument beside an unknown one stays known."""
        if not names:
            st.set_arg_taint({})
            return
        nowhere = [n for n in names if not any(n in a for a in st.positional)]
        held = {f'@{k}': [n for n in names if n in a] + nowhere for k, a in enumerate(st.positional, 1)}
        st.set_arg_taint({'@': list(names), **held})

    def script_file(self, argv: list[str], strict: bool = True) -> tuple[str, str] | None:
        """``bash [-x] [-o opt] FILE ARGS`` / ``sh FILE``: (FILE as written, its text) where FILE is here; None
        otherwise (a file not here stays a command the caller records). ``strict``: none of the command's words may
        be unresolved (else: not the file's name; its arguments carry what they hold, _positional_taint)."""
        if not argv or argv[0].rsplit('/', 1)[-1] not in SHELLS or (strict and self.unresolved):
            return None
        i = 1
        while i < len(argv) and argv[i][:1] in ('-', '+') and argv[i] not in ('-', '--'):
            i += 2 if argv[i] in ('-o', '+o', '-O', '+O') else 1  # bash(1): -o/-O take an option name
        if i < len(argv) and argv[i] == '--':
            i += 1
        if i >= len(argv):
            return None
        path = argv[i]
        if any(n in path for n in self.unresolved):
            return None
        # bash opens FILE from its working directory; where that is not known, from the reading script's directory
        base = self.state.cwd if self.state.cwd is not None else os.path.dirname(self.source)
        found = path if path.startswith('/') else os.path.join(base, path)
        if not os.path.isfile(found):
            return None
        try:
            with open(found, encoding='utf-8', newline='') as f:
                return path, f.read()
        except (OSError, UnicodeDecodeError):
            return None

    def child_shell(self, text: str, argv: list[str], env: dict, src: Src, name: str | None = None) -> int | None:
        """``bash -c STRING [NAME ARGS...]``: a new shell that sees the exported variables (and ``env``); with
        ``name``, the text of the script file ``name`` (``bash FILE ARGS``: argv is [text, FILE, ARGS...])."""
        parent = self.state
        k = argv.index(text) if text in argv else len(argv) - 1
        rest = argv[k + 1 :]
        child = State(cwd=parent.cwd, arg0=rest[0] if rest else argv[0], positional=rest[1:], sources=[])
        self._positional_taint(child, self.unresolved if rest[1:] else [])
        if name is None and not rest[1:] and any(re.match(r'\$\{?[1-9@*#]', n) for n in self.unresolved):
            # `bash -c "$LAUNCHER $CMD"` whose text still holds the script's own `$3` (not given here): the string
            # bash -c reads had it expanded by then, so it stays the script's argument, not the new shell's
            child.args_unknown = True
        for n in parent.exported:
            v = parent.scalar(n)
            if v is not None:
                child.vars[n] = v
                child.exported.add(n)
                if n in parent.touched:
                    child.touched.add(n)
                    child.set_line[n] = parent.set_line.get(n, self.line)
                if parent.taint.get(n):
                    child.taint[n] = list(parent.taint[n])
        for n, v in env.items():
            child.vars[n] = v
            child.exported.add(n)
            child.touched.add(n)
            child.set_line[n] = self.line
        if parent.cwd is not None:
            child.vars['PWD'] = parent.cwd
        self.state = child
        self.depth += 1
        if self.depth > self.limits.depth:
            raise self.too_long(f'{self.limits.depth} nested shells')
        outer_unresolved = self.unresolved
        try:
            return self.run_text(text, name, first_line=1) if name else self.run_text(text, src.name, line=self.line)
        except _Exit as e:
            return e.status
        finally:
            self.depth -= 1
            self.state = parent
            self.unresolved = outer_unresolved

    def substitute(self, inner: str) -> str | None:
        """``$(inner)``: its output, or None where a command in it is not pure (or a value in it not known)."""
        if self.commented:
            return None  # a comment's `swift rollout` in backquotes is prose: nothing in a comment is run
        if self.depth >= self.limits.depth:
            raise self.too_long(f'{self.limits.depth} nested command substitutions')
        saved, saved_unres, saved_line = self.state, self.unresolved, self.line
        self.state = saved.copy()
        self.unresolved = []
        cap = _Capture()
        self.captures.append(cap)
        self.depth += 1
        try:
            self.run_text(inner, self.source, line=self.line)
        except _Exit:
            pass
        except GuardError as e:
            if 'could not be read within' in str(e):
                raise
            cap.unknown = True
        finally:
            self.depth -= 1
            self.captures.pop()
            status = self.state.status
            self.state = saved
            self.unresolved = saved_unres
            self.line = saved_line
        self.state.status = status
        out = ''.join(cap.out)
        if cap.unknown or pure.UNKNOWN_MARK in out:  # what it printed holds text not known here (a host's name)
            return None
        return out

    # -- builtins -----------------------------------------------------------------------------------------------
    # -- comments -----------------------------------------------------------------------------------------------


def _groups(nodes) -> list[list]:
    """Nodes -> words: nodes that touch (no white space between) are one word (tree-sitter sometimes splits one)."""
    out: list[list] = []
    for n in nodes:
        if out and out[-1][-1].end_byte == n.start_byte:
            out[-1].append(n)
        else:
            out.append([n])
    return out


def _test_leaves(node, out: list, double: bool) -> None:
    for c in node.children:
        if c.type in ('[', ']', '[[', ']]', 'comment'):
            continue
        if c.is_named and c.type in _OPERANDS:
            out.append(('w', c))
        elif c.type == 'test_operator':
            out.append(('op' if double else 'w', c))
        elif not c.is_named:
            out.append(('op' if double else 'w', c))
        else:
            _test_leaves(c, out, double)


def _regex(parts) -> str:
    return ''.join(re.escape(p[0]) if p is not None and p[2] else (p[0] if p is not None else ' ') for p in parts)


def evaluate_script(
    text: str,
    environ=None,
    source: str = '<script>',
    cwd: str | None = None,
    limits: Limits | None = None,
    args: list[str] | None = None,
    machine: pure.Machine | None = None,
    prefer=None,
    launcher=None,
    sidecar=None,
) -> list[Command]:
    """Every simple command a bash script would run, in order, with the environment each runs with; ``args``: the
    script's arguments (None: not known); ``machine``: the node it runs on, for ``nvidia-smi``."""
    ev = Evaluator(environ, source, cwd, limits, machine)
    ev.prefer, ev.launcher, ev.sidecar = prefer, launcher, sidecar
    if args is None:
        ev.state.args_unknown = True
    else:
        ev.state.positional = list(args)
    exited = None
    try:
        ev.run_text(text, source)
    except _Exit as e:
        if isinstance(e.status, int) and e.status > 0:
            exited = (ev.line, e.status)
    except (_Break,):
        pass
    except RecursionError:
        raise ev.too_long("the reader's recursion depth") from None
    except (NotKnown, ValueError, IndexError, KeyError) as e:  # a construct this reader does not follow
        raise GuardError(
            f'{source}:{ev.line}: could not read this line ({e.__class__.__name__}: {str(e)[:80]}); '
            f'paste the command after --'
        ) from None
    return Commands(ev.commands, exited)


class Commands(list):
    """The commands a script runs, and where it ended with an error (``exit N``, N > 0: (line, N)), if it did."""

    def __init__(self, commands, exited: tuple[int, int] | None = None):
        super().__init__(commands)
        self.exited = exited


__all__ = ['Evaluator', 'Limits', 'evaluate_script', 'assemble', 'glob_regex', 'join']
