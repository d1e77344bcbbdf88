"""The fields of an ms-swift Megatron argument dataclass, read with :mod:`ast` from a release's source tree (its
real parser imports megatron-core and needs CUDA). Used by ``scripts/gen_megatron_snapshot.py``; nothing here
imports ms-swift.

A class's fields are those of its dataclass bases in method-resolution order (C3, as Python computes it), each
``name: annotation [= default]`` at class level; the most derived definition of a name wins, as in
``dataclasses.fields``. Bases are found by the file's own imports, else by a unique ``class Name`` in the tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

_CLASS_CACHE: dict[Path, dict[str, tuple[Path, ast.ClassDef, ast.Module]]] = {}


def _index(root: Path) -> dict[str, list[tuple[Path, ast.ClassDef, ast.Module]]]:
    out: dict[str, list] = {}
    for p in sorted(root.rglob('*.py')):
        try:
            tree = ast.parse(p.read_text(encoding='utf-8'))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append((p, node, tree))
    return out


def _imported_from(tree: ast.Module, name: str, here: Path, root: Path) -> str | None:
    """The dotted module (relative to the package root's parent) a name is imported from in this file."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            if node.level:
                base = here.parent
                for _ in range(node.level - 1):
                    base = base.parent
                rel = base.relative_to(root.parent).as_posix().replace('/', '.')
                return f'{rel}.{node.module}' if node.module else rel
            return node.module
    return None


def _find(idx, root: Path, name: str, here: Path, tree: ast.Module):
    cands = idx.get(name, [])
    if not cands:
        return None
    same = [c for c in cands if c[0] == here]
    if same:
        return same[0]
    mod = _imported_from(tree, name, here, root)
    if mod:
        prefix = root.parent.joinpath(*mod.split('.'))
        near = [c for c in cands if c[0].with_suffix('') == prefix or prefix in c[0].parents]
        if len(near) >= 1:
            return near[0]
    if len(cands) == 1:
        return cands[0]
    raise ValueError(f'{here}: base class {name} is defined in several files: {[str(c[0]) for c in cands]}')


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == 'dataclass') or (
            isinstance(target, ast.Attribute) and target.attr == 'dataclass'
        ):
            return True
    return False


def _mro(idx, root, entry) -> list:
    """C3 linearisation over the classes found in the tree (bases outside it, like ``object``, drop out)."""
    path, node, tree = entry
    bases = []
    for b in node.bases:
        bname = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
        found = _find(idx, root, bname, path, tree) if bname else None
        if found is not None:
            bases.append(found)
    seqs = [_mro(idx, root, b) for b in bases] + [bases]
    out = [entry]

    def key(e):
        return e[0], e[1].name

    seqs = [list(s) for s in seqs if s]
    while seqs:
        for s in seqs:
            head = s[0]
            if not any(key(head) in [key(x) for x in t[1:]] for t in seqs):
                break
        else:
            raise ValueError(f'inconsistent MRO for {node.name}')
        out.append(head)
        seqs = [[x for x in t if key(x) != key(head)] for t in seqs]
        seqs = [t for t in seqs if t]
    return out


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _default(value: ast.expr | None) -> tuple[object, bool, bool]:
    """(default, known, init) of a field's right-hand side."""
    if value is None:
        return None, False, True
    if isinstance(value, ast.Call) and getattr(value.func, 'id', getattr(value.func, 'attr', None)) == 'field':
        kw = {k.arg: k.value for k in value.keywords}
        init = _literal(kw['init']) if 'init' in kw else True
        if 'default' in kw:
            return _literal(kw['default']), True, init is not False
        if 'default_factory' in kw:
            f = kw['default_factory']
            if isinstance(f, ast.Lambda):
                return _literal(f.body), True, init is not False
            if isinstance(f, ast.Name) and f.id in ('list', 'dict'):
                return ([] if f.id == 'list' else {}), True, init is not False
        return None, False, init is not False
    try:
        return ast.literal_eval(value), True, True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(value), False, True


def _kind(ann: str) -> tuple[str, list | None]:
    """(kind, choices) from an annotation: bool, int, float, str, list, dict, any; Literal choices."""
    node = ast.parse(ann, mode='eval').body
    choices = None

    def walk(n):
        nonlocal choices
        if isinstance(n, ast.Subscript):
            head = ast.unparse(n.value).split('.')[-1]
            if head == 'Literal':
                elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
                choices = [_literal(e) for e in elts]
                vals = [c for c in choices if c is not None]
                return 'int' if vals and all(isinstance(c, int) and not isinstance(c, bool) for c in vals) else 'str'
            if head in ('List', 'list', 'Tuple', 'tuple'):
                return 'list'
            if head in ('Dict', 'dict'):
                return 'dict'
            if head == 'Optional':
                return walk(n.slice)
            if head == 'Union':
                kinds = [walk(e) for e in n.slice.elts]
                kinds = [k for k in kinds if k != 'none']
                if 'list' in kinds:
                    return 'list'
                return kinds[0] if len(set(kinds)) == 1 else ('str' if 'str' in kinds else kinds[0])
        name = ast.unparse(n).split('.')[-1]
        return {
            'bool': 'bool',
            'int': 'int',
            'float': 'float',
            'str': 'str',
            'None': 'none',
            'dict': 'dict',
            'list': 'list',
        }.get(name, 'str')

    return walk(node), choices


def dataclass_fields(root: Path, module_file: Path, class_name: str) -> dict[str, dict]:
    """name -> {type, kind, default, choices, defined_in} for every init field of ``class_name``."""
    root = Path(root)
    idx = _CLASS_CACHE.get(root)
    if idx is None:
        idx = _CLASS_CACHE[root] = _index(root)
    tree = ast.parse(Path(module_file).read_text(encoding='utf-8'))
    entry = next(
        ((Path(module_file), n, tree) for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None
    )
    if entry is None:
        raise ValueError(f'{module_file}: no class {class_name}')
    # match the index's node objects (same file parsed once)
    entry = next(c for c in idx[class_name] if c[0] == Path(module_file))
    out: dict[str, dict] = {}
    for path, node, _ in reversed(_mro(idx, root, entry)):
        if not _is_dataclass(node):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            ann = ast.unparse(stmt.annotation)
            if ann.startswith(('ClassVar', 'typing.ClassVar')):
                continue
            default, known, init = _default(stmt.value)
            name = stmt.target.id
            if not init:
                out.pop(name, None)
                continue
            kind, choices = _kind(ann)
            out.pop(name, None)  # a redefinition keeps the base's position in dataclasses; order is not used
            out[name] = {
                'type': ann,
                'kind': kind,
                'default': default if known else None,
                'default_known': known,
                'choices': choices,
                'defined_in': f'{path.relative_to(root.parent).as_posix()}::{node.name}',
            }
    return out
