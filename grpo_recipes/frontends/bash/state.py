"""The shell's state while the evaluator walks a script: variables (strings, or indexed arrays as dicts), which are
exported, which the script itself set (those reach :attr:`Command.env`), what each value still holds unresolved
(a value copied from ``$RANK`` carries ``$RANK``), functions, positional parameters, ``local`` frames, the cwd."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass
class State:
    vars: dict[str, Any] = field(default_factory=dict)
    """name -> str, or dict[int, str] for an indexed array."""
    exported: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    """Variables the script assigned or exported (the caller's environment holds the others)."""
    taint: dict[str, list[str]] = field(default_factory=dict)
    """name -> what its value holds unresolved."""
    set_line: dict[str, int] = field(default_factory=dict)
    funcs: dict[str, Any] = field(default_factory=dict)
    positional: list[str] = field(default_factory=list)
    arg0: str = 'bash'
    cwd: str | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)
    known_unset: set[str] = field(default_factory=set)
    """Variables the script unset: bash gives '' for them, and so does the reader."""
    sources: list[str] = field(default_factory=list)
    """BASH_SOURCE, innermost first."""
    status: int | None = 0
    refs: dict[str, str] = field(default_factory=dict)
    """Namerefs (``local -n R=NAME`` / ``declare -n``): R -> NAME; reading or assigning R is NAME's."""
    defaulted: dict[str, list[str]] = field(default_factory=dict)
    """name -> the script arguments and the variables set nowhere here whose default its value holds (``OUT=${2:-x}``
    with the arguments not given); ``@``: those a function's arguments hold. The value is used as written; a test of
    it is decided from it, but not into a branch that leaves before the launch (Evaluator._leaves)."""
    assoc: set[str] = field(default_factory=set)
    """Associative arrays (``declare -A M``): subscripts are words, not arithmetic."""
    args_unknown: bool = False
    """The script's own arguments were not given: ``$1`` at its top level is not resolved (``$#`` is 0, ``$@``
    empty: a caller appends the arguments it has to the launch itself)."""

    def copy(self) -> 'State':
        new = copy.copy(self)
        new.vars = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.vars.items()}
        new.exported, new.touched, new.known_unset = set(self.exported), set(self.touched), set(self.known_unset)
        new.taint, new.set_line, new.funcs = dict(self.taint), dict(self.set_line), dict(self.funcs)
        new.refs, new.defaulted, new.assoc = dict(self.refs), dict(self.defaulted), set(self.assoc)
        new.positional, new.frames, new.sources = (
            list(self.positional),
            [dict(f) for f in self.frames],
            list(self.sources),
        )
        return new

    def arg_taint(self) -> dict[str, list[str]]:
        """What the positional parameters hold unresolved: ``@`` (all of them) and ``@K`` (``$K``'s own)."""
        return {k: v for k, v in self.taint.items() if k.startswith('@')}

    def set_arg_taint(self, held: dict[str, list[str]]) -> None:
        for key in [k for k in self.taint if k.startswith('@')]:
            del self.taint[key]
        self.taint.update(held)

    def resolve(self, name: str) -> str:
        """The variable a name stands for, through namerefs (bash stops a circular chain; so does this)."""
        seen = set()
        while name in self.refs and name not in seen:
            seen.add(name)
            name = self.refs[name]
        return name

    def get(self, name: str) -> Any:
        return self.vars.get(self.resolve(name))

    def is_known(self, name: str) -> bool:
        return name in self.vars or name in self.known_unset

    def assign(
        self,
        name: str,
        value: Any,
        line: int,
        taint: list[str] | None = None,
        index: int | None = None,
        append: bool = False,
        defaults: list[str] | None = None,
    ) -> None:
        """``name=value`` / ``name+=value`` / ``name[index]=value`` / ``name=(...)`` (value a dict)."""
        name = self.resolve(name)
        old = self.vars.get(name)
        if isinstance(value, dict):
            if append:
                base = dict(old) if isinstance(old, dict) else ({0: old} if isinstance(old, str) else {})
                start = max(base) + 1 if base else 0
                for k, v in sorted(value.items()):
                    base[start + k] = v
                value = base
        elif index is not None:
            arr = dict(old) if isinstance(old, dict) else ({0: old} if isinstance(old, str) else {})
            arr[index] = (arr.get(index, '') + value) if append else value
            value = arr
        elif isinstance(old, dict):
            arr = dict(old)
            arr[0] = (arr.get(0, '') + value) if append else value
            value = arr
        elif append and isinstance(old, str):
            value = old + value
        self.vars[name] = value
        self.known_unset.discard(name)
        self.touched.add(name)
        self.set_line[name] = line
        for store, new in ((self.taint, taint), (self.defaulted, defaults)):
            prior = store.get(name, []) if append else []  # `A+=x` keeps what A held
            held = prior + [t for t in (new or []) if t not in prior]
            if held:
                store[name] = held
            else:
                store.pop(name, None)

    def unset(self, name: str) -> None:
        self.vars.pop(name, None)
        self.exported.discard(name)
        self.taint.pop(name, None)
        self.defaulted.pop(name, None)
        self.known_unset.add(name)
        self.touched.add(name)

    def declare_local(self, name: str) -> None:
        if self.frames and name not in self.frames[-1]:
            self.frames[-1][name] = self._snapshot(name)
            self.frames[-1].setdefault(('ref', name), self.refs.get(name))

    def declare_ref(self, name: str, target: str) -> None:
        """``declare -n name=target`` (a local one undone when its function returns, see :meth:`pop_frame`)."""
        self.refs[name] = target

    def _snapshot(self, name: str) -> tuple:
        v = self.vars.get(name)
        return (
            name in self.vars,
            dict(v) if isinstance(v, dict) else v,
            name in self.exported,
            list(self.taint.get(name, [])),
            name in self.known_unset,
        )

    def pop_frame(self) -> None:
        frame = self.frames.pop()
        for key, target in [(k, v) for k, v in frame.items() if isinstance(k, tuple)]:
            frame.pop(key)
            if target is None:
                self.refs.pop(key[1], None)
            else:
                self.refs[key[1]] = target
        for name, (present, value, exported, taint, unset) in frame.items():
            if present:
                self.vars[name] = value
            else:
                self.vars.pop(name, None)
            (self.exported.add if exported else self.exported.discard)(name)
            if taint:
                self.taint[name] = taint
            else:
                self.taint.pop(name, None)
            (self.known_unset.add if unset else self.known_unset.discard)(name)

    def scalar(self, name: str) -> str | None:
        v = self.vars.get(self.resolve(name))
        if isinstance(v, dict):
            return v.get(0)
        return v

    def env(self) -> dict[str, str]:
        """The exported variables the script set (what it adds to the caller's environment)."""
        out = {}
        names = self.exported & self.touched
        for name in [n for n in self.set_line if n in names] + sorted(names - set(self.set_line)):  # as set
            v = self.scalar(name)
            if v is not None:
                out[name] = v
        return out
