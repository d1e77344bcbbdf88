"""Commands whose output a command substitution may use, computed here without running them: bash's ``echo``,
``printf`` (``%s %d %i %u %x %X %o %c %f %e %g %b %q %%``, widths, the format reused for leftover arguments), ``pwd``,
``command -v``/``which`` (the program's name: it is taken to be installed, and found on PATH as the name would be),
and coreutils' ``expr`` (integer arithmetic, comparisons, ``length``), ``dirname``, ``basename`` (``-s``, ``-a``),
``realpath`` (lexically: ``..`` folded against the cwd, links not followed), ``seq`` (integers), ``nproc`` (the
visible GPU count when CUDA_VISIBLE_DEVICES is known), ``cat`` of nothing or of a here-doc, ``true``/``false``/``:``,
``find`` over the files here (:func:`find`), and in a pipeline ``wc -l/-w/-c``, ``tr``, ``head``/``tail -n N`` of
what the command before wrote. ``nvidia-smi``'s
GPU list (``-L``/``--list-gpus``) and its ``--query-gpu=count,index,name`` in CSV answer for the machine the check
plans for (:class:`Machine`: ``--gpus``/``--gpu-type``, or a batch script's ``--gres=gpu:N``): nvidia-smi lists the
node's GPUs, whatever CUDA_VISIBLE_DEVICES says. The lookups scripts make in their own config files are computed the
way those tools compute them, for the forms with a single meaning (:func:`text_tool`): ``grep`` of a plain pattern
(``-v -i -m N -F -E``) in a file here or in what is piped in, ``awk '{print $N}'`` and ``'{print NF}'``
(``-F C``), ``cut -d C -f N`` and ``xargs`` with no command (the words on one line).
Anything else is not pure: its output is not known (:data:`NOT_PURE`)."""

from __future__ import annotations

import os
import posixpath
import re

from .arith import parse_number

NOT_PURE = object()


class Machine:
    """The node a launch is checked for: its GPU count and card name, and the job's node count (a batch script's
    ``--nodes``) (None: not known)."""

    def __init__(self, gpus: int | None = None, gpu_name: str | None = None, nodes: int | None = None):
        self.gpus, self.gpu_name, self.nodes = gpus, gpu_name, nodes


# Marks text a command printed that is not known here (a host's name): it flows through the text tools like any
# character, so `scontrol show hostnames | wc -l` counts the job's nodes, while a substitution whose output still
# holds it is not resolved (Evaluator.capture).
UNKNOWN_MARK = '\x00'


def python_c(code: str, visible: str | None, machine: Machine | None) -> str:
    """The one-line programs launch scripts run for a value, answered without running Python:

    - ``import torch; print(torch.cuda.device_count())``: the GPUs this process sees (CUDA_VISIBLE_DEVICES, else
      the machine checked);
    - ``import M; print(M.__file__)`` / ``print(M.__path__[0])``: where the installed package puts M (found with
      importlib.util.find_spec on M's top package, which imports nothing), as in ``torchrun $(python -c "import
      swift.cli.rlhf; print(swift.cli.rlhf.__file__)")``.

    Impure for any other program, or where the answer is not known here."""
    flat = re.sub(r'\s+', '', code.replace('\n', ';')).rstrip(';')
    count = re.fullmatch(r'importtorch;print\(torch\.cuda\.device_count\(\)(or(\d+))?\)', flat)
    if count:  # `... or 1`: Python's `or` gives the fallback for a count of 0
        if visible is not None:
            n = len([d for d in visible.split(',') if d.strip()])
        elif machine is not None and machine.gpus:
            n = machine.gpus
        else:
            raise Impure('python')
        return f'{n or (int(count.group(2)) if count.group(2) else 0)}\n'
    m = re.fullmatch(r'import([A-Za-z_][\w.]*);print\(\1\.(__file__|__path__\[0\])\)', flat)
    if not m:
        raise Impure('python')
    import importlib.util

    module = m.group(1)
    top, *rest = module.split('.')
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise Impure('python')
    base = os.path.join(list(spec.submodule_search_locations)[0], *rest)
    path = (
        base
        if m.group(2) != '__file__'
        else (os.path.join(base, '__init__.py') if os.path.isdir(base) else base + '.py')
    )
    if not os.path.exists(path):
        raise Impure('python')
    return path + '\n'


def scontrol(args: list[str], machine: Machine | None) -> str:
    """``scontrol show hostnames [LIST]``: one line per node of the job (scontrol(1)); the count is the batch
    script's ``--nodes``, the names are not known here. Impure for anything else or an unknown node count."""
    n = machine.nodes if machine else None
    if not n or args[:2] not in (['show', 'hostnames'], ['show', 'hostname']) or len(args) > 3:
        raise Impure('scontrol')
    return ''.join(f'{UNKNOWN_MARK}node{i}\n' for i in range(n))


def nvidia_smi(args: list[str], machine: Machine | None) -> str:
    """nvidia-smi's GPU list or a CSV query of the GPUs' count/index/name (nvidia-smi --help-query-gpu: "count:
    The number of NVIDIA GPUs in the system", printed once per GPU); Impure for anything else or an unknown machine."""
    n = machine.gpus if machine else None
    if not n:
        raise Impure('nvidia-smi')
    name = f'NVIDIA {machine.gpu_name}' if machine.gpu_name else 'NVIDIA GPU'
    if args in (['-L'], ['--list-gpus']):
        return ''.join(f'{name_line}\n' for name_line in (f'GPU {i}: {name} (UUID: GPU-{i})' for i in range(n)))
    query = [a.split('=', 1)[1] for a in args if a.startswith('--query-gpu=')]
    fmt = [a.split('=', 1)[1] for a in args if a.startswith('--format=')]
    rest = [a for a in args if not a.startswith(('--query-gpu=', '--format='))]
    if len(query) != 1 or len(fmt) != 1 or rest:
        raise Impure('nvidia-smi')
    fields = [f.strip() for f in query[0].split(',')]
    options = {o.strip() for o in fmt[0].split(',')}
    if not fields or any(f not in ('count', 'index', 'name', 'gpu_name') for f in fields) or 'csv' not in options:
        raise Impure('nvidia-smi')
    values = {'count': lambda i: str(n), 'index': str, 'name': lambda i: name, 'gpu_name': lambda i: name}
    rows = [', '.join(values[f](i) for f in fields) for i in range(n)]
    head = [] if 'noheader' in options else [', '.join(fields)]
    return ''.join(r + '\n' for r in head + rows)


class Impure(Exception):
    """The command's output cannot be known here."""


def run(
    argv: list[str], cwd: str | None, visible: str | None, stdin: str | None, machine: Machine | None = None
) -> tuple[str, int]:
    """(stdout, exit status) of a pure command; Impure otherwise."""
    name, args = argv[0], argv[1:]
    if name.rsplit('/', 1)[-1] == 'nvidia-smi':
        return nvidia_smi(args, machine), 0
    if name.rsplit('/', 1)[-1] == 'scontrol':
        return scontrol(args, machine), 0
    if re.fullmatch(r'python(\d+(\.\d+)*)?', name.rsplit('/', 1)[-1]) and args[:1] == ['-c'] and len(args) == 2:
        return python_c(args[1], visible, machine), 0
    if name == 'echo':
        return echo(args), 0
    if name == 'printf':
        if args[:1] == ['-v']:
            raise Impure(name)
        return printf(args), 0
    if name == 'pwd':
        if cwd is None:
            raise Impure(name)
        return cwd + '\n', 0
    if name in ('true', ':'):
        return '', 0
    if (name == 'which' or (name == 'command' and args[:1] == ['-v'])) and args and not args[-1].startswith('-'):
        # `SWIFT_BIN=$(command -v swift)`: the program is taken to be installed on the launch's machine (as `command`
        # itself is, builtins.py); its name stands for the path, which the shell would find on PATH the same way
        progs = args[1:] if name == 'command' else args
        return ''.join(p + '\n' for p in progs), 0
    if name == 'false':
        return '', 1
    if name == 'expr':
        out = expr(args)
        return out + '\n', 0 if out not in ('0', '') else 1
    if name == 'dirname':
        return ''.join(_dirname(a) + '\n' for a in args if not a.startswith('-')), 0
    if name == 'basename':
        return basename(args), 0
    if name == 'realpath':
        paths = [a for a in args if not a.startswith('-')]
        if cwd is None and any(not p.startswith('/') for p in paths):
            raise Impure(name)
        return ''.join(posixpath.normpath(posixpath.join(cwd or '/', p)) + '\n' for p in paths), 0
    if name == 'seq':
        return seq(args), 0
    if name == 'nproc':
        if visible is None or args:
            raise Impure(name)
        return f'{len([d for d in visible.split(",") if d.strip()])}\n', 0
    if name == 'cat' and (not args or args == ['-']):
        return stdin or '', 0
    if stdin is not None and name in ('wc', 'tr', 'head', 'tail'):
        return _filter(name, args, stdin), 0
    if name in ('grep', 'awk', 'cut', 'xargs'):
        return text_tool(name, args, stdin, cwd)
    if name == 'find':
        return find(args, cwd), 0
    raise Impure(name)


def find(args: list[str], cwd: str | None) -> str:
    """GNU find's paths for ``find DIR... [-mindepth N] [-maxdepth N] [-type f|d] [-name|-iname PATTERN]`` over the
    files here (a script's ``CONFIGS=($(find "$DIR" -maxdepth 1 -name "*.yaml"))``), in name order: find's own order
    is the directory's, which the file system decides. Impure for any other primary, or a dir not here."""
    import fnmatch

    roots: list[str] = []
    i = 0
    while i < len(args) and not args[i].startswith('-'):
        roots.append(args[i])
        i += 1
    mindepth, maxdepth, kind, pattern, fold = 0, None, None, None, False
    while i < len(args):
        opt, val = args[i], args[i + 1] if i + 1 < len(args) else None
        if val is None:
            raise Impure('find')
        if opt in ('-mindepth', '-maxdepth') and val.isdigit():
            mindepth, maxdepth = (int(val), maxdepth) if opt == '-mindepth' else (mindepth, int(val))
        elif opt == '-type' and val in ('f', 'd'):
            kind = val
        elif opt in ('-name', '-iname') and pattern is None:
            pattern, fold = val, opt == '-iname'
        else:
            raise Impure('find')
        i += 2
    out: list[str] = []
    for root in roots or ['.']:
        base = root if root.startswith('/') else posixpath.join(cwd or '', root)
        if (cwd is None and not root.startswith('/')) or not os.path.isdir(base):
            raise Impure('find')
        found = []
        for dirpath, dirnames, filenames in os.walk(base):
            depth = 0 if dirpath == base else os.path.relpath(dirpath, base).count(os.sep) + 1
            if maxdepth is not None and depth >= maxdepth:
                dirnames[:] = []
            entries = [(dirpath, True, depth)] if depth == 0 else []
            entries += [(os.path.join(dirpath, d), True, depth + 1) for d in dirnames]
            entries += [(os.path.join(dirpath, f), False, depth + 1) for f in filenames]
            for path, is_dir, d in entries:
                if d < mindepth or (maxdepth is not None and d > maxdepth) or (kind == 'f') == is_dir and kind:
                    continue
                leaf = os.path.basename(path) if d else os.path.basename(root.rstrip('/')) or root
                if pattern is not None and not fnmatch.fnmatchcase(
                    leaf.lower() if fold else leaf, pattern.lower() if fold else pattern
                ):
                    continue
                found.append(root if d == 0 else posixpath.join(root, os.path.relpath(path, base)))
        out += sorted(set(found))
    return ''.join(p + '\n' for p in out)


# A grep pattern whose meaning is the same in grep's basic and extended syntax and in Python's: letters, digits,
# spaces and the punctuation below, a leading ^ and a trailing $.
_PLAIN = re.compile(r'\^?[\w \t:=\-/"\',@#%]*\$?')


def _inputs(files: list[str], stdin: str | None, cwd: str | None, name: str) -> str:
    if not files:
        if stdin is None:
            raise Impure(name)
        return stdin
    text = []
    for f in files:
        path = f if f.startswith('/') else posixpath.join(cwd or '', f)
        if cwd is None and not f.startswith('/'):
            raise Impure(name)
        try:
            with open(path, encoding='utf-8') as fh:
                text.append(fh.read())
        except (OSError, UnicodeDecodeError):
            raise Impure(name) from None  # a file that is not here: only the user's machine has it
    return ''.join(t if t.endswith('\n') or not t else t + '\n' for t in text)


def text_tool(name: str, args: list[str], stdin: str | None, cwd: str | None) -> tuple[str, int]:
    """(stdout, status) of ``grep``/``awk``/``cut``/``xargs`` in the forms the module docstring lists; Impure for
    any other form (an option not listed, a pattern with regex syntax, several files for grep)."""
    if name == 'grep':
        invert = ignore = fixed = False
        limit, i = None, 0
        while i < len(args) and args[i].startswith('-') and args[i] != '-':
            opt = args[i]
            if opt == '--':
                i += 1
                break
            if opt == '-m' and i + 1 < len(args) and args[i + 1].isdigit():
                limit, i = int(args[i + 1]), i + 2
                continue
            for ch in opt[1:]:
                if ch == 'v':
                    invert = True
                elif ch == 'i':
                    ignore = True
                elif ch == 'F':
                    fixed = True
                elif ch != 'E':
                    raise Impure(name)
            i += 1
        rest = args[i:]
        if not rest or len(rest) > 2 or (fixed and '-E' in args[:i]) or any('E' in a and 'F' in a for a in args[:i]):
            raise Impure(name)  # -E with -F: grep stops on "conflicting matchers"
        pattern, files = rest[0], rest[1:]
        if not fixed and not _PLAIN.fullmatch(pattern):
            raise Impure(name)
        if fixed:
            rx = re.compile(re.escape(pattern), re.I if ignore else 0)
        else:
            start, end = pattern.startswith('^'), pattern.endswith('$') and len(pattern) > 1
            core = pattern[1 if start else 0 : len(pattern) - 1 if end else len(pattern)]
            rx = re.compile(('^' if start else '') + re.escape(core) + (r'\Z' if end else ''), re.I if ignore else 0)
        out = []
        for line in _inputs(files, stdin, cwd, name).splitlines():
            hit = rx.search(line) is not None
            if hit != invert:
                out.append(line + '\n')
                if limit is not None and len(out) >= limit:
                    break
        return ''.join(out), 0 if out else 1
    if name == 'awk':
        sep = None
        if len(args) >= 2 and args[0] == '-F':
            sep, args = args[1], args[2:]
        elif args and args[0].startswith('-F') and len(args[0]) > 2:
            sep, args = args[0][2:], args[1:]
        if not args:
            raise Impure(name)
        # `{print $N}`, `{print $NF}` (a field) or `{print NF}` (the field count: `awk -F, '{print NF}' <<< "$GPUS"`)
        m = re.fullmatch(r'\s*\{\s*print\s+(\$(?:\d+|NF)|NF)\s*;?\s*\}\s*', args[0])
        if not m or (sep is not None and (len(sep) != 1 or sep in '\\ ')) or len(args) > 2:
            raise Impure(name)
        out = []
        for line in _inputs(args[1:], stdin, cwd, name).splitlines():
            # awk's blanks; an empty record has no field (NF 0) whatever the separator
            fields = [f for f in re.split(r'[ \t]+', line) if f] if sep is None else line.split(sep) if line else []
            if m.group(1) == 'NF':
                out.append(f'{len(fields)}\n')
                continue
            k = len(fields) if m.group(1) == '$NF' else int(m.group(1)[1:])
            out.append((line if k == 0 else (fields[k - 1] if 0 < k <= len(fields) else '')) + '\n')
        return ''.join(out), 0
    if name == 'cut':
        delim, field, files = '\t', None, []
        i = 0
        while i < len(args):
            a = args[i]
            if a in ('-d', '-f') and i + 1 < len(args):
                val, i = args[i + 1], i + 2
            elif a.startswith(('-d', '-f')) and len(a) > 2:
                val, i = a[2:], i + 1
            elif not a.startswith('-'):
                files.append(a)
                i += 1
                continue
            else:
                raise Impure(name)
            if a.startswith('-d'):
                delim = val
            else:
                field = val
        if len(delim) != 1 or field is None or not field.isdigit() or int(field) < 1:
            raise Impure(name)
        k, out = int(field), []
        for line in _inputs(files, stdin, cwd, name).splitlines():
            parts = line.split(delim)
            out.append((line if len(parts) == 1 else (parts[k - 1] if k <= len(parts) else '')) + '\n')
        return ''.join(out), 0
    if name == 'xargs' and not args and stdin is not None:
        if any(c in stdin for c in '\'"\\'):
            raise Impure(name)  # xargs' own quoting
        words = stdin.split()
        return (' '.join(words) + '\n') if words else '\n', 0
    raise Impure(name)


def _filter(name: str, args: list[str], text: str) -> str:
    """``wc -l/-w/-c``, ``tr SET1 SET2`` / ``tr -d SET``, ``head``/``tail`` ``-n N`` of the text piped in."""
    if name == 'wc':
        counts = {'-l': text.count('\n'), '-w': len(text.split()), '-c': len(text.encode())}
        if len(args) != 1 or args[0] not in counts:
            raise Impure('wc')
        return f'{counts[args[0]]}\n'
    if name == 'tr':
        if len(args) == 2 and args[0] == '-d':
            drop = _set(args[1])
            return ''.join(c for c in text if c not in drop)
        if len(args) != 2 or args[0].startswith('-'):
            raise Impure('tr')
        a, b = _set(args[0]), _set(args[1])
        if not b:
            raise Impure('tr')
        b = b + b[-1] * (len(a) - len(b))
        return text.translate(str.maketrans(a, b[: len(a)]))
    n = 10
    if len(args) == 2 and args[0] == '-n' and re.fullmatch(r'\d+', args[1]):
        n = int(args[1])
    elif len(args) == 1 and re.fullmatch(r'-\d+', args[0]):
        n = int(args[0][1:])
    elif args:
        raise Impure(name)
    lines = text.splitlines(keepends=True)
    return ''.join(lines[:n] if name == 'head' else (lines[-n:] if n else []))


def _set(spec: str) -> str:
    """A tr SET: characters, ``a-z`` ranges and ``\\n``/``\\t``/``\\\\`` escapes (classes are not followed)."""
    if '[:' in spec or '[=' in spec or '*' in spec:
        raise Impure('tr')
    chars, i = [], 0
    esc = {'n': '\n', 't': '\t', 'r': '\r', '\\': '\\'}
    while i < len(spec):
        c = spec[i]
        if c == '\\' and i + 1 < len(spec):
            chars.append(esc.get(spec[i + 1], spec[i + 1]))
            i += 2
            continue
        if i + 2 < len(spec) and spec[i + 1] == '-':
            lo, hi = ord(c), ord(spec[i + 2])
            if hi < lo:
                raise Impure('tr')
            chars.extend(chr(k) for k in range(lo, hi + 1))
            i += 3
            continue
        chars.append(c)
        i += 1
    return ''.join(chars)


def echo(args: list[str]) -> str:
    newline, escapes = True, False
    while args and re.fullmatch(r'-[neE]+', args[0]):
        for f in args[0][1:]:
            if f == 'n':
                newline = False
            else:
                escapes = f == 'e'
        args = args[1:]
    text = ' '.join(args)
    if escapes:
        text, stop = _backslash(text)
        if stop:
            return text
    return text + ('\n' if newline else '')


def _backslash(text: str) -> tuple[str, bool]:
    out, i = [], 0
    table = {'n': '\n', 't': '\t', 'r': '\r', 'a': '\a', 'b': '\b', 'f': '\f', 'v': '\v', '\\': '\\', 'e': '\x1b'}
    while i < len(text):
        c = text[i]
        if c == '\\' and i + 1 < len(text):
            d = text[i + 1]
            if d == 'c':
                return ''.join(out), True
            if d in table:
                out.append(table[d])
                i += 2
                continue
            if d == '0':
                m = re.compile(r'0[0-7]{0,3}').match(text, i + 1)
                out.append(chr(int(m.group(0), 8) & 0xFF))
                i = m.end()
                continue
        out.append(c)
        i += 1
    return ''.join(out), False


_SPEC = re.compile(r'%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?([sdiuxXocfeEgGbq%])')


def printf(args: list[str]) -> str:
    if not args:
        raise Impure('printf')
    fmt, rest = args[0], args[1:]
    out = []
    while True:
        consumed = 0
        pos = 0
        piece = []
        for m in _SPEC.finditer(fmt):
            piece.append(_backslash(fmt[pos : m.start()])[0])
            pos = m.end()
            flags, width, prec, conv = m.groups()
            if conv == '%':
                piece.append('%')
                continue
            if width == '*' or prec == '*':
                raise Impure('printf')
            arg = rest[consumed] if consumed < len(rest) else None
            consumed += 1
            piece.append(_one(flags, width, prec, conv, arg))
        piece.append(_backslash(fmt[pos:])[0])
        out.append(''.join(piece))
        rest = rest[consumed:]
        if not rest or consumed == 0:
            break
    return ''.join(out)


def _one(flags: str, width: str | None, prec: str | None, conv: str, arg: str | None) -> str:
    if conv in 'sbq':
        s = arg or ''
        if conv == 'b':
            s = _backslash(s)[0]
        if conv == 'q':
            raise Impure('printf %q')
        if prec is not None:
            s = s[: int(prec)]
        w = int(width or 0)
        return s.ljust(w) if '-' in flags else s.rjust(w)
    if conv == 'c':
        s = (arg or '')[:1]
        return s.ljust(int(width or 0)) if '-' in flags else s.rjust(int(width or 0))
    if conv in 'diuxXo':
        try:
            v = _int_arg(arg)
        except ValueError:
            raise Impure('printf') from None
        spec = f'%{flags}{width or ""}{"." + prec if prec is not None else ""}{"d" if conv in "iu" else conv}'
        return spec % v
    try:
        v = float(arg) if arg not in (None, '') else 0.0
    except ValueError:
        raise Impure('printf') from None
    return f'%{flags}{width or ""}{"." + prec if prec is not None else ""}{conv}' % v


def _int_arg(arg: str | None) -> int:
    if arg is None or arg == '':
        return 0
    if arg[:1] in '\'"':
        return ord(arg[1]) if len(arg) > 1 else 0
    try:
        return parse_number(arg)
    except Exception:
        raise ValueError(arg) from None


def _dirname(p: str) -> str:
    if not p:
        return '.'
    s = p.rstrip('/')
    if not s:
        return '/'
    if '/' not in s:
        return '.'
    d = s[: s.rindex('/')].rstrip('/')
    return d or '/'


def _basename(p: str, suffix: str = '') -> str:
    s = p.rstrip('/')
    if not s:
        return '/' if p else ''
    b = s[s.rfind('/') + 1 :]
    if suffix and b.endswith(suffix) and b != suffix:
        b = b[: -len(suffix)]
    return b


def basename(args: list[str]) -> str:
    multi, suffix, names = False, '', []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ('-a', '--multiple'):
            multi = True
        elif a == '-s':
            suffix, multi = args[i + 1] if i + 1 < len(args) else '', True
            i += 1
        elif a.startswith('--suffix='):
            suffix, multi = a.split('=', 1)[1], True
        elif a == '--':
            names += args[i + 1 :]
            break
        elif a.startswith('-') and len(a) > 1:
            raise Impure('basename')
        else:
            names.append(a)
        i += 1
    if not names:
        raise Impure('basename')
    if not multi:
        if len(names) > 2:
            raise Impure('basename')
        return _basename(names[0], names[1] if len(names) == 2 else '') + '\n'
    return ''.join(_basename(n, suffix) + '\n' for n in names)


def seq(args: list[str]) -> str:
    sep = '\n'
    nums = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == '-s' and i + 1 < len(args):
            sep = args[i + 1]
            i += 2
            continue
        if a.startswith('-s') and len(a) > 2:  # coreutils getopt: `-s,` is -s with its separator attached
            sep = a[2:]
            i += 1
            continue
        if a.startswith('-') and not re.fullmatch(r'-\d+', a):
            raise Impure('seq')
        nums.append(a)
        i += 1
    if not 1 <= len(nums) <= 3 or not all(re.fullmatch(r'[-+]?\d+', n) for n in nums):
        raise Impure('seq')
    v = [int(n) for n in nums]
    first, inc, last = (1, 1, v[0]) if len(v) == 1 else (v[0], 1, v[1]) if len(v) == 2 else tuple(v)
    if inc == 0:
        raise Impure('seq')
    out = []
    x = first
    while (x <= last) if inc > 0 else (x >= last):
        out.append(str(x))
        x += inc
        if len(out) > 100000:
            raise Impure('seq')
    return sep.join(out) + '\n' if out else ''


def expr(args: list[str]) -> str:
    """coreutils expr on integers and strings: | & comparisons + - * / % and ``length``, ``( )``."""
    p = _Expr(args)
    v = p.or_()
    if p.i != len(args):
        raise Impure('expr')
    return str(v)


class _Expr:
    def __init__(self, toks):
        self.t, self.i = toks, 0

    def _peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def or_(self):
        a = self.and_()
        while self._peek() == '|':
            self.i += 1
            b = self.and_()
            a = a if _truthy(a) else (b if _truthy(b) else 0)
        return a

    def and_(self):
        a = self.cmp()
        while self._peek() == '&':
            self.i += 1
            b = self.cmp()
            a = a if _truthy(a) and _truthy(b) else 0
        return a

    def cmp(self):
        a = self.add()
        while self._peek() in ('<', '<=', '=', '==', '!=', '>=', '>'):
            op = self.t[self.i]
            self.i += 1
            b = self.add()
            if _isint(a) and _isint(b):
                x, y = int(a), int(b)
            else:
                x, y = str(a), str(b)
            a = int({'<': x < y, '<=': x <= y, '=': x == y, '==': x == y, '!=': x != y, '>=': x >= y, '>': x > y}[op])
        return a

    def add(self):
        a = self.mul()
        while self._peek() in ('+', '-'):
            op = self.t[self.i]
            self.i += 1
            b = self.mul()
            a = _num(a) + _num(b) if op == '+' else _num(a) - _num(b)
        return a

    def mul(self):
        a = self.atom()
        while self._peek() in ('*', '/', '%'):
            op = self.t[self.i]
            self.i += 1
            b = self.atom()
            x, y = _num(a), _num(b)
            if op == '*':
                a = x * y
            else:
                if y == 0:
                    raise Impure('expr: division by zero')
                q = abs(x) // abs(y)
                q = q if (x >= 0) == (y >= 0) else -q
                a = q if op == '/' else x - q * y
        return a

    def atom(self):
        tok = self._peek()
        if tok is None:
            raise Impure('expr')
        self.i += 1
        if tok == '(':
            v = self.or_()
            if self._peek() != ')':
                raise Impure('expr')
            self.i += 1
            return v
        if tok == 'length':
            return len(str(self.atom()))
        if tok in ('match', 'substr', 'index', ':'):
            raise Impure('expr')
        return int(tok) if _isint(tok) else tok


def _isint(v) -> bool:
    return isinstance(v, int) or bool(re.fullmatch(r'[-+]?\d+', str(v)))


def _num(v) -> int:
    if not _isint(v):
        raise Impure('expr: non-integer argument')
    return int(v)


def _truthy(v) -> bool:
    return not (v == '' or (_isint(v) and int(v) == 0))
