"""The builtins the evaluator carries out on its state rather than report as commands: ``export``/``declare``/
``local``/``typeset``/``readonly``, ``unset``, ``cd``/``pushd``/``popd``, ``source``/``.``, ``eval``, ``set --``,
``shift``, ``exit``/``return``/``break``/``continue``, ``let``, ``test``/``[``, ``read`` (its variables are not
resolved), ``command -v`` (the program is taken to be there). A mixin of :class:`.evaluator.Evaluator`."""

from __future__ import annotations

import os
import posixpath
import re

from .control import Break, Continue, Exit, Return, to_int
from .expand import NotKnown
from .syntax import Src
from .syntax import raw as _raw

_ASSIGN = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)', re.S)


class Builtins:
    def declare(self, kind: str, words, src: Src) -> int:
        flags = set()
        if kind == 'export':
            flags.add('x')
        if kind == 'readonly':
            flags.add('r')
        for g in words:
            raw = _raw(src, g)
            if not _ASSIGN.match(raw):
                fields = self.exp.fields(raw)
                for f in fields:
                    if f.startswith(('-', '+')) and len(f) > 1:
                        flags.update(f[1:]) if f[0] == '-' else flags.difference_update(f[1:])
                        continue
                    if 'f' in flags or 'p' in flags:
                        continue
                    held = re.match(r'([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z', f, re.S)
                    if held and not self.commented:
                        # `export $(grep -v '^#' .env | xargs)`: a field NAME=VALUE an expansion made is an
                        # assignment (bash's declaration builtins take their words after expansion)
                        self.assign(held.group(1), held.group(2), taint=list(self.unresolved) or None)
                        if 'x' in flags:
                            self.state.exported.add(held.group(1))
                        continue
                    if 'A' in flags and not self.commented:  # declare -A M: an associative array, empty
                        self.state.assoc.add(f)
                        if not isinstance(self.state.vars.get(f), dict):
                            self.state.assign(f, {}, self.line)
                        continue
                    if kind == 'local' or ('g' not in flags and kind in ('declare', 'typeset') and self.state.frames):
                        self.state.declare_local(f)
                        if f not in self.state.vars:
                            self.state.known_unset.add(f)
                    elif f not in self.state.vars and 'x' not in flags:
                        self.state.known_unset.add(f)
                    if 'x' in flags and not self.commented and 'n' not in flags:
                        self.state.exported.add(f)
                        self.state.touched.add(f)
                        self.state.set_line[f] = self.line
                continue
            if 'A' in flags and not self.commented and (m := _ASSIGN.match(raw)):
                self.state.assoc.add(m.group(1))  # declare -A M=(...): keys of its literal are words
            name, value, index, append, taint, defaults = self._assignment(g, src)
            if self.commented:
                continue
            if kind == 'local' or ('g' not in flags and kind in ('declare', 'typeset') and self.state.frames):
                self.state.declare_local(name)
            if 'n' in flags and isinstance(value, str) and not taint and _ASSIGN.match(value + '='):
                self.state.declare_ref(name, value)  # `local -n out=$2`: out stands for the variable named $2
                continue
            if 'i' in flags and isinstance(value, str):
                try:
                    value = str(self.exp.arith_value(value))
                except NotKnown:
                    pass
            self.assign(name, value, index, append, taint, defaults)
            if 'x' in flags:
                self.state.exported.add(name)
        return 0

    def builtin(self, name: str, argv: list[str], src: Src) -> int | None:
        st = self.state
        args = argv[1:]
        if name in ('true', ':'):
            return 0
        if name == 'false':
            return 1
        if name in ('test', '['):
            if self.unresolved:
                return None
            if self.defaults:
                self.by_default = True  # decided from a script argument's default (Evaluator.by_default)
            if name == '[':
                if args[-1:] != [']']:
                    return 2
                args = args[:-1]
            return self._decide([('w', a) for a in args], False)
        if name in ('command', 'type', 'hash'):
            return 0  # `command -v swift`: the program is taken to be installed (as a launch on its machine has it)
        if self.commented and name in (
            'source',
            '.',
            'eval',
            'cd',
            'pushd',
            'popd',
            'set',
            'shift',
            'unset',
            'read',
            'exit',
            'return',
            'break',
            'continue',
            'let',
        ):
            return 0
        if name in ('cd', 'pushd'):
            if name == 'pushd' and not args:
                return 1
            target = args[-1] if args and args[-1] != '--' else st.scalar('HOME')
            if target == '-':
                target = st.scalar('OLDPWD')
            return self.cd(target, push=name == 'pushd')
        if name == 'popd':
            stack = st.vars.get('__DIRSTACK__')
            if isinstance(stack, dict) and stack:
                top = stack.pop(max(stack))
                return self.cd(top)
            return 1
        if name in ('source', '.'):
            return self.source_file(args, src)
        if name == 'eval':
            # a word still unresolved holds its text as written (`$(ls -td ckpt-*)`): the eval'd text expands it
            # again, to the same unknown, so what it runs is read with that word unresolved
            text = ' '.join(args)
            return self.run_text(text, src.name, line=self.line) if text.strip() else 0
        if name == 'exit':
            raise Exit(to_int(args[0]) if args else st.status)
        if name == 'return':
            raise Return(to_int(args[0]) if args else st.status)
        if name in ('break', 'continue'):
            n = to_int(args[0]) if args else 1
            raise (Break if name == 'break' else Continue)(max(n or 1, 1))
        if name == 'set':
            if '--' in args:
                st.positional = args[args.index('--') + 1 :]
                st.args_unknown = False
                self._positional_taint(st, self.unresolved)
            elif args and not args[0].startswith(('-', '+')):
                st.positional = list(args)
                st.args_unknown = False
                self._positional_taint(st, self.unresolved)
            return 0
        if name == 'shift':
            n = to_int(args[0]) if args else 1
            if n is None or n > len(st.positional):
                return 1
            st.positional = st.positional[n:]
            # each argument's own unresolved names (Evaluator._positional_taint) move with it
            held = st.arg_taint()
            st.set_arg_taint(
                {k if k == '@' else f'@{int(k[1:]) - n}': v for k, v in held.items() if k == '@' or int(k[1:]) > n}
            )
            return 0
        if name == 'unset':
            fn = '-f' in args
            for a in args:
                if a.startswith('-'):
                    continue
                if fn:
                    st.funcs.pop(a, None)
                elif '[' in a and a.endswith(']'):
                    base, idx = a[:-1].split('[', 1)
                    arr = st.vars.get(base)
                    if isinstance(arr, dict):
                        try:
                            arr.pop(self.exp.arith_value(idx), None)
                        except NotKnown:
                            pass
                else:
                    st.unset(a)
            return 0
        if name == 'let':
            status = 1
            for a in args:
                try:
                    status = 0 if self.exp.arith_value(a) != 0 else 1
                except NotKnown:
                    status = None
            return status
        if name == 'getopts':
            return self.getopts(args)
        if name in ('read', 'mapfile', 'readarray'):
            for a in args:
                if _ASSIGN.match(a + '=') and not a.startswith('-'):
                    self.assign(a, f'${a}', taint=[f'{name} {a}'])
            return None
        return 0 if name not in ('wait', 'kill') else None

    def read_stdin(self, args: list[str], stdin: str, env: dict) -> int | None:
        """bash's ``read [-r] [-a ARRAY] [-d DELIM] [-p PROMPT] [NAME...]`` on a known here-string/here-document
        (bash manual, "Bash Builtin Commands", read): one line up to DELIM; without -r a backslash quotes the next
        character and backslash-newline continues the line; the line is split at IFS (the command's own ``IFS=``
        prefix first) as in word splitting, the last NAME taking the rest of the line; with no NAME it goes to REPLY
        unsplit. Returns the status (1 when DELIM is not found), or None for options it does not model
        (-n/-N/-t/-u), so the caller falls back to leaving the variables unknown."""
        opts, names, i = {}, [], 0
        while i < len(args):
            a = args[i]
            if a == '--':
                names = args[i + 1 :]
                break
            if not a.startswith('-') or a == '-':
                names = args[i:]
                break
            j = 1
            while j < len(a):
                c = a[j]
                if c in 'adinNptu':
                    val = a[j + 1 :] if j + 1 < len(a) else (args[i + 1] if i + 1 < len(args) else None)
                    if val is None:
                        return 2
                    if j + 1 >= len(a):
                        i += 1
                    opts[c] = val
                    break
                if c not in 'rse':
                    return 2  # bash: read: -x: invalid option
                opts[c] = ''
                j += 1
            i += 1
        if any(k in opts for k in 'nNtu'):
            return None
        delim = opts.get('d', '\n')[:1] or '\0'
        raw = 'r' in opts
        chars: list[tuple[str, bool]] = []  # (character, quoted by a backslash)
        k, found = 0, False
        while k < len(stdin):
            c = stdin[k]
            if c == delim:
                found = True
                break
            if c == '\\' and not raw and k + 1 < len(stdin):
                if stdin[k + 1] == '\n':
                    k += 2  # backslash-newline: the line goes on
                    continue
                chars.append((stdin[k + 1], True))
                k += 2
                continue
            chars.append((c, False))
            k += 1
        ifs = env['IFS'] if 'IFS' in env else self.exp._ifs()
        status = 0 if found else 1
        held = list(self.stdin_taint)  # what the here-string holds unresolved, the variables read hold too
        if not names and 'a' not in opts:
            self.assign('REPLY', ''.join(c for c, _ in chars), taint=held, defaults=list(self.stdin_defaults))
            return status
        white = {c for c in ifs if c in ' \t\n'}
        delims = set(ifs)

        def skip_white(n: int) -> int:
            while n < len(chars) and not chars[n][1] and chars[n][0] in white:
                n += 1
            return n

        limit = None if 'a' in opts else len(names)
        fields: list[str] = []
        n = skip_white(0) if ifs else 0
        while n < len(chars) and ifs and (limit is None or len(fields) < limit - 1):
            start = n
            while n < len(chars) and (chars[n][1] or chars[n][0] not in delims):
                n += 1
            fields.append(''.join(c for c, _ in chars[start:n]))
            n = skip_white(n)
            if n < len(chars) and not chars[n][1] and chars[n][0] in delims:
                n = skip_white(n + 1)  # one non-white IFS character with the white space around it
        if n < len(chars):
            end = len(chars)
            while end > n and not chars[end - 1][1] and chars[end - 1][0] in white:
                end -= 1
            fields.append(''.join(c for c, _ in chars[n:end]))
        given = list(self.stdin_defaults)  # ... and the defaults it holds
        if 'a' in opts:
            self.assign(opts['a'], dict(enumerate(fields)), taint=held, defaults=given)
        for idx, nm in enumerate(names):
            self.assign(nm, fields[idx] if idx < len(fields) else '', taint=held, defaults=given)
        return status

    def cd(self, target: str | None, push: bool = False) -> int:
        st = self.state
        if target is None:
            return 1
        if not target.startswith('/') and st.cwd is None:
            return None
        new = posixpath.normpath(posixpath.join(st.cwd or '/', target))
        if new.startswith('//'):
            new = new[1:]
        if not os.path.isdir(new):
            if os.path.exists(new):
                return 1
            # the launch machine's directory (`cd /scratch/.../project || exit 1`): bash there goes in; here the paths
            # after it are read from where the guard runs (the user's checkout of the project, as a rule), noted
            self._assume_note(
                f'did not cd to {target} (line {self.line}): no such directory here; the paths after it are read '
                'from the directory the check runs in'
            )
            return 0
        if push:
            stack = st.vars.get('__DIRSTACK__')
            stack = dict(stack) if isinstance(stack, dict) else {}
            stack[len(stack)] = st.cwd
            st.vars['__DIRSTACK__'] = stack
        if st.cwd is not None:
            st.vars['OLDPWD'] = st.cwd
        st.cwd = new
        st.vars['PWD'] = new
        return 0

    def getopts(self, args: list[str]) -> int | None:
        """bash's ``getopts OPTSTRING NAME [ARG...]`` (bash manual, "Bourne Shell Builtins"; builtins/getopts.def): the
        next option of ARG or the positional parameters from ``OPTIND``, NAME set to it and ``OPTARG`` to its
        argument; ``-abc`` clusters and ``-ovalue`` attached arguments; ``--`` and the first non-option end the
        options (status 1, NAME ``?``); an unknown option or a missing argument set NAME to ``?`` (with a leading
        ``:``, silent: ``?`` or ``:`` and OPTARG the option letter). The script's own options when they are not given
        here (``$#`` unknown) are taken as none, so the defaults the script sets are the values (noted)."""
        st = self.state
        if len(args) < 2 or self.unresolved:
            return None if self.unresolved else 2
        spec, var = args[0], args[1]
        if args[2:]:
            params = args[2:]
        elif st.args_unknown and not st.frames:
            self._assume_note(
                "the script's options (getopts) are not given here: none taken, so the values it sets before them "
                'are planned; pass them with grpo-guard check -- bash SCRIPT ARGS'
            )
            self.assign(var, '?')
            return 1
        else:
            params = list(st.positional)
        silent, letters = spec.startswith(':'), spec[1:] if spec.startswith(':') else spec
        try:
            optind = int(st.scalar('OPTIND') or '1')
        except ValueError:
            optind = 1
        held = str(st.scalar('__GETOPTS_AT__') or '')
        pos = int(held.split(':')[1]) if held.split(':')[0] == str(optind) and ':' in held else 1
        st.unset('OPTARG')

        def done(status: int, idx: int, p: int, name: str) -> int:
            self.assign('OPTIND', str(idx))
            self.assign('__GETOPTS_AT__', f'{idx}:{p}')
            self.assign(var, name)
            return status

        if pos == 1:
            if optind > len(params) or optind < 1:
                return done(1, optind, 1, '?')
            word = params[optind - 1]
            if word == '--':
                return done(1, optind + 1, 1, '?')
            if not word.startswith('-') or word == '-':
                return done(1, optind, 1, '?')
        word = params[optind - 1]
        c, pos = word[pos], pos + 1
        end = pos >= len(word)
        k = letters.find(c) if c != ':' else -1
        if k < 0:
            if silent:
                self.assign('OPTARG', c)
            return done(0, optind + 1 if end else optind, 1 if end else pos, '?')
        if letters[k + 1 : k + 2] != ':':
            return done(0, optind + 1 if end else optind, 1 if end else pos, c)
        if not end:
            self.assign('OPTARG', word[pos:])
            return done(0, optind + 1, 1, c)
        if optind < len(params):
            self.assign('OPTARG', params[optind])
            return done(0, optind + 2, 1, c)
        if silent:
            self.assign('OPTARG', c)
            return done(0, optind + 1, 1, ':')
        return done(0, optind + 1, 1, '?')

    def source_file(self, args: list[str], src: Src) -> int | None:
        if not args or self.unresolved:
            return None
        path = args[0]
        candidates = (
            [path]
            if path.startswith('/')
            else [
                p
                for p in (
                    os.path.join(self.state.cwd, path) if self.state.cwd else None,
                    os.path.join(os.path.dirname(self.source), path),
                )
                if p
            ]
        )
        found = next((p for p in candidates if os.path.isfile(p)), None)
        if found is None:
            # the file is the launch machine's (a cluster's env script, /usr/local/Ascend/.../set_env.sh): bash there
            # reads it, so `source FILE || exit 1` goes on; what it would set stays unknown (and is named where used)
            self._assume_note(
                f'did not read {path} (sourced at line {self.line}): no such file here; taken to load on the '
                "launch's machine"
            )
            return 0
        if self.source_depth >= self.limits.source_depth:
            raise self.too_long(f'{self.limits.source_depth} nested `source`s')
        try:
            with open(found, encoding='utf-8', newline='') as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return 1
        st = self.state
        old_pos = st.positional
        if args[1:]:
            st.positional = args[1:]
        st.sources.insert(0, path)
        self.source_depth += 1
        try:
            return self.run_text(text, src.name, line=src.line if src.line is not None else self.line)
        except Return as r:
            return r.status
        finally:
            self.source_depth -= 1
            st.sources.pop(0)
            if args[1:]:
                st.positional = old_pos

    def _assume_note(self, text: str) -> None:
        """A note every later command carries (a file `source`d that is not there)."""
        if text not in self.notes:
            self.notes.append(text)
