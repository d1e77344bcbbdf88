"""Read a command line or a launcher script the way a shell would hand it to the framework, without
running anything: leading ``VAR=value`` assignments and ``env [VAR=value ...]`` become the command's
environment, ``export VAR=value`` lines in a script carry over to the commands after them, and
``$VAR``/``${VAR}`` expand from what the script (or the caller's environment) set.

Pure: text in, :class:`Command` values out. Nothing is executed, no file but the script is read.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Mapping

from ..errors import GuardError
from .shell_expand import shell_c, strip_wrapper
from .shell_words import split_words

_ASSIGN = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.S)


@dataclass
class Command:
    """One simple command: its own environment assignments and its argv."""
    env: dict[str, str] = field(default_factory=dict)
    """Assignments written before the command (``A=1 cmd``, ``env A=1 cmd``, or a script's ``export``)."""
    argv: list[str] = field(default_factory=list)
    line: int = 0
    """1-based line of a script where the command starts (0 for a command line)."""
    commented: bool = False
    """The command was written in a comment (ms-swift's examples show ``swift rollout`` that way)."""
    above: str = ''
    """The comment lines directly above the command (no blank line between), e.g. ``# run in another node``."""
    env_lines: dict[str, int] = field(default_factory=dict)
    """Script line where each ``env`` variable was set (its ``export`` line, or the command's own line)."""


# Words that end one simple command and start the next (shlex keeps them as words when spaced).
_CONTROL = {'&&', '||', ';', '|', '&'}
# A redirection word: `>`, `>>`, `2>`, `<`, `&>` alone (the next word is its file), or with its target attached
# (`>log`, `2>&1`, `&>log`).
_REDIRECT = re.compile(r'^(?:\d*(?:>>?|<|>&)|&>>?)(.*)$')
# `<node1_port>`: an example's placeholder (kept, so the parser can name it), not a redirection
_PLACEHOLDER = re.compile(r'^<[^<>]+>$')


def segments(words: list[str]) -> list[list[str]]:
    """One line's words -> its simple commands: split at ``&&``, ``||``, ``;``, ``|`` and a trailing ``&``,
    with redirections (``> vllm.log 2>&1``) dropped."""
    out: list[list[str]] = [[]]
    skip_next = False
    for w in words:
        if skip_next:
            skip_next = False
            continue
        if w in _CONTROL:
            out.append([])
            continue
        m = None if _PLACEHOLDER.match(w) else _REDIRECT.match(w)
        if m and out[-1]:  # a redirection (a leading word such as `>` alone is not a command's)
            skip_next = m.group(1) == ''
            continue
        out[-1].append(w)
    return [seg for seg in out if seg]


def split_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``VAR=value`` words, an ``env [-i] VAR=value ...`` prefix and wrappers such as ``nohup`` ->
    (environment, the rest)."""
    env: dict[str, str] = {}
    rest = list(argv)
    while rest:
        m = _ASSIGN.match(rest[0])
        if m:
            env[m.group(1)] = m.group(2)
            rest.pop(0)
            continue
        inner = strip_wrapper(rest)  # nohup / setsid / timeout 1h / nice -n 5 ... cmd
        if inner is not None:
            rest = inner
            continue
        if rest[0] == 'env':
            rest.pop(0)
            while rest and rest[0].startswith('-') and rest[0] != '--':
                rest.pop(0)  # env -i / -u NAME: options of env itself
            if rest[:1] == ['--']:
                rest.pop(0)
            continue
        break
    return env, rest


def parse_command_text(text: str, what: str = 'command') -> Command:
    """A pasted command line (line continuations allowed) -> Command."""
    try:
        words = shlex.split(text.replace('\\\n', ' '), comments=True)
    except ValueError as e:
        raise GuardError(f'{what}: cannot split {text[:60]!r}… as a shell command ({e}); check its quotes') from None
    first = segments(words)
    env, argv = split_env(first[0] if first else [])
    inner = shell_c(argv)  # bash -c 'cd x && CMD ...': the first command of the inner shell's that the guard reads
    if inner is not None:
        from . import kind_of
        cmds = read_script(inner, {}, what)
        cmd = next((c for c in cmds if kind_of(c.argv)), cmds[0] if cmds else Command(argv=argv))
        return Command(env={**env, **cmd.env}, argv=cmd.argv)
    if not argv:
        raise GuardError(f'{what}: {text!r} has no command after its VAR=value assignments')
    return Command(env=env, argv=argv)


def _logical_lines(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, text, commented) of each logical line: continuations joined, and a
    commented command whose lines each start with ``#`` joined too. Lines inside an open quote join."""
    out: list[tuple[int, str, bool]] = []
    buf, start, commented = '', 0, False
    for no, raw in enumerate(text.split('\n'), 1):  # bash splits at LF only: a CR stays in the line
        if buf and not commented and _open_quote(buf):
            buf += '\n' + raw  # inside a quoted value spanning lines, '#' is text
        else:
            stripped = raw.strip()
            is_comment = stripped.startswith('#')
            body = stripped.lstrip('#').strip() if is_comment else raw
            if buf and commented != is_comment:  # a comment ends at its line: never joins code
                out.append((start, buf, commented))
                buf = ''
            if not buf:
                start, commented = no, is_comment
            buf = buf + '\n' + body if buf else body
        if buf.endswith('\\'):
            buf = buf[:-1]
            continue
        if not commented and _open_quote(buf):
            continue  # a quoted value spanning lines (a multi-line --system prompt)
        out.append((start, buf, commented))
        buf = ''
    if buf:
        out.append((start, buf, commented))
    return out


def _open_quote(text: str) -> bool:
    try:
        shlex.split(text, comments=False)
        return False
    except ValueError:
        return True


def read_script(text: str, environ: Mapping[str, str] | None = None, source: str = '<script>') -> list[Command]:
    """Every simple command of a bash launcher, with the environment it would run with.

    ``export A=1`` and bare ``A=1`` lines set variables for later lines (exported ones reach the
    commands' environment); ``$A`` expands from them. Control flow is not followed: a launcher whose
    command is built inside functions or loops should be checked with its command pasted after ``--``.
    Commented commands are returned with ``commented`` set, so a caller can read the
    ``# swift rollout ...`` block that ms-swift's server-mode examples put in their header.
    """
    scope: dict[str, str] = dict(environ or {})
    exported: dict[str, str] = {}
    exported_at: dict[str, int] = {}
    out: list[Command] = []
    above: list[str] = []  # comment lines since the last blank line or command
    for line, text_, commented in _logical_lines(text):
        if not text_.strip():
            above.clear()
            continue
        note = '\n'.join(above)
        if commented:
            above.append(text_)
        else:
            above.clear()
        try:
            line_scope = dict(scope) if commented else scope  # a comment's ${X:=1} assigns nothing
            # split as bash does: ${V:-a b} is one unit, then an unquoted expansion splits (shell_words.py)
            words = split_words(text_, line_scope, None if commented else exported)
        except ValueError:
            if commented:
                continue  # prose in a comment
            raise GuardError(f'{source}:{line}: cannot split this line as a shell command (unbalanced quote?)')
        if not words:
            continue
        for seg in segments(words):
            if not commented and seg[0] == 'export':
                for w in seg[1:]:
                    m = _ASSIGN.match(w)
                    if m:
                        scope[m.group(1)] = m.group(2)
                        exported[m.group(1)] = m.group(2)
                        exported_at[m.group(1)] = line
                    elif w in scope:
                        exported[w] = scope[w]
                        exported_at[w] = line
                continue
            env, argv = split_env(seg)
            if not argv:
                if not commented:
                    scope.update(env)  # plain assignments: shell variables, not exported
                continue
            inner = shell_c(argv)  # nohup bash -c "accelerate launch ..." &: the inner shell's own commands
            if inner is not None:
                sub = read_script(inner, {**scope, **env}, source)
                out += [Command(env={**exported, **env, **c.env}, argv=c.argv, line=line, commented=commented,
                                above=note, env_lines={**exported_at, **{k: line for k in {**env, **c.env}}})
                        for c in sub]
                continue
            out.append(Command(env={**exported, **env}, argv=argv, line=line, commented=commented, above=note,
                               env_lines={**exported_at, **{k: line for k in env}}))
    return out
