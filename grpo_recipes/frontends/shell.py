"""Read a command line or a launcher script the way a shell would hand it to the framework, without
running anything: leading ``VAR=value`` assignments and ``env [VAR=value ...]`` become the command's
environment, ``export VAR=value`` lines in a script carry over to the commands after them, and
``$VAR``/``${VAR}`` expand from what the script (or the caller's environment) set. The script is read by
:mod:`.bash` (tree-sitter-bash's grammar and an evaluator of bash's rules); this module keeps the entry points.

Nothing is executed; the script, the files it sources and the file tests it makes are all that is read.
"""

from __future__ import annotations

import os
import re
from typing import Mapping

from ..errors import GuardError
from .bash import Command, evaluate_script
from .bash.wrappers import strip_wrapper

_ASSIGN = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.S)


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
    """A pasted command line (continuations, ``bash -c '...'``, ``nohup ... &`` allowed) -> the command the guard
    reads: the first one it knows (``swift rollout``, ``accelerate launch``, ...), else the first."""
    from . import kind_of

    cmds = [c for c in read_script(text, {}, what) if not c.commented]
    if not cmds:
        raise GuardError(f'{what}: {text[:60]!r} has no command after its VAR=value assignments')
    cmd = next((c for c in cmds if kind_of(c.argv)), cmds[0])
    return Command(
        env=cmd.env,
        argv=cmd.argv,
        unresolved=cmd.unresolved,
        placeholders=cmd.placeholders,
        assumed=cmd.assumed,
        loops=cmd.loops,
        cwd=cmd.cwd,
    )


def read_script(
    text: str,
    environ: Mapping[str, str] | None = None,
    source: str = '<script>',
    cwd: str | None = None,
    args: list[str] | None = None,
    machine=None,
    launcher=None,
) -> list[Command]:
    """Every simple command of a bash launcher, with the environment it would run with, read as bash reads it
    (:mod:`.bash`: tree-sitter-bash's grammar, evaluated without running anything).

    ``export A=1`` and bare ``A=1`` lines set variables for later lines (exported ones reach the commands'
    environment); ``$A`` expands from them, once. Functions, ``if``/``case``, ``for`` (a sweep gives one command per
    value), ``source``, ``bash -c`` are followed. Commented commands are returned with ``commented`` set, so a
    caller can read the ``# swift rollout ...`` block that ms-swift's server-mode examples put in their header.
    ``cwd``: the directory the script starts in (default: this process's), for ``cd``, ``pwd`` and file tests.
    ``args``: the script's own arguments (None: not known, so ``$1`` and ``$#`` are not resolved); ``machine``: the node
    (``bash.pure.Machine``) that ``nvidia-smi`` describes; ``launcher``: argv -> (env, argv) | None, a job launcher
    whose command is a script to read there (``launchers.job_step``: ``srun ... bash train.sh``).
    """
    return evaluate_script(
        text,
        dict(environ or {}),
        source,
        cwd=os.getcwd() if cwd is None else cwd,
        args=args,
        machine=machine,
        prefer=_is_training_launch,
        launcher=launcher,
        sidecar=_is_rollout_server,
    )


def _role(argv: list[str]) -> str | None:
    """What the guard reads a command as: ``train`` (a training launch), ``rollout`` (a rollout server), else None."""
    from . import kind_of

    kind = kind_of(argv)
    return kind[1] if kind else None


def _is_rollout_server(argv: list[str]) -> bool:
    """A rollout server (``swift rollout``, ``trl vllm-serve``): what a script's other role may start beside the
    launch its undecided ``case`` or ``if`` leads to."""
    return _role(argv) == 'rollout'


def _is_training_launch(argv: list[str]) -> bool:
    """A command the guard reads as a training launch: what a script's undecided ``case`` should lead to."""
    return _role(argv) == 'train'
