"""YAML and JSON config text loaded with bounds, so that no input makes the guard hang or overflow the stack.

PyYAML loads an alias as a second reference to the anchored node, so a "billion laughs" file (each level a list
of aliases to the level below) loads in microseconds and expands without bound only when something walks or
serialises it (the launch's argv, ``json.dumps``). A list nested 10,000 deep overflows PyYAML's recursive composer
(or ``json.loads``) with a RecursionError. Both are refused here with the line of the offending node, as the
parsers' own errors: ``yaml.YAMLError`` with a ``problem_mark`` and ``json.JSONDecodeError``, which the readers
already turn into one line.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

MAX_DEPTH = 100
"""Containers inside containers: no ms-swift or TRL argument nests more than a few levels."""
MAX_NODES = 100_000
"""Scalars and containers once every alias is expanded: a config has hundreds."""


class BoundedYAMLError(yaml.MarkedYAMLError):
    """A bounded-load refusal, at the node where it happens (``problem``, ``problem_mark``)."""


def _refuse(problem: str, mark) -> BoundedYAMLError:
    return BoundedYAMLError(problem=problem, problem_mark=mark)


class _Loader(yaml.SafeLoader):
    depth = 0

    def compose_node(self, parent, index):  # recursive in PyYAML: bound it before Python's stack is spent
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _refuse(
                    f'nested deeper than {MAX_DEPTH} levels; a config is a flat mapping of arguments',
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def safe_load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing nesting deeper than MAX_DEPTH, more than MAX_NODES nodes once aliases are
    expanded, and an alias inside the node it names (a cycle)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expanded(root) -> None:
    """Count the nodes of the composed document as if every alias were copied out, each shared node once (memoised),
    so the count costs the file's size, not the expansion's."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            size[key] = 1
            continue
        children = [c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode) else list(node.value)
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > MAX_NODES:
                raise _refuse(
                    f'expands to more than {MAX_NODES:,} values once its aliases (*name) are copied out; '
                    f'write the values out, or use fewer aliases',
                    node.start_mark,
                )
            continue
        if key in size:
            continue
        if key in open_:
            raise _refuse(
                'an alias refers to a node that contains it (a cycle); no argument value can be infinite',
                node.start_mark,
            )
        open_.add(key)
        stack.append((node, True))
        for c in children:
            if id(c) in open_:
                raise _refuse(
                    'an alias refers to a node that contains it (a cycle); no argument value can be infinite',
                    c.start_mark,
                )
            if id(c) not in size:
                stack.append((c, False))


def loads_json(text: str) -> Any:
    """``json.loads(text)``, refusing nesting deeper than MAX_DEPTH (json's scanner recurses) as a JSONDecodeError at
    the bracket that goes one level too deep."""
    depth, in_string, escaped = 0, False, False
    for pos, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == '\\':
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in '[{':
            depth += 1
            if depth > MAX_DEPTH:
                raise json.JSONDecodeError(
                    f'nested deeper than {MAX_DEPTH} levels; a config is a flat mapping of arguments', text, pos
                )
        elif ch in ']}':
            depth -= 1
    return json.loads(text)
