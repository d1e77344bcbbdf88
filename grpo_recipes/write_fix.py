"""``grpo-guard check --write-fix OUT``: the launch with its first fix applied, written where the user says.

A YAML/JSON config is edited as text, so its comments and every other line stay: the value of an existing top-level
``key:`` line is replaced (its trailing comment kept), a missing key is appended at the end of the top-level mapping,
and the result is read back to make sure it says what the fix says. A command-line launch becomes the patched
command line (one line, shell-quoted). The file is written atomically (a temporary file, then a rename) and never
over the launch's own input.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from pathlib import Path

from .errors import GuardError


def _scalar(v) -> str:
    from .memory.search import _yaml

    if isinstance(v, list):
        return '[' + ', '.join(_scalar(x) for x in v) + ']'
    return _yaml(v)


def _block_end(lines: list[str], i: int) -> int:
    """The index after the indented (or blank/comment) lines that belong to the top-level key on line ``i``."""
    j = i + 1
    while j < len(lines) and (lines[j][:1] in (' ', '\t', '-') or not lines[j].strip()):
        j += 1
    while j > i + 1 and not lines[j - 1].strip():  # trailing blank lines belong to the file, not the key
        j -= 1
    return j


def edit_yaml(text: str, changes: dict, env: dict | None = None) -> str:
    """``text`` with each top-level ``key: value`` of ``changes`` set (and ``env``'s variables in its ``ENV:``
    block, ms-swift's environment in the config); comments and other lines kept."""
    lines = text.splitlines()
    appended: list[str] = []
    for key, new in changes.items():
        pat = re.compile(rf'^{re.escape(key)}\s*:(\s*)(.*?)(\s+#.*)?$')
        hit = next((i for i, ln in enumerate(lines) if pat.match(ln)), None)
        if hit is None:
            appended.append(f'{key}: {_scalar(new)}')
            continue
        m = pat.match(lines[hit])
        comment = m.group(3) or ''
        end = _block_end(lines, hit) if not m.group(2) else hit + 1  # `key:` then a nested block: replaced whole
        lines[hit:end] = [f'{key}: {_scalar(new)}{comment}']
    if env:
        hit = next((i for i, ln in enumerate(lines) if re.match(r'^ENV\s*:', ln)), None)
        if hit is not None and lines[hit].split(':', 1)[1].split('#')[0].strip():
            raise GuardError(
                "--write-fix: the config's ENV is written inline (ENV: {...}); set "
                + ', '.join(f'{k}: "{v}"' for k, v in env.items())
                + ' in it by hand'
            )
        if hit is None:
            appended += ['ENV:'] + [f'  {k}: "{v}"' for k, v in env.items()]
        else:
            end = _block_end(lines, hit)
            for k, v in env.items():
                child = next((i for i in range(hit + 1, end) if re.match(rf'^\s+{re.escape(k)}\s*:', lines[i])), None)
                if child is None:
                    lines.insert(hit + 1, f'  {k}: "{v}"')
                    end += 1
                else:
                    indent = re.match(r'^(\s+)', lines[child]).group(1)
                    lines[child] = f'{indent}{k}: "{v}"'
    return '\n'.join(lines + appended) + '\n'


def edit_json(text: str, changes: dict) -> str:
    """``text`` (a JSON object) with each top-level key of ``changes`` set: the value of a key written once replaced
    in place, a missing key added before the closing brace; anything else rewritten whole (indent 2)."""
    data = json.loads(text)
    out = text
    for key, new in changes.items():
        value = json.dumps(new)
        pat = re.compile(rf'("{re.escape(key)}"\s*:\s*)("(?:[^"\\]|\\.)*"|-?[\d.eE+-]+|true|false|null)')
        found = pat.findall(out)
        if key not in data:
            close = out.rstrip().rfind('}')
            body = out[:close].rstrip()
            sep = ',' if not body.endswith('{') else ''
            out = f'{body}{sep}\n  "{key}": {value}\n' + out[close:]
        elif len(found) == 1:
            out = pat.sub(lambda m: m.group(1) + value, out)
        else:
            return json.dumps({**data, **changes}, indent=2) + '\n'
    return out


def _command_line(args: list[str], launch, fix) -> str:
    from .fix_syntax import fixed_launch
    from .frontends.shell import split_env

    if len(args) == 1 and not args[0].startswith('-'):
        raise GuardError(f'--write-fix: {args[0]} is a script; apply the fix to its command by hand')
    fixed, outside = fixed_launch(launch, fix)
    if outside:
        raise GuardError(f'--write-fix: part of the fix is not a flag of the command ({"; ".join(outside)})')
    prefix, rest = split_env(args)
    env = {k: v for k, v in fixed.env.items() if launch.env.get(k) != v}
    if 'NPROC_PER_NODE' in env and launch.fw.launcher_places_processes:  # accelerate's process count: its option
        n = env.pop('NPROC_PER_NODE')
        at = [i for i, w in enumerate(rest) if w in ('--num_processes', '--num-processes')]
        if not at or at[0] + 1 >= len(rest):
            raise GuardError(f'--write-fix: the fix runs {n} processes; add --num_processes {n} to accelerate launch')
        rest[at[0] + 1] = n
    env.update({k: str(new) for k, (_, new) in fix.env.items()})
    words = [f'{k}={v}' for k, v in {**prefix, **env}.items()] + rest + fixed.argv[len(launch.argv) :]
    return shlex.join(words) + '\n'


def _check_read_back(text: str, changes: dict, suffix: str) -> None:
    from .memory.search import _yaml

    if suffix == '.json':
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text)
    wrong = [k for k, v in changes.items() if not isinstance(data, dict) or _yaml(data.get(k)) != _scalar(v)]
    if wrong:
        raise GuardError(f'--write-fix: could not set {", ".join(wrong)} in the config as text; set it by hand')


def fixed_text(args: list[str], launch, fix) -> tuple[str, Path | None]:
    """The launch with ``fix`` applied, and the file it was read from (None for a command line)."""
    from .fix_syntax import syntax_of

    changes = {k: new for k, (_, new) in fix.changes.items()}
    env = {k: new for k, (_, new) in fix.env.items()}
    syntax, config = syntax_of(launch)
    if syntax != 'yaml':
        return _command_line(args, launch, fix), None
    src = Path(config)
    try:
        text = src.read_text()
    except OSError as e:
        raise GuardError(f'--write-fix: cannot read {config}: {e.strerror}') from None
    if config.endswith('.json'):
        if env:
            raise GuardError(
                '--write-fix: the fix sets the environment ('
                + ' '.join(f'{k}={v}' for k, v in env.items())
                + '); a JSON config cannot hold it here'
            )
        out = edit_json(text, changes)
    else:
        in_config = launch.fw.settings_yaml_in_config  # ms-swift reads ENV: from its config; TRL's --config does not
        if env and not in_config:
            raise GuardError(
                '--write-fix: the fix sets the environment ('
                + ' '.join(f'{k}={v}' for k, v in env.items())
                + '), which this config does not hold'
            )
        out = edit_yaml(text, changes, env)
    _check_read_back(out, changes, src.suffix)
    return out, src


def write_fix(out: str, args: list[str], report) -> str:
    """Write the launch with the report's first fix applied to ``out`` (atomically); the line to print."""
    if not report.fixes:
        raise GuardError('--write-fix: the check proposed no fix; nothing written')
    text, src = fixed_text(args, report.launch, report.fixes[0])
    target = Path(out)
    inputs = [Path(a) for a in args if a and not a.startswith('-') and Path(a).is_file()] + ([src] if src else [])
    if target.exists() and any(os.path.samefile(target, p) for p in inputs if p.exists()):
        raise GuardError(f"--write-fix: {out} is the launch's own input; give another file")
    parent = target.parent if str(target.parent) else Path('.')
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f'.{target.name}.', suffix='.tmp')
    except OSError as e:
        raise GuardError(f'--write-fix: cannot write in {parent}: {e.strerror}') from None
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise GuardError(f'--write-fix: cannot write {out}: {e.strerror}') from None
    return f'fixed launch written to {out}'
