"""What bash does to a word or a command before the framework sees it, for :mod:`.shell`: parameter expansion
(``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:=default}``, ``${VAR=default}``,
``${VAR:+alt}``, ``${VAR+alt}``), done by the evaluator in bash/; the commands that run another command (``nohup``,
``timeout 1h``, ``bash -c '...'``) are read in bash/wrappers.py.

Semantics follow bash(1), "Parameter Expansion": with the colon the default applies when the variable is unset
*or empty*, without it only when unset; ``:=``/``=`` also assign the default to the variable (a shell variable;
an exported one stays exported with the new value). A variable set nowhere (not earlier in the script, not in
the environment) is left as written, so a caller can say it could not be resolved (:func:`unresolved`).
Pure: nothing is executed.
"""

from __future__ import annotations

import re
from typing import MutableMapping

_NAME = r'[A-Za-z_][A-Za-z0-9_]*'
# $NAME, ${NAME}, ${NAME<op>word} with op one of :- - := = :+ + (word: anything without a closing brace,
# nested ${...} in the word is expanded first by :func:`expand`'s inner-first loop).
# what :func:`unresolved` finds: $NAME, ${...}, $(...) and $((...)) (one level of nested parentheses)
_LEFT = re.compile(rf'\$(?:\{{{_NAME}[^{{}}]*\}}|{_NAME}|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))')


def expand(word: str, scope: MutableMapping[str, str], exported: MutableMapping[str, str] | None = None) -> str:
    """One word with its expansions done from ``scope`` as inside double quotes (no splitting), each expansion
    once: a value that names itself (``PYTHONPATH=$PYTHONPATH:...``) is not expanded again. ``:=``/``=`` assign into
    ``scope`` (and into ``exported`` where the name is there). What is set nowhere stays as written."""
    from .bash.evaluator import Evaluator

    ev = Evaluator({k: v for k, v in scope.items()}, '<word>', None)
    out = ev.exp.dquoted(word)
    for name in ev.state.touched:
        v = ev.state.scalar(name)
        if v is not None and scope.get(name) != v:
            scope[name] = v
            if exported is not None and name in exported:
                exported[name] = v
    return out


def unresolved(word: str) -> list[str]:
    """The ``$VAR``/``${...}``/``$(...)`` references left in an expanded word (set nowhere the reader could see, or
    a command substitution that only running a program could give)."""
    return _LEFT.findall(word)


def unresolved_message(argv: list[str], source: str, error: str = '') -> str | None:
    """One line for a launch whose parse failed on a value still holding ``$VAR``: the variable could not be
    resolved (it is set neither earlier in the script nor in this environment), which is not the framework
    rejecting the argument. None when no word of ``argv`` that the error names (or, with no error text, no word
    at all) holds an unresolved reference."""
    for i, word in enumerate(argv):
        refs = unresolved(word)
        if not refs or (error and not any(r in error for r in refs)):
            continue
        flag = argv[i - 1] if i and argv[i - 1].startswith('-') and not word.startswith('-') else None
        what = f'{flag} {word}' if flag else word
        if all(r.startswith('$(') and not unresolved(r[2:]) for r in refs):  # a program's output, its words known
            return (
                f"{source}: {what}: {', '.join(refs)} is a program's output, which only running it gives; write "
                f'the value it prints in the script'
            )
        return (
            f'{source}: {what}: {", ".join(refs)} could not be resolved (set neither earlier in the script nor '
            f'in this environment), so its value is unknown here; export it before running the guard, or write '
            f'the value'
        )
    return None


# Integer arguments of ms-swift and TRL that decide nothing the guard plans (where a server listens, the seed, how
# often the trainer logs, saves or evaluates, timeouts): a value left unresolved there (`--vllm_server_port
# $((1000 + RANDOM % 7001))`) is read as 0 so the parsers accept the launch, and said in a note.
NEUTRAL_INT_ARGS = frozenset(
    {
        'port', 'master_port', 'main_process_port', 'vllm_server_port', 'vllm_group_port', 'group_port',
        'seed', 'data_seed', 'logging_steps', 'save_steps', 'eval_steps', 'save_total_limit',
        'vllm_server_timeout', 'ddp_timeout', 'dataloader_num_workers', 'dataset_num_proc',
    }
)  # fmt: skip


def neutral_stand_ins(argv: list[str], source: str) -> tuple[list[str], list[str]]:
    """(argv with each unresolved value of a NEUTRAL_INT_ARGS flag read as 0, a note per value so read)."""
    out, notes = list(argv), []
    for i, word in enumerate(argv):
        flag, eq, value = word.partition('=')
        if eq and flag.startswith('--') and unresolved(value):
            name, at = flag, i
        elif i and argv[i - 1].startswith('--') and '=' not in argv[i - 1] and unresolved(word):
            name, value, at = argv[i - 1], word, i
        else:
            continue
        if name.lstrip('-').replace('-', '_') not in NEUTRAL_INT_ARGS:
            continue
        out[at] = f'{name}=0' if eq else '0'
        notes.append(f'{source}: {name} {value} is not resolved here; it changes nothing planned (read as 0)')
    return out, notes
