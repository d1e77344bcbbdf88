"""The framework releases a launch's own project pins: ``trl==0.18.1`` or ``trl @ git+...trl@v0.18.1`` in its
``requirements*.txt``, or in ``pyproject.toml``'s ``[project] dependencies``, beside the launcher or training script or
in a directory above it (up to the repository's root). A script written for TRL 0.18 is judged by 0.18's arguments,
not by whatever release is installed where the guard runs. ``--trl-version`` / ``--swift-version`` still decide.

Each line is read with ``packaging``'s own requirement parser (PEP 508), as pip reads it; only an exact pin counts
(``==X``, ``===X``, or a git URL at a release tag ``@vX.Y.Z``), never a range."""

from __future__ import annotations

import re
from pathlib import Path

PINNED = {'trl': 'trl_version', 'ms-swift': 'swift_version'}
"""The packages whose release changes how a launch is read, and the ``check`` option that names it
(``--trl-version``, ``--swift-version``)."""

_TAG = re.compile(r'@v?(\d+(?:\.\d+){1,3}(?:(?:rc|\.post|\.dev)\d+)?)(?:#.*)?$')
_MAX_UP = 4  # directories above the launch's own looked at (stops earlier at a repository root)
_MAX_BYTES = 256 * 1024  # a requirements file larger than this is not one


def _pin(line: str) -> tuple[str, str] | None:
    """(package, version) that one requirement line pins exactly, else None."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    text = line.split(' #', 1)[0].strip()
    if not text or text.startswith(('#', '-')):
        return None
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    name = canonicalize_name(req.name)  # PEP 503, as pip compares names: ms_swift, MS.Swift -> ms-swift
    if name not in PINNED:
        return None
    if req.url:
        m = _TAG.search(req.url)
        return (name, m.group(1)) if m else None
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ('==', '===') and '*' not in specs[0].version:
        return name, specs[0].version
    return None


def _requirements(path: Path) -> list[str]:
    try:
        if path.stat().st_size > _MAX_BYTES:
            return []
        return path.read_text(encoding='utf-8', errors='replace').splitlines()
    except OSError:
        return []


def _pyproject(path: Path) -> list[str]:
    import tomllib

    try:
        if path.stat().st_size > _MAX_BYTES:
            return []
        data = tomllib.loads(path.read_text(encoding='utf-8', errors='replace'))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    deps = (data.get('project') or {}).get('dependencies') or []
    return [d for d in deps if isinstance(d, str)]


def _files(directory: Path) -> list[Path]:
    return sorted(directory.glob('requirements*.txt')) + [directory / 'pyproject.toml']


def project_pins(starts: list[str | Path]) -> dict[str, tuple[str, str]]:
    """package -> (pinned version, the file that pins it), from the nearest directory (each of ``starts``, then
    its parents) whose requirements or pyproject pin it."""
    found: dict[str, tuple[str, str]] = {}
    seen: set[Path] = set()
    for start in starts:
        try:
            d = Path(start).resolve()
        except (OSError, RuntimeError):
            continue
        if d.is_file():
            d = d.parent
        for _ in range(_MAX_UP + 1):
            if d in seen:
                break
            seen.add(d)
            for f in _files(d):
                if not f.is_file():
                    continue
                lines = _pyproject(f) if f.name == 'pyproject.toml' else _requirements(f)
                for line in lines:
                    pin = _pin(line)
                    if pin and pin[0] not in found:
                        found[pin[0]] = (pin[1], str(f))
            if (d / '.git').exists() or d.parent == d:
                break
            d = d.parent
    return found
