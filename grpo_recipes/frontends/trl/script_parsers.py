"""How a TRL training script parses its command line and its config, read with ``ast`` (nothing of it is run).

- Its own dataclasses (open-r1's ``TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))`` with
  ``from open_r1.configs import GRPOConfig, GRPOScriptArguments``): the fields of every class the parser takes, read
  in the script, in the files its imports name next to it (``open_r1/configs.py`` beside the script, in a parent
  directory or a ``src/`` layout), through the bases up to TRL's own classes (whose fields the snapshot has).
  ``dataclasses.fields`` of a subclass are the base's plus its own annotated class attributes, which is what
  HfArgumentParser turns into flags (transformers/hf_argparser.py ``_add_dataclass_arguments``).
- Its own ``argparse.ArgumentParser``: the ``add_argument`` calls whose arguments are literals rebuild the parser,
  and Python's own ``argparse`` runs it on the launch's words, so "unrecognized arguments" and a missing value are
  argparse's own messages. ``parse_known_args`` leaves the words it does not know to whatever reads them next.
- A config it loads itself: ``cfg = yaml.safe_load(open(path))`` then ``MyConfig(**cfg)`` with ``MyConfig`` a
  ``GRPOConfig`` (sub)class: the file's keys are that dataclass's keyword arguments, so a key it lacks stops
  ``__init__`` ("got an unexpected keyword argument") whatever the TRL release, and ``env:`` is a key like any other.
"""

from __future__ import annotations

import argparse
import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

PARSERS = ('TrlParser', 'HfArgumentParser')
PARSE_METHODS = (
    'parse_args_and_config',
    'parse_args_into_dataclasses',
    'parse_args',
    'parse_known_args',
    'parse_yaml_file',
    'parse_json_file',
    'parse_dict',
)
SNAPSHOT_CLASSES = ('ScriptArguments', 'GRPOConfig', 'ModelConfig', 'GRPOScriptArguments', 'DatasetMixtureConfig')
TRAINING_ARGUMENTS = ('TrainingArguments',)
"""transformers' base of GRPOConfig: its fields are GRPOConfig's (in the snapshot) for a class built on it."""
_MAX_DEPTH = 6


def _name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


@dataclass
class Module:
    """One parsed Python file: its classes, its ``from X import Y`` names, and where it lies."""

    path: Path | None
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    """local name -> (module, name in it, relative level)."""
    trl_names: set[str] = field(default_factory=set)
    """Names bound to TRL's (or transformers') own objects: ``from trl import X``, ``import trl``."""

    @classmethod
    def of(cls, tree: ast.Module, path: Path | None) -> 'Module':
        m = cls(path, tree)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                m.classes[node.name] = node
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                root = (node.module or '').split('.')[0]
                for a in node.names:
                    local = a.asname or a.name
                    if node.level == 0 and root in ('trl', 'transformers'):
                        m.trl_names.add(local)
                    else:
                        m.imports[local] = (node.module or '', a.name, node.level)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split('.')[0] in ('trl', 'transformers'):
                        m.trl_names.add((a.asname or a.name).split('.')[0])
        return m


def _read(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding='utf-8'))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None


def _module_file(module: str, level: int, here: Path | None) -> Path | None:
    """The file an import names, looked for as Python would find it from the script's repository: relative to
    the importing file, else under the script's directory, a parent of it, or a ``src/`` beside one."""
    if here is None:
        return None
    parts = [p for p in module.split('.') if p]
    if level:
        base = here.parent
        for _ in range(level - 1):
            base = base.parent
        roots = [base]
    else:
        roots = []
        for d in [here.parent, *here.parent.parents][:_MAX_DEPTH]:
            roots += [d, d / 'src']
    for root in roots:
        target = root.joinpath(*parts) if parts else root
        for cand in (target.with_suffix('.py') if parts else None, target / '__init__.py'):
            if cand is not None and cand.is_file():
                return cand
    return None


class ClassReader:
    """The dataclass fields of classes named in a script, followed through its imports and bases."""

    def __init__(self, snapshot_fields):
        self._snap = snapshot_fields  # class name -> set of field names (TRL's own classes)
        self._cache: dict[Path, Module | None] = {}

    def _module(self, path: Path) -> Module | None:
        if path not in self._cache:
            tree = _read(path)
            self._cache[path] = Module.of(tree, path) if tree is not None else None
        return self._cache[path]

    def fields(self, name: str, mod: Module, depth: int = 0) -> set[str] | None:
        """The init fields of the class ``name`` as seen from ``mod``; None when it cannot be read here."""
        if depth > _MAX_DEPTH:
            return None
        if name in mod.classes:
            return self._class_fields(mod.classes[name], mod, depth)
        if name in mod.trl_names or name in TRAINING_ARGUMENTS:
            return self._snap(name)
        if name in mod.imports:
            module, real, level = mod.imports[name]
            path = _module_file(module, level, mod.path)
            if path is None and level == 0:  # ``from pkg import configs`` style or a package re-export
                path = _module_file(f'{module}.{real}', 0, mod.path)
            target = self._module(path) if path is not None else None
            if target is None:
                return None
            return self.fields(real, target, depth + 1)
        return None

    def _class_fields(self, node: ast.ClassDef, mod: Module, depth: int) -> set[str] | None:
        out: set[str] = set()
        for base in node.bases:
            if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id in mod.trl_names:
                got = self._snap(base.attr)  # trl.GRPOConfig
            elif isinstance(base, ast.Name):
                got = self.fields(base.id, mod, depth + 1)
            else:
                got = None
            if got is None:
                return None
            out |= got
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                v = item.value
                if isinstance(v, ast.Call) and any(
                    k.arg == 'init' and isinstance(k.value, ast.Constant) and k.value.value is False for k in v.keywords
                ):
                    continue
                if 'ClassVar' in ast.unparse(item.annotation):
                    continue
                out.add(item.target.id)
        return out


def _snapshot_fields(name: str) -> set[str] | None:
    from .arguments import snapshot

    snap = snapshot()
    if name in TRAINING_ARGUMENTS:
        name = 'GRPOConfig'
    if name not in snap or name in ('trl_version', 'generated_by'):
        return None
    return {f['name'] for f in snap[name]}


@dataclass
class OwnClasses:
    fields: set[str]
    """Every field of the script's parser classes."""
    classes: list[str]
    """The classes, as the script names them."""
    unread: list[str]
    """Classes whose fields could not be read here (then unknown keys stay warnings)."""
    method: str | None = None
    """The parse call: ``parse_args_and_config``, ``parse_args_into_dataclasses``, ``parse_args``, ..."""
    remaining_ok: bool = False
    """``return_remaining_strings=True`` (or ``parse_known_args``): words no class takes are handed back, not
    refused."""


def parser_dataclasses(text: str, script: str | None) -> OwnClasses | None:
    """The fields of the dataclasses the script's TrlParser/HfArgumentParser takes (None: no such parser)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    mod = Module.of(tree, Path(script).resolve() if script else None)
    reader = ClassReader(_snapshot_fields)
    classes: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in PARSERS and node.args:
            arg = node.args[0]
            for item in arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]:
                n = _name(item)
                if n and n not in classes:
                    classes.append(n)
    if not classes:
        return None
    method, remaining_ok = None, False
    parser_vars = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _name(n.value.func) in PARSERS
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PARSE_METHODS
            and (
                _name(node.func.value) in parser_vars
                or (isinstance(node.func.value, ast.Call) and _name(node.func.value.func) in PARSERS)
            )
        ):
            method = method or node.func.attr
            remaining_ok |= node.func.attr == 'parse_known_args' or any(
                k.arg == 'return_remaining_strings' and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in node.keywords
            )
    fields: set[str] = set()
    unread = []
    for n in classes:
        got = reader.fields(n, mod)
        if got is None:
            unread.append(n)
        else:
            fields |= got
    return OwnClasses(fields, classes, unread, method, remaining_ok)


# --- a config the script loads itself: MyConfig(**yaml.safe_load(...)) ---------------------------------------------

LOADERS = ('safe_load', 'load', 'full_load')


@dataclass
class SelfLoaded:
    cls: str
    """The class the file's keys go to (``MyConfig``)."""
    fields: set[str] | None
    """Its fields (None: not readable here)."""
    line: int


def self_loaded_config(text: str, script: str | None) -> SelfLoaded | None:
    """``X(**cfg)`` where ``cfg`` is bound to ``yaml.safe_load(...)``/``json.load(...)`` (directly, or a name bound to
    it) and ``X`` is a GRPOConfig or a class built on it."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    mod = Module.of(tree, Path(script).resolve() if script else None)
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            if _name(node.value.func) in LOADERS:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                loaded |= {t.id for t in targets if isinstance(t, ast.Name)}
    reader = ClassReader(_snapshot_fields)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and any(k.arg is None for k in node.keywords)):
            continue
        star = next(k.value for k in node.keywords if k.arg is None)
        if not (
            (isinstance(star, ast.Name) and star.id in loaded)
            or (isinstance(star, ast.Call) and _name(star.func) in LOADERS)
        ):
            continue
        name = _name(node.func)
        if not name or not _is_grpo_config(name, mod, reader):
            continue
        return SelfLoaded(name, reader.fields(name, mod), node.lineno)
    return None


def _is_grpo_config(name: str, mod: Module, reader: ClassReader, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if name == 'GRPOConfig' and (name in mod.trl_names or name not in mod.classes):
        return True
    node = mod.classes.get(name)
    if node is None:
        return False
    return any(_is_grpo_config(_name(b) or '', mod, reader, depth + 1) for b in node.bases)


def config_file_of(script_args: list[str]) -> str | None:
    """The file the script loads: ``--config F`` (or any ``--*config*`` option's value), else the first word that
    names a .yaml/.yml/.json file."""
    for i, w in enumerate(script_args):
        if w.startswith('--') and 'config' in w and i + 1 < len(script_args) and '=' not in w:
            return script_args[i + 1]
        if w.startswith('--') and 'config' in w and '=' in w:
            return w.split('=', 1)[1]
    return next((w for w in script_args if w.endswith(('.yaml', '.yml', '.json'))), None)


# --- the script's own argparse ----------------------------------------------------------------------------------------


class _Stop(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage and exits 2; here the message is the result
        raise _Stop(message)

    def exit(self, status=0, message=None):  # --help / --version: it prints and exits, no training runs
        raise _Stop(message or f'it prints its help and exits (status {status}) without training')


TYPES = {'int': int, 'float': float, 'str': str}


@dataclass
class ScriptArgparse:
    known: bool
    """``parse_known_args``: words it does not know go on."""
    rest: list[str]
    """What argparse left (parse_known_args) or refused (parse_args)."""
    error: str | None
    """argparse's message when it would exit 2 (parse_args with leftovers, a missing value, a bad type)."""
    values: dict
    """dest -> value after parsing (defaults included)."""
    namespaces: set[str]
    """Names the parsed namespace is bound to in the script (``args``)."""
    line: int
    options: dict = field(default_factory=dict)
    """dest -> the option string that sets it (``batch_size`` -> ``--batch_size``)."""
    rest_passed: bool = False
    """``parse_known_args``: the list it leaves is handed to a TrlParser/HfArgumentParser parse call."""


def _returned_by_helpers(tree: ast.Module, parse: ast.Call, namespaces: set[str]) -> set[str]:
    """Names bound to the namespace through a helper of the script that returns it (``def parse_args(): ...;
    return parser.parse_args()``, or returns a name bound to it there; ``args = parse_args()``)."""
    helpers = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not any(n is parse for n in ast.walk(fn)):
            continue  # the parse call is not in this function
        for r in ast.walk(fn):
            if isinstance(r, ast.Return) and r.value is not None:
                if r.value is parse or (isinstance(r.value, ast.Name) and r.value.id in namespaces):
                    helpers.add(fn.name)
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in helpers
        ):
            found.add(node.targets[0].id)
    return found


def script_argparse(text: str, script_args: list[str], prog: str = 'script') -> ScriptArgparse | None:
    """The script's ``argparse.ArgumentParser``, rebuilt from its literal ``add_argument`` calls and run on
    ``script_args`` by Python's argparse (None: the script has none, or builds it in a way not read here)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    parsers: dict[str, ast.Call] = {}
    groups: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v, t = node.value, node.targets[0].id
            if isinstance(v, ast.Call) and _name(v.func) == 'ArgumentParser':
                parsers[t] = v
            elif (
                isinstance(v, ast.Call)
                and _name(v.func) in ('add_argument_group', 'add_mutually_exclusive_group')
                and isinstance(v.func, ast.Attribute)
                and isinstance(v.func.value, ast.Name)
            ):
                groups[t] = v.func.value.id
    if len(parsers) != 1:
        return None
    ((pname, pcall),) = parsers.items()
    owners = {pname} | {g for g, p in groups.items() if p == pname or groups.get(p) == pname}
    if any(k.arg in ('parents', 'fromfile_prefix_chars', 'argument_default') for k in pcall.keywords):
        return None  # options from elsewhere, or files of arguments: not rebuilt here
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == 'add_argument' and _name(node.func.value) not in owners:
            return None  # options added through a helper or another object: the parser cannot be rebuilt whole
        if node.func.attr in ('add_subparsers', 'parse_intermixed_args') and _name(node.func.value) in owners:
            return None
    parse = None
    namespaces: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _name(node.func.value) == pname
            and node.func.attr in ('parse_args', 'parse_known_args')
        ):
            parse = parse or node
    if parse is None:
        return None
    given = parse.args[0] if parse.args else next((k.value for k in parse.keywords if k.arg == 'args'), None)
    if given is not None and not (isinstance(given, ast.Subscript) and 'sys.argv' in ast.unparse(given)):
        return None  # it parses a list of its own, not the command line
    rest_name = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.value is parse:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                namespaces.add(t.id)
            elif isinstance(t, ast.Tuple) and t.elts and isinstance(t.elts[0], ast.Name):
                namespaces.add(t.elts[0].id)
                if len(t.elts) > 1 and isinstance(t.elts[1], ast.Name):
                    rest_name = t.elts[1].id
    namespaces |= _returned_by_helpers(tree, parse, namespaces)
    rest_passed = rest_name is not None and any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in PARSE_METHODS
        and _name(n.func.value) != pname
        and any(
            isinstance(x, ast.Name) and x.id == rest_name
            for a in [*n.args, *(k.value for k in n.keywords)]
            for x in ast.walk(a)
        )
        for n in ast.walk(tree)
    )
    kw = {k.arg: k.value for k in pcall.keywords if k.arg}
    opts = {}
    for key in ('allow_abbrev', 'prefix_chars'):
        if key in kw:
            try:
                opts[key] = ast.literal_eval(kw[key])
            except ValueError:
                pass
    parser = _Parser(prog=os.path.basename(prog), add_help=True, **opts)
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == 'add_argument'
            and _name(node.func.value) in owners
        ):
            continue
        try:
            names = [ast.literal_eval(a) for a in node.args]
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None  # an option name computed at run time: the parser cannot be rebuilt
        if any(k.arg is None for k in node.keywords) or not all(isinstance(n, str) for n in names):
            return None  # **kwargs
        kwargs = {}
        for k in node.keywords:
            if k.arg == 'action' and _name(k.value) == 'BooleanOptionalAction':
                kwargs['action'] = argparse.BooleanOptionalAction
            elif k.arg in ('action', 'nargs', 'default', 'choices', 'required', 'dest', 'const'):
                try:
                    kwargs[k.arg] = ast.literal_eval(k.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    if k.arg == 'action':  # a custom Action class: it may take a value or not
                        kwargs['action'] = 'store'
                        kwargs.setdefault('nargs', '?')
                    elif k.arg == 'choices':
                        pass  # computed: any value
                    elif k.arg == 'default':
                        kwargs['default'] = None
            elif k.arg == 'type' and _name(k.value) in TYPES:
                kwargs['type'] = TYPES[_name(k.value)]
        if kwargs.get('action') in ('store_true', 'store_false', 'count', 'help', 'version'):
            kwargs.pop('nargs', None)
            kwargs.pop('type', None)
        try:
            parser.add_argument(*names, **kwargs)
        except (ValueError, TypeError, argparse.ArgumentError):
            return None
    known = parse.func.attr == 'parse_known_args'
    options = {
        a.dest: next((o for o in a.option_strings if o.startswith('--')), a.option_strings[0])
        for a in parser._actions
        if a.option_strings
    }
    try:
        ns, rest = parser.parse_known_args(list(script_args))
    except _Stop as e:
        return ScriptArgparse(known, [], str(e), {}, namespaces, parse.lineno, options, rest_passed)
    error = None if known or not rest else f'unrecognized arguments: {" ".join(rest)}'
    return ScriptArgparse(known, rest, error, vars(ns), namespaces, parse.lineno, options, rest_passed)


def has_trl_parser(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and _name(n.func) in PARSERS for n in ast.walk(tree))


# --- values the script reads from its own dataclasses and YAML files ------------------------------------------------


def _cli_values(script_args: list[str]) -> dict[str, str | bool]:
    """``--name value`` / ``--name=value`` / a bare ``--flag`` (True) of the command line, the last one winning."""
    out: dict[str, str | bool] = {}
    for i, w in enumerate(script_args):
        if not w.startswith('--') or w == '--':
            continue
        name, eq, value = w[2:].partition('=')
        if eq:
            out[name] = value
        elif i + 1 < len(script_args) and not script_args[i + 1].startswith('--'):
            out[name] = script_args[i + 1]
        else:
            out[name] = True
    return out


def _typed(text, annotation: str):
    """A command-line word as HfArgumentParser types it for the field's annotation (bool: transformers' string_to_bool
    words; int/float; else the text)."""
    if not isinstance(text, str):
        return text
    if 'bool' in annotation:
        low = text.lower()
        return (
            True if low in ('true', 'yes', 't', 'y', '1') else False if low in ('false', 'no', 'f', 'n', '0') else text
        )
    for kind in ('int', 'float'):
        if kind in annotation:
            try:
                return int(text) if kind == 'int' else float(text)
            except ValueError:
                return text
    return text


def _field_defaults(node: ast.ClassDef, mod: Module, depth: int = 0) -> dict[str, tuple[object, str]]:
    """field -> (default, annotation) of a dataclass defined in the script (and its bases defined there): a literal
    default, or ``field(default=literal)``; None where there is none readable."""
    out: dict[str, tuple[object, str]] = {}
    for base in node.bases:
        b = mod.classes.get(_name(base) or '')
        if b is not None and depth < _MAX_DEPTH:
            out.update(_field_defaults(b, mod, depth + 1))
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        v = item.value
        if isinstance(v, ast.Call) and _name(v.func) == 'field':
            v = next((k.value for k in v.keywords if k.arg == 'default'), None)
        try:
            default = ast.literal_eval(v) if v is not None else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            default = None
        out[item.target.id] = (default, ast.unparse(item.annotation))
    return out


def dataclass_bindings(tree: ast.Module, script: str | None, script_args: list[str]) -> dict[str, object]:
    """``'script_args.model_name'`` -> its value, for the script's own dataclasses that its HfArgumentParser/TrlParser
    fills (``script_args, training_args = parser.parse_args_into_dataclasses()``): the command line's word, else the
    TrlParser ``--config`` file's key, else the field's default (transformers/hf_argparser.py: one flag per field).
    ``tree``: the script, parsed."""
    mod = Module.of(tree, Path(script).resolve() if script else None)
    cli = _cli_values(script_args)
    path = config_file_of(script_args)
    data: dict = {}
    if path and path.endswith(('.yaml', '.yml')):
        loaded = _read_yaml_mapping(Path(path))  # unreadable: the reader of the config reports it
        data = loaded if loaded is not None else {}
    classes: list[str] = []
    parser_vars: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _name(node.value.func) in PARSERS:
            parser_vars |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            arg = node.value.args[0] if node.value.args else None
            items = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg] if arg is not None else []
            classes = [_name(i) or '' for i in items]
    out: dict[str, object] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        f = node.value.func
        if not (isinstance(f, ast.Attribute) and f.attr in PARSE_METHODS and _name(f.value) in parser_vars):
            continue
        target = node.targets[0]
        names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        for var, cls in zip(names, classes):
            if not isinstance(var, ast.Name) or cls not in mod.classes:
                continue  # TRL's own classes: their flags are read as TRL's
            for fname, (default, annotation) in _field_defaults(mod.classes[cls], mod).items():
                value = cli.get(fname, data.get(fname, default))
                out[f'{var.id}.{fname}'] = _typed(value, annotation)
    return out


def _yaml_path(call: ast.Call, tree: ast.Module, funcs: dict[str, ast.FunctionDef]) -> str | None:
    """The file a ``yaml.safe_load(open("f"))``, ``load_config("f")`` (a function of the script that returns
    ``yaml.safe_load`` of its argument) or ``load_config()`` (its default) reads."""
    name = _name(call.func)
    if name in LOADERS and call.args:
        arg = call.args[0]
        if isinstance(arg, ast.Call) and _name(arg.func) == 'open' and arg.args:
            arg = arg.args[0]
        elif isinstance(arg, ast.Name):  # with open("f") as fh: yaml.safe_load(fh)
            handle = arg.id
            for w in ast.walk(tree):
                for item in w.items if isinstance(w, ast.With) else []:
                    v, c = item.optional_vars, item.context_expr
                    if isinstance(v, ast.Name) and v.id == handle and isinstance(c, ast.Call) and c.args:
                        arg = c.args[0]
        return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    fn = funcs.get(name or '')
    if fn is None or not fn.args.args:
        return None
    returns_yaml = any(
        isinstance(n, ast.Return) and isinstance(n.value, ast.Call) and _name(n.value.func) in LOADERS
        for n in ast.walk(fn)
    )
    if not returns_yaml:
        return None
    if call.args:
        a = call.args[0]
    else:
        defaults = fn.args.defaults
        a = defaults[-len(fn.args.args)] if len(defaults) == len(fn.args.args) else None
    return a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None


def _read_yaml_mapping(path: Path) -> dict | None:
    """A YAML file's top-level mapping, loaded with the guard's bounds (bounded_load: no alias bombs, no deep
    nesting); None when it is not here or not such a mapping."""
    import yaml

    from ...bounded_load import safe_load_yaml

    try:
        data = safe_load_yaml(path.read_text(encoding='utf-8'))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def yaml_bindings(tree: ast.Module, script: str | None) -> dict[str, object]:
    """``'cfg'`` -> the mapping of a YAML file the script loads into ``cfg`` itself (a constant path, read from the
    working directory the launch runs in, else beside the script or above it). ``tree``: the script, parsed."""
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    out: dict[str, object] = {}
    here = Path(script).resolve().parent if script else None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        if not isinstance(node.value, ast.Call):
            continue
        path = _yaml_path(node.value, tree, funcs)
        if not path or not path.endswith(('.yaml', '.yml')):
            continue
        cands = [Path(path)] + (
            [d / path for d in [here, *here.parents][:3]] if here and not os.path.isabs(path) else []
        )
        data = next((d for d in map(_read_yaml_mapping, cands) if d is not None), None)
        if data is not None:
            out[node.targets[0].id] = data
    return out
