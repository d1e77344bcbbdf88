"""One table: what a command, a module (``python -m M``) or a script path starts -> (framework, role).

``framework`` is whose reader reads it: ``swift`` (frontends/swift), ``trl`` (frontends/trl), or ``megatron``
(Megatron-SWIFT's trainer, which no reader here reads yet: a launch with it is never OK, see
``Launch.unread_trainer``). ``role`` is ``train`` or ``rollout``.

Sources (the installed packages): ms-swift 4.6 ``setup.py`` console scripts ``swift = swift.cli.main:cli_main`` and
``megatron = swift.cli._megatron.main:cli_main``; ``swift/cli/main.py`` ``ROUTE_MAPPING`` (``rlhf`` ->
``swift.cli.rlhf``, ``rollout`` -> ``swift.cli.rollout``; ``cli_main`` runs ``python FILE`` or, for ``rlhf`` with
``NPROC_PER_NODE``/``NNODES`` set, ``python -m torch.distributed.run ... FILE``); ``swift/cli/_megatron/main.py``
``ROUTE_MAPPING`` (``rlhf`` -> ``swift.cli._megatron.rlhf``). Both ``main.py`` files end in ``if __name__ ==
'__main__': cli_main()``, so ``python -m swift.cli.main rlhf`` is ``swift rlhf``. TRL 0.29 console script ``trl =
trl.cli:main`` (``trl/cli/main.py`` runs as ``python -m trl.cli.main`` too); ``trl/scripts/grpo.py`` and
``trl/scripts/vllm_serve.py`` run as modules or files.

The launchers that run one of these (or any script) are in ``frontends/launchers.py``.
"""

from __future__ import annotations

import functools
import os
import re
from typing import NamedTuple


class Entry(NamedTuple):
    framework: str
    """``swift``, ``trl`` or ``megatron``."""
    role: str
    """``train`` or ``rollout``."""
    how: str
    """How it reads the rest: ``cli`` (the words after ``swift rlhf`` etc., the console script's own processing:
    ms-swift's NPROC_PER_NODE/NNODES), ``entry`` (the entry file itself: the arguments, nothing else)."""


# console command + subcommand -> what it runs
COMMANDS: dict[tuple[str, str], Entry] = {
    ('swift', 'rlhf'): Entry('swift', 'train', 'cli'),
    ('swift', 'rollout'): Entry('swift', 'rollout', 'cli'),
    ('megatron', 'rlhf'): Entry('megatron', 'train', 'cli'),
    ('trl', 'grpo'): Entry('trl', 'train', 'cli'),
    ('trl', 'vllm-serve'): Entry('trl', 'rollout', 'cli'),
}

# a module that is a console command's main (``python -m swift.cli.main rlhf`` is ``swift rlhf``)
ROUTERS: dict[str, str] = {
    'swift.cli.main': 'swift',
    'swift.cli._megatron.main': 'megatron',
    'trl.cli.main': 'trl',
}

# a module run directly (``python -m M``), or its file under any path prefix (``.../swift/cli/rlhf.py``)
MODULES: dict[str, Entry] = {
    'swift.cli.rlhf': Entry('swift', 'train', 'entry'),
    'swift.cli.rollout': Entry('swift', 'rollout', 'entry'),
    'swift.cli._megatron.rlhf': Entry('megatron', 'train', 'entry'),
    'trl.scripts.grpo': Entry('trl', 'train', 'entry'),
    'trl.scripts.vllm_serve': Entry('trl', 'rollout', 'entry'),
}


def module_file(module: str) -> str:
    """``swift.cli.rlhf`` -> ``swift/cli/rlhf.py``."""
    return module.replace('.', '/') + '.py'


def command_name(word: str) -> str:
    """A console command as typed -> its name: ``/usr/local/bin/swift`` -> ``swift``; a wrapper named after it
    (the tests' stand-in ``fake_swift``) -> ``swift``."""
    head = os.path.basename(word)
    for name in ('swift', 'megatron', 'trl'):
        if head == name or head.endswith((f'_{name}', f'-{name}')):
            return name
    return head


def lookup_command(argv: list[str]) -> Entry | None:
    """``swift rlhf ...``, ``megatron rlhf``, ``trl grpo``, ... -> its entry."""
    if len(argv) < 2:
        return None
    return COMMANDS.get((command_name(argv[0]), argv[1]))


def lookup_module(module: str, rest: list[str]) -> tuple[Entry, int] | None:
    """``-m MODULE REST`` -> (entry, how many words of REST are its subcommand), or None."""
    if module in MODULES:
        return MODULES[module], 0
    if module in ROUTERS and rest:
        hit = COMMANDS.get((ROUTERS[module], rest[0]))
        return (hit, 1) if hit else None
    return None


def lookup_script(path: str, rest: list[str]) -> tuple[Entry, int] | None:
    """A script path (any prefix, ``$DIR/`` expanded or not) -> (entry, subcommand words), or None. A console
    script run as a Python file (``torchrun ... /usr/bin/swift rlhf``) is its command's router (``swift.cli.main``).
    A project's own copy of ms-swift's rlhf entry (``deepspeed scripts/rlhf_ds.py --rlhf_type grpo ...``) counts
    as that entry: a file here that calls ms-swift's ``rlhf_main``, or a file not here given ``--rlhf_type`` (an
    argument only ms-swift's RLHF arguments have)."""
    p = re.sub(r'/+', '/', path.replace('\\', '/'))
    name = os.path.basename(p)
    if name in ROUTERS.values() and rest:  # `torchrun ... $(which swift) rlhf ...`: the console script, run by Python
        return lookup_module(next(m for m, n in ROUTERS.items() if n == name), rest)
    for module in (*MODULES, *ROUTERS):
        f = module_file(module)
        if p == f or p.endswith('/' + f):
            return lookup_module(module, rest)
    if p.endswith('.py') and _runs_swift_rlhf(path, rest):
        return MODULES['swift.cli.rlhf'], 0
    return None


def _tree(path: str):
    """A Python file's ``ast`` tree (None: not here, or not Python), parsed once per version of the file: a script
    is classified for every command that runs it (launchers.classify), and its project's modules with it."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return _parsed(os.path.abspath(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _parsed(path: str, mtime_ns: int, size: int):
    import ast

    try:
        with open(path, encoding='utf-8') as f:
            return ast.parse(f.read())
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None


def script_imports(path: str) -> tuple[set[str], set[str]] | None:
    """(the top-level packages a Python file imports, every name it imports or uses), read with ``ast``; None when
    the file is not here to read (or not Python)."""
    import ast

    tree = _tree(path)
    if tree is None:
        return None
    packages, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            packages.update(a.name.split('.')[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            packages.add((node.module or '').split('.')[0])
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return packages, names


def imports_trl(path: str, depth: int = 2, limit: int = 24) -> bool | None:
    """Whether a training script uses TRL: it imports ``trl``, or a module of its own project does (``from
    ehr_r1.training.grpo_trainer import MyGRPOTrainer``, a GRPOTrainer subclass kept beside the script), followed
    ``depth`` imports deep and at most ``limit`` files. A project module is found as Python would find it from the
    script's directory or an ancestor of it (up to three levels: ``src/pkg/train.py`` importing ``pkg.x``), or
    relative to the importing file (``from .x import y``). None when the script is not here to read."""
    import ast

    seen: set[str] = set()

    def modules(file: str) -> list[str] | None:
        tree = _tree(file)
        if tree is None:
            return None
        out = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                # the module, and each imported name that may be a submodule of it (`from .training import trainer`)
                mods = [node.module or ''] + [f'{node.module}.{a.name}' if node.module else a.name for a in node.names]
                if node.level:
                    base = os.path.dirname(file)
                    for _ in range(node.level - 1):
                        base = os.path.dirname(base)
                    out += ['.' + os.path.abspath(base) + ':' + m for m in mods if m]
                elif node.module:
                    out += mods
        return out

    def find(module: str, roots: list[str]) -> str | None:
        if module.startswith('.'):
            base, _, name = module[1:].partition(':')
            roots, module = [base], name
        rel = module.replace('.', os.sep)
        for root in roots:
            for cand in (os.path.join(root, rel + '.py'), os.path.join(root, rel, '__init__.py')):
                if module and os.path.isfile(cand):
                    return cand
        return None

    here = os.path.dirname(os.path.abspath(path))
    roots = [here]
    for _ in range(3):
        up = os.path.dirname(roots[-1])
        if up == roots[-1]:
            break
        roots.append(up)
    frontier, first = [os.path.abspath(path)], True
    for _ in range(depth + 1):
        nxt = []
        for file in frontier:
            if file in seen or len(seen) >= limit:
                continue
            seen.add(file)
            mods = modules(file)
            if mods is None:
                if first:
                    return None
                continue
            if any(m.split('.')[0] == 'trl' for m in mods if not m.startswith('.')):
                return True
            nxt += [f for m in mods if (f := find(m, roots)) is not None]
            first = False
        frontier = nxt
    return False


# Packages (or TRL's checks for them) a script imports to serve HTTP: a server, not a trainer.
SERVER_PACKAGES = ('uvicorn', 'fastapi', 'flask', 'aiohttp')
SERVER_CHECKS = ('is_uvicorn_available', 'is_fastapi_available')


def serves_http(path: str) -> bool:
    """A Python file here that serves HTTP (it imports uvicorn/fastapi/flask/aiohttp, or TRL's checks for them, as a
    copy of ``trl/scripts/vllm_serve.py`` does) and names no trainer (no name ending in ``Trainer``): a rollout or
    judge server beside the launch, not a training script. False when the file is not here."""
    got = script_imports(path)
    if got is None:
        return False
    packages, names = got
    serves = bool(set(packages) & set(SERVER_PACKAGES)) or bool(set(names) & set(SERVER_CHECKS))
    return serves and not any(n.endswith('Trainer') for n in names)


def _runs_swift_rlhf(path: str, rest: list[str]) -> bool:
    if os.path.isfile(path):
        got = script_imports(path)
        return got is not None and 'swift' in got[0] and 'rlhf_main' in got[1]
    return any(a == '--rlhf_type' or a.startswith('--rlhf_type=') for a in rest)


def describe(entry: Entry) -> str:
    names = {
        ('swift', 'train'): 'swift rlhf',
        ('swift', 'rollout'): 'swift rollout',
        ('megatron', 'train'): 'megatron rlhf',
        ('trl', 'train'): 'trl grpo',
        ('trl', 'rollout'): 'trl vllm-serve',
    }
    return names[(entry.framework, entry.role)]
