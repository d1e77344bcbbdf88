#!/usr/bin/env python3
"""Write grpo_recipes/frontends/swift/releases.json: the ``swift rlhf`` arguments of every ms-swift 3.x and 4.x minor
release (its newest patch on PyPI), read from each release's own source with ``ast``; nothing is installed or imported.

For each release: ``pip download ms-swift==X --no-deps`` (the wheel, into a cache outside the repository), then
``RLHFArguments`` (swift/llm/argument/rlhf_args.py in 3.x, swift/arguments/rlhf_args.py in 4.x) and every base class
and mixin it has, followed through the imports (ms-swift's and transformers' lazy ``__init__`` files included) into
transformers' ``TrainingArguments``/``Seq2SeqTrainingArguments``. transformers is the newest release the ms-swift
release's own ``Requires-Dist`` allows (``transformers<4.58`` for 3.12 -> 4.57.6), downloaded the same way.

The fields are collected as ``dataclasses.fields`` orders them (the MRO, reversed; a field a subclass redeclares
keeps its place and takes the new default; ``init=False`` fields are left out) and turned into argparse options as
transformers' ``HfArgumentParser._parse_dataclass_field`` does (``--name`` and ``--name-with-dashes``, metadata
aliases, Literal/Enum choices, bool ``nargs='?'`` and the ``--no_name`` complement when the default is True,
``nargs='+'`` for lists). Defaults are kept where they are literals.

The output is compact: the first release in full, each later one as the fields it adds or changes and the names it
drops. ``grpo_recipes.swift_args.release_snapshot`` expands it back into the argparse entries
``swift_args_snapshot.json`` holds.

    python scripts/gen_swift_release_snapshots.py                 # download what is missing, rewrite the JSON
    python scripts/gen_swift_release_snapshots.py --check         # exit 1 if the JSON drifted
    python scripts/gen_swift_release_snapshots.py --installed     # the installed ms-swift's fields, as JSON

tests/test_swift_releases.py is the differential test: this extraction run on the installed ms-swift 4.6 and
transformers must give exactly the argparse options of ms-swift's own parser (swift_args_snapshot.json), and the 3.10
entry must give the options of ms-swift 3.10.3's real parser (swift_args_snapshot_3.10.json).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / 'grpo_recipes' / 'frontends' / 'swift' / 'releases.json'
CACHE = Path(os.environ.get('GRPO_SWIFT_RELEASE_CACHE', Path.home() / '.cache' / 'grpo-recipes' / 'swift-releases'))
MAJORS = (3, 4)


# ---------------------------------------------------------------- sources: a wheel or an installed package


class Source:
    """Python files of one or more top-level packages, by dotted module name."""

    def __init__(self):
        self.files: dict[str, str] = {}
        self._trees: dict[str, ast.Module] = {}

    def add_wheel(self, path: Path, package: str) -> 'Source':
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.startswith(package + '/') and name.endswith('.py'):
                    self._add(name, z.read(name).decode('utf-8'))
        return self

    def add_dir(self, site: Path, package: str) -> 'Source':
        for p in (site / package).rglob('*.py'):
            self._add(str(p.relative_to(site)), p.read_text(encoding='utf-8'))
        return self

    def _add(self, rel: str, text: str) -> None:
        mod = rel[:-3].replace('/', '.')
        if mod.endswith('.__init__'):
            mod = mod[:-9]
        self.files[mod] = text

    def is_package(self, mod: str) -> bool:
        return any(m.startswith(mod + '.') for m in self.files)

    def tree(self, mod: str) -> ast.Module | None:
        if mod not in self.files:
            return None
        if mod not in self._trees:
            self._trees[mod] = ast.parse(self.files[mod])
        return self._trees[mod]


def _absolute(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ''
    parts = mod.split('.')
    base = parts if is_pkg else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return '.'.join(base + ([node.module] if node.module else []))


class Resolver:
    """Finds the ClassDef a name means in a module, following imports, re-exports and lazy ``_import_structure``
    tables (ms-swift's and transformers' ``__init__`` files)."""

    def __init__(self, src: Source):
        self.src = src

    def find(self, mod: str, name: str, seen=None):
        seen = set() if seen is None else seen
        if (mod, name) in seen:
            return None
        seen.add((mod, name))
        tree = self.src.tree(mod)
        if tree is None:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return mod, node
        is_pkg = self.src.is_package(mod)
        for node in ast.walk(tree):  # imports at any depth: `if TYPE_CHECKING:` blocks, try/except
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = _absolute(mod, node, is_pkg)
                        found = self.find(target, alias.name, seen) or self.find(
                            f'{target}.{alias.name}', alias.name, seen
                        )
                        if found:
                            return found
        for node in ast.walk(tree):  # _import_structure = {'submodule': ['Name', ...]}
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if (
                        isinstance(k, ast.Constant)
                        and isinstance(k.value, str)
                        and isinstance(v, (ast.List, ast.Tuple))
                    ):
                        if any(isinstance(e, ast.Constant) and e.value == name for e in v.elts):
                            found = self.find(f'{mod}.{k.value}', name, seen)
                            if found:
                                return found
        return None

    def base_ref(self, mod: str, expr: ast.expr):
        """(module, ClassDef) of a base-class expression, or None for object/Generic/unresolvable."""
        if isinstance(expr, ast.Name):
            return self.find(mod, expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            tree = self.src.tree(mod)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if (alias.asname or alias.name) == expr.value.id:
                            return self.find(alias.name, expr.attr)
        return None


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == 'dataclass') or (
            isinstance(target, ast.Attribute) and target.attr == 'dataclass'
        ):
            return True
    return False


IGNORED_BASES = {'object', 'Generic', 'ABC', 'Enum', 'str', 'int'}


def mro(res: Resolver, mod: str, node: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
    """C3 linearisation, as Python computes ``__mro__`` (bases that are not classes of the sources are left out)."""
    bases = []
    for b in node.bases:
        if isinstance(b, ast.Name) and b.id in IGNORED_BASES:
            continue
        if isinstance(b, ast.Subscript):  # Generic[T]
            continue
        ref = res.base_ref(mod, b)
        if ref is None:
            raise SystemExit(f'{mod}.{node.name}: base {ast.unparse(b)} not found in the sources')
        bases.append(ref)
    seqs = [mro(res, *b) for b in bases] + [bases]
    out = [(mod, node)]
    key = lambda r: (r[0], r[1].name)  # noqa: E731
    seqs = [[key(x) for x in s] for s in seqs]
    by_key = {key((mod, node)): (mod, node)}
    for b in bases:
        for x in mro(res, *b):
            by_key[key(x)] = x
    while any(seqs):
        for s in seqs:
            if not s:
                continue
            head = s[0]
            if not any(head in t[1:] for t in seqs):
                break
        else:
            raise SystemExit(f'{mod}.{node.name}: no consistent MRO')
        out.append(by_key[head])
        seqs = [[x for x in t if x != head] for t in seqs]
    return out


# ---------------------------------------------------------------- fields -> argparse options


def _literal(node):
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _kw(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_field_call(v) -> bool:
    return isinstance(v, ast.Call) and (
        (isinstance(v.func, ast.Name) and v.func.id == 'field')
        or (isinstance(v.func, ast.Attribute) and v.func.attr == 'field')
    )


def own_fields(node: ast.ClassDef) -> list[dict]:
    """A dataclass's own annotated fields, in order: name, annotation, default (literal or not), init, aliases."""
    out = []
    for st in node.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
            continue
        ann = st.annotation
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            ann = ast.parse(ann.value, mode='eval').body
        text = ast.unparse(ann)
        if re.match(r'^(typing\.)?(ClassVar|InitVar)\b', text) or text.startswith(('dataclasses.InitVar', 'KW_ONLY')):
            continue
        f = {'name': st.target.id, 'ann': ann, 'init': True, 'aliases': [], 'has_default': st.value is not None}
        v = st.value
        if _is_field_call(v):
            init = _kw(v, 'init')
            if isinstance(init, ast.Constant) and init.value is False:
                f['init'] = False
            meta = _kw(v, 'metadata')
            if isinstance(meta, ast.Dict):
                for k, mv in zip(meta.keys, meta.values):
                    if isinstance(k, ast.Constant) and k.value == 'aliases':
                        ok, al = _literal(mv)
                        f['aliases'] = [al] if isinstance(al, str) else list(al or [])
                    if isinstance(k, ast.Constant) and k.value == 'choices':
                        f['choices_node'] = mv
            d, fac = _kw(v, 'default'), _kw(v, 'default_factory')
            if d is not None:
                f['default_node'] = d
            elif fac is not None:
                f['factory'] = fac
            else:
                f['has_default'] = False
        elif v is not None:
            f['default_node'] = v
        out.append(f)
    return out


def collect_fields(res: Resolver, mod: str, cls: ast.ClassDef) -> list[dict]:
    """``dataclasses.fields(cls)``: the MRO reversed, dataclasses only; a redeclared field keeps its place."""
    fields: dict[str, dict] = {}
    for m, node in reversed(mro(res, mod, cls)):
        if not _is_dataclass(node):
            continue
        for f in own_fields(node):
            f['module'] = m
            fields[f['name']] = f  # dict keeps the first position, takes the new value
    return [f for f in fields.values() if f['init']]


def _unwrap_optional(ann: ast.expr) -> tuple[ast.expr, bool, list]:
    """(the type HfArgumentParser uses, Optional?, the Union members) for Optional[X] / Union[X, None] / X | None /
    Union[X, str]."""
    members = None
    if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ('Optional', 'typing.Optional'):
        return ann.slice, True, [ann.slice, ast.Constant(None)]
    if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ('Union', 'typing.Union'):
        members = list(ann.slice.elts) if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    elif isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        members, stack = [], [ann]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                stack += [n.right, n.left]
            else:
                members.append(n)
    if members is None:
        return ann, False, [ann]
    is_none = [
        isinstance(m, ast.Constant) and m.value is None or ast.unparse(m) in ('None', 'NoneType', 'type(None)')
        for m in members
    ]
    names = [ast.unparse(m) for m in members]
    if not any(is_none):  # Union[X, str]: HfArgumentParser keeps the one that is not str
        return (members[0] if names[1] == 'str' else members[1]), False, members
    rest = [m for m, n in zip(members, is_none) if not n]
    if any(ast.unparse(m) == 'bool' for m in rest):
        return ast.parse('bool', mode='eval').body, True, members  # Optional[bool]: kept, treated as bool
    return rest[0], True, members


def _enum_values(res: Resolver, mod: str, name_expr: ast.expr):
    ref = res.base_ref(mod, name_expr)
    if ref is None:
        return None
    m, node = ref
    bases = {ast.unparse(b).split('.')[-1] for b in node.bases}
    if not bases & {'Enum', 'ExplicitEnum', 'StrEnum', 'IntEnum'}:
        # an enum of an enum: follow one level
        for b in node.bases:
            sub = res.base_ref(m, b)
            if sub is not None and {ast.unparse(x).split('.')[-1] for x in sub[1].bases} & {'Enum', 'ExplicitEnum'}:
                break
        else:
            return None
    vals = []
    for st in node.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            ok, v = _literal(st.value)
            if ok and not st.targets[0].id.startswith('_'):
                vals.append(v)
    return vals


def option(res: Resolver, f: dict) -> list[dict]:
    """The argparse entries HfArgumentParser adds for one field, in swift_args_snapshot.json's schema."""
    name, mod = f['name'], f['module']
    flags = [f'--{name}'] + ([f'--{name.replace("_", "-")}'] if '_' in name else []) + f['aliases']
    t, optional, _ = _unwrap_optional(f['ann'])
    default, literal = None, True
    if 'default_node' in f:
        literal, default = _literal(f['default_node'])
        if not literal and isinstance(f['default_node'], ast.Attribute):  # an Enum member: its value
            vals = _enum_member(res, mod, f['default_node'])
            if vals is not None:
                literal, default = True, vals
    elif 'factory' in f:
        fac = f['factory']
        if isinstance(fac, ast.Lambda):
            literal, default = _literal(fac.body)
        elif isinstance(fac, ast.Name) and fac.id in ('list', 'dict', 'tuple', 'set'):
            default = {'list': [], 'dict': {}, 'tuple': [], 'set': []}[fac.id]
        else:
            literal = False
    if isinstance(default, tuple):
        default = list(default)
    entry = {'dest': name, 'flags': flags, 'action': 'store'}
    head = ast.unparse(t.value) if isinstance(t, ast.Subscript) else ast.unparse(t)
    head = head.split('.')[-1]
    nargs, const, choices, required, tname = None, None, None, False, 'str'
    neg = False
    if head == 'Literal':
        elts = t.slice.elts if isinstance(t.slice, ast.Tuple) else [t.slice]
        choices = [ast.literal_eval(e) for e in elts]
        tname = 'choice'
        required = not f['has_default']
    elif head == 'bool':
        tname = 'bool'
        if not optional or (f['has_default'] and not (literal and default is None)):
            default = False if not f['has_default'] else default
            nargs, const = '?', True
        neg = f['has_default'] and literal and default is True
    elif head in ('List', 'list', 'Sequence', 'Tuple', 'tuple') and isinstance(t, ast.Subscript):
        inner = t.slice.elts[0] if isinstance(t.slice, ast.Tuple) else t.slice
        tname = {'int': 'int', 'float': 'float', 'str': 'str'}.get(ast.unparse(inner), 'str')
        nargs = '+'
        required = not f['has_default']
        if 'factory' not in f:  # HfArgumentParser takes a list's default from default_factory only
            default, literal = None, True
    else:
        vals = _enum_values(res, mod, t) if isinstance(t, (ast.Name, ast.Attribute)) else None
        if vals is not None:
            tname, choices = 'choice', vals
            required = not f['has_default']
        else:
            tname = head if head in ('int', 'float', 'str') else 'str'
            required = not f['has_default']
    entry.update(type=tname, nargs=nargs, default=default if literal else None)
    if not literal:
        entry['default_expr'] = ast.unparse(f.get('default_node') or f['factory'])[:80]
    if 'choices_node' in f:  # metadata={'choices': ...}: argparse's own choices
        choices = Evaluator(res).value(mod, f['choices_node'])
    if choices is not None:
        entry['choices'] = choices
    if const is not None:
        entry['const'] = const
    if required:
        entry['required'] = True
    out = [entry]
    if neg:
        out.append(
            {
                'dest': name,
                'flags': [f'--no_{name}', f'--no-{name.replace("_", "-")}'],
                'action': 'store_false',
                'type': 'str',
                'nargs': 0,
                'default': False,
                'const': False,
            }
        )
    return out


class Evaluator:
    """The value of a module-level expression where it is built from literals: names bound at module level (here or
    imported), ``dict(**a, k=v)``, ``.copy()``, ``.keys()``, and a function whose body returns such a name
    (transformers' ``trainer_log_levels.keys()``)."""

    def __init__(self, res: Resolver):
        self.res = res

    def name(self, mod: str, name: str, depth: int = 0):
        tree = self.res.src.tree(mod)
        if tree is None or depth > 6:
            raise ValueError(name)
        for st in tree.body:
            if isinstance(st, ast.Assign) and any(getattr(t, 'id', None) == name for t in st.targets):
                return self.value(mod, st.value, depth + 1)
            if isinstance(st, ast.FunctionDef) and st.name == name:
                return ('function', mod, st)
        is_pkg = self.res.src.is_package(mod)
        for st in tree.body:
            if isinstance(st, ast.ImportFrom):
                for alias in st.names:
                    if (alias.asname or alias.name) == name:
                        return self.name(_absolute(mod, st, is_pkg), alias.name, depth + 1)
        raise ValueError(name)

    def module_of(self, mod: str, name: str) -> str | None:
        tree = self.res.src.tree(mod)
        is_pkg = self.res.src.is_package(mod)
        for st in tree.body:
            if isinstance(st, ast.ImportFrom):
                for alias in st.names:
                    if (alias.asname or alias.name) == name:
                        target = _absolute(mod, st, is_pkg)
                        return f'{target}.{alias.name}' if f'{target}.{alias.name}' in self.res.src.files else None
        return None

    def value(self, mod: str, node: ast.expr, depth: int = 0):
        try:
            ok, v = _literal(node)
            if ok:
                return v
            if isinstance(node, ast.Name):
                return self.name(mod, node.id, depth)
            if isinstance(node, ast.Dict) and None not in node.keys:  # keys are what choices need
                return {ast.literal_eval(k): self.value(mod, v, depth + 1) for k, v in zip(node.keys, node.values)}
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id == 'dict':
                    out = {}
                    for k in node.keywords:
                        if k.arg is None:
                            out.update(self.value(mod, k.value, depth + 1))
                        else:
                            out[k.arg] = self.value(mod, k.value, depth + 1)
                    return out
                if isinstance(f, ast.Attribute) and f.attr in ('copy', 'keys') and not node.args:
                    base = self.value(mod, f.value, depth + 1)
                    return list(base) if f.attr == 'keys' else dict(base)
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):  # module.function()
                    sub = self.module_of(mod, f.value.id)
                    if sub is not None:
                        fn = self.name(sub, f.attr, depth + 1)
                        if isinstance(fn, tuple) and fn[0] == 'function':
                            ret = next(s for s in fn[2].body if isinstance(s, ast.Return))
                            return self.value(fn[1], ret.value, depth + 1)
        except (ValueError, StopIteration, TypeError):
            return None
        return None


def _enum_member(res: Resolver, mod: str, node: ast.Attribute):
    """``IntervalStrategy.NO`` -> 'no' (a default that names an Enum member)."""
    if not isinstance(node.value, (ast.Name, ast.Attribute)):
        return None
    ref = res.base_ref(mod, node.value)
    if ref is None:
        return None
    for st in ref[1].body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and getattr(st.targets[0], 'id', None) == node.attr:
            ok, v = _literal(st.value)
            return v if ok else None
    return None


RLHF_MODULES = ('swift.arguments.rlhf_args', 'swift.llm.argument.rlhf_args')


def extract(src: Source) -> list[dict]:
    """Every argparse entry ``HfArgumentParser([RLHFArguments])`` builds, read from the sources."""
    res = Resolver(src)
    for mod in RLHF_MODULES:
        found = res.find(mod, 'RLHFArguments')
        if found:
            break
    else:
        raise SystemExit('RLHFArguments not found (swift/arguments/rlhf_args.py, swift/llm/argument/rlhf_args.py)')
    entries = []
    for f in collect_fields(res, *found):
        entries += option(res, f)
    return entries


# ---------------------------------------------------------------- PyPI: releases, pins, downloads


def pip(*args: str) -> str:
    proc = subprocess.run([sys.executable, '-m', 'pip', *args], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f'pip {" ".join(args)} failed: {proc.stderr.strip().splitlines()[-1:]}')
    return proc.stdout


def versions_on_pypi(name: str) -> list[str]:
    out = pip('index', 'versions', name)
    m = re.search(r'Available versions: (.*)', out)
    return [v.strip() for v in m.group(1).split(',')] if m else []


def newest_per_minor(versions: list[str]) -> list[str]:
    from packaging.version import Version

    best: dict[tuple, Version] = {}
    for v in versions:
        pv = Version(v)
        if pv.is_prerelease or pv.release[0] not in MAJORS:
            continue
        key = pv.release[:2]
        if key not in best or pv > best[key]:
            best[key] = pv
    return [str(best[k]) for k in sorted(best)]


def wheel(name: str, version: str) -> Path:
    dist = name.replace('-', '_')
    found = sorted(CACHE.glob(f'{dist}-{version}-*.whl'))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        pip('download', f'{name}=={version}', '--no-deps', '--only-binary=:all:', '-d', str(CACHE), '-q')
        found = sorted(CACHE.glob(f'{dist}-{version}-*.whl'))
    if not found:
        raise SystemExit(f'{name}=={version}: no wheel downloaded into {CACHE}')
    return found[0]


def transformers_for(swift_wheel: Path, available: list[str]) -> str:
    """The newest transformers the release's own Requires-Dist allows."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    with zipfile.ZipFile(swift_wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith('.dist-info/METADATA'))
        text = z.read(meta).decode()
    for line in text.splitlines():
        if line.startswith('Requires-Dist: transformers') and 'extra ==' not in line:
            req = Requirement(line.split(':', 1)[1].strip())
            if req.name == 'transformers':
                ok = [Version(v) for v in available if not Version(v).is_prerelease and Version(v) in req.specifier]
                return str(max(ok))
    raise SystemExit(f'{swift_wheel.name}: no transformers requirement')


# ---------------------------------------------------------------- compact form


def spec(entries: list[dict]) -> dict[str, dict]:
    """Entries by dest, without what a reader derives (the flags from the name, the --no_ complement)."""
    out = {}
    for e in entries:
        if e['action'] == 'store_false':
            out[e['dest']]['neg'] = 1
            continue
        s = {
            k: e[k]
            for k in ('type', 'nargs', 'default', 'choices', 'const', 'required', 'default_expr')
            if k in e and e[k] is not None
        }
        s.pop('const', None) if s.get('type') == 'bool' else None  # bool with nargs '?' always has const True
        if s.get('type') == 'str':
            s.pop('type')
        extra = [f for f in e['flags'] if f not in (f'--{e["dest"]}', f'--{e["dest"].replace("_", "-")}')]
        if extra:
            s['aliases'] = extra
        out[e['dest']] = s
    return out


def build(releases: list[str] | None = None) -> dict:
    swift_versions = releases or newest_per_minor(versions_on_pypi('ms-swift'))
    tf_available = versions_on_pypi('transformers')
    out, prev = [], None
    for v in swift_versions:
        sw = wheel('ms-swift', v)
        tf = transformers_for(sw, tf_available)
        src = Source().add_wheel(sw, 'swift').add_wheel(wheel('transformers', tf), 'transformers')
        cur = spec(extract(src))
        rel = {'ms_swift': v, 'transformers': tf}
        if prev is None:
            rel['fields'] = cur
        else:
            rel['changed'] = {k: s for k, s in cur.items() if prev.get(k) != s}
            rel['dropped'] = sorted(k for k in prev if k not in cur)
        out.append(rel)
        prev = cur
        print(f'ms-swift {v} (transformers {tf}): {len(cur)} fields', file=sys.stderr)
    return {
        'generated_by': 'scripts/gen_swift_release_snapshots.py',
        'about': "swift rlhf arguments per ms-swift minor release (newest patch), read from the release's source "
        'with ast; the first release in full, then what each release changes',
        'releases': out,
    }


def render(data: dict) -> str:
    """One line per release field: reviewable diffs, a small file."""
    lines = [
        '{',
        f' "generated_by": {json.dumps(data["generated_by"])},',
        f' "about": {json.dumps(data["about"])},',
        ' "releases": [',
    ]
    for i, rel in enumerate(data['releases']):
        lines.append(
            f'  {{"ms_swift": {json.dumps(rel["ms_swift"])}, "transformers": {json.dumps(rel["transformers"])},'
        )
        key = 'fields' if 'fields' in rel else 'changed'
        items = [f'    {json.dumps(k)}: {json.dumps(v, sort_keys=True)}' for k, v in sorted(rel[key].items())]
        body = ',\n'.join(items)
        lines.append(
            f'   "{key}": {{' + ('\n' + body + '\n   ' if items else '') + '}' + (',' if key == 'changed' else '')
        )
        if key == 'changed':
            lines.append(f'   "dropped": {json.dumps(rel["dropped"])}')
        lines.append('  }' + (',' if i < len(data['releases']) - 1 else ''))
    lines += [' ]', '}']
    return '\n'.join(lines) + '\n'


def installed() -> list[dict]:
    """The extraction run on the installed ms-swift and transformers (the differential test's input)."""
    import importlib.util

    site = Path(importlib.util.find_spec('swift').submodule_search_locations[0]).parent
    tsite = Path(importlib.util.find_spec('transformers').submodule_search_locations[0]).parent
    return extract(Source().add_dir(site, 'swift').add_dir(tsite, 'transformers'))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--check', action='store_true', help='compare with the checked-in file; exit 1 on drift')
    ap.add_argument('--installed', action='store_true', help="print the installed ms-swift's entries as JSON")
    ap.add_argument('--output', type=Path, default=OUTPUT)
    ap.add_argument('--release', action='append', help='only these ms-swift versions (default: every 3.x/4.x minor)')
    opts = ap.parse_args(argv)
    if opts.installed:
        print(json.dumps(installed(), indent=1))
        return 0
    text = render(build(opts.release))
    if opts.check:
        old = opts.output.read_text(encoding='utf-8') if opts.output.exists() else ''
        if old != text:
            print(
                f'{opts.output}: drifted; run `python scripts/gen_swift_release_snapshots.py` and review the diff',
                file=sys.stderr,
            )
            return 1
        print(f'{opts.output}: up to date')
        return 0
    opts.output.write_text(text, encoding='utf-8')
    print(f'wrote {opts.output}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
