"""A bash launcher script read as bash reads it, without running anything.

    syntax.py     tree-sitter-bash (MIT): the script's grammar -> a syntax tree; CRLF and ``<PLACEHOLDER>`` handling
    command.py    Command: one simple command bash would run, its argv, environment and what could not be resolved
    state.py      the shell's variables (scalars, arrays, exported, locals), functions, positional parameters, cwd
    braces.py     brace expansion (``{a,b}``, ``{1..5}``), the first of a word's expansions
    expand.py     a word -> its fields: quoting, parameter expansion (bash(1) "Parameter Expansion"), arithmetic,
                  command substitution, word splitting at IFS whitespace, pathname expansion against the files
                  here; every expansion is done once
    arith.py      ``$((...))`` with bash's integer semantics
    pure.py       the commands whose output a command substitution may use (echo, printf, expr, dirname, ...)
    conditions.py ``[ ... ]``, ``test``, ``[[ ... ]]`` decided from known values (or not decided)
    evaluator.py  walks the tree: lists, pipelines, if/case/for/while, functions, bash -c, wrappers, $(...)
    builtins.py   export/declare/local/readonly, unset, cd, source, eval, set --, shift, exit/return, test, getopts
    comments.py   ``# swift rollout ...`` blocks read as commented commands; ``Command.above``
    control.py    exit/return/break/continue; what a command substitution collects

Nothing is executed: a value that only running something could give (``$(nvidia-smi ...)``, ``$RANK`` set by a
scheduler) stays in the word as written and is named in ``Command.unresolved``. Every walk is bounded
(:class:`evaluator.Limits`); past a bound the reader raises GuardError naming the script and line.
"""

from .command import Command
from .evaluator import Limits, evaluate_script

__all__ = ['Command', 'Limits', 'evaluate_script']
