"""Shared CLI plumbing: split ``[options] CONFIG [-- extra swift args]``, read ``--model-config``, print errors as
one line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import GuardError


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """(our own args, args after the first ``--`` that belong to ``swift rlhf``)."""
    if '--' in argv:
        i = argv.index('--')
        return argv[:i], argv[i + 1 :]
    return argv, []


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write('\n')


MAX_ERROR_CHARS = 1000
"""An error quoting a 100,000-character value keeps its start and its end (where the fix is)."""


def fail(message: str, code: int = 2) -> int:
    message = ' '.join(message.splitlines())  # one line, whatever the input quoted
    if len(message) > MAX_ERROR_CHARS:
        message = f'{message[: MAX_ERROR_CHARS * 2 // 3]} … {message[-MAX_ERROR_CHARS // 3 :]}'
    print(f'error: {message}', file=sys.stderr)
    return code


def parse_command(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | int:
    """Parse a ``COMMAND [options]`` line. An int is the exit status to return at once: 0 after
    ``--help``, 2 after a usage error or when no command was given (the help is printed)."""
    try:
        opts = parser.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code in (0, None) else 2
    if opts.cmd is None:
        parser.print_help()
        return 2
    return opts


def launch_args(config: str | None, extra: list[str]) -> list[str]:
    """What the user typed: the config or script (if any) and what follows `--`."""
    if config is None and not extra:
        raise GuardError(
            'give a CONFIG file or launcher script, or a command line after `--` '
            '(e.g. -- swift rlhf --rlhf_type grpo ...)'
        )
    if config is not None and extra[:2] == ['swift', 'rlhf']:
        extra = extra[2:]
    command = _header_command(config)
    if command and extra[: len(command)] == command:
        extra = extra[len(command) :]
    return command + ([config] if config else []) + extra


def _header_command(config: str | None) -> list[str]:
    """A recipe YAML's ``# @command: megatron rlhf`` (the command that runs it; none: ``swift rlhf``)."""
    if not config or Path(config).suffix.lower() not in ('.yaml', '.yml') or not Path(config).is_file():
        return []
    from ..recipes import read_meta

    return str(read_meta(Path(config)).get('command', '')).split()


def environ_with(pairs: list[str] | None) -> dict[str, str]:
    """This process's environment plus ``--env NAME=VALUE`` (values a cluster would set: ``--env RANK=0``)."""
    import os
    import re

    env = dict(os.environ)
    for pair in pairs or []:
        m = re.match(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', pair, re.S)
        if not m:
            raise GuardError(f'--env {pair}: expected NAME=VALUE (e.g. --env NNODES=2)')
        env[m.group(1)] = m.group(2)
    return env


def model_config_arg(path: str | None) -> dict | None:
    """``--model-config``: a dir holding config.json, the file itself, or a hub id (``org/name``, no such path here):
    its bundled or cached config.json, else that file alone from the Hugging Face hub."""
    if not path:
        return None
    p = Path(path)
    from ..model_source import looks_local

    if not p.exists() and path.count('/') == 1 and not looks_local(path):
        import os

        from ..model_fetch import Hub
        from ..models import load_model_config

        hub = Hub('hf', None, os.environ.get('HF_TOKEN'), '--model-config names a hub id')
        return load_model_config(path, hub)
    f = p / 'config.json' if p.is_dir() else p
    try:
        return json.loads(f.read_text(encoding='utf-8'))
    except FileNotFoundError:
        raise GuardError(
            f'--model-config {path}: no config.json there; pass the model dir or its config.json'
        ) from None
    except (OSError, ValueError) as e:
        raise GuardError(f'--model-config {path}: not a readable config.json ({e})') from None


def package_version() -> str:
    """The installed distribution's version (``--version`` of grpo-guard, grpo-recipes and grpo-data)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version('grpo-recipes')
    except PackageNotFoundError:
        return 'unknown (grpo-recipes is not installed; pip install -e .)'


class _PipeSafe:
    """sys.stdout that survives its reader going away (``grpo-guard check ... | head -3``): once a write or flush
    meets a closed pipe, the rest of the output goes to /dev/null and the command runs on, so its exit status is
    still its verdict's. (rich would raise SystemExit(1) from Console.on_broken_pipe; print, BrokenPipeError.)"""

    def __init__(self, stream):
        self._stream = stream
        self.broken = False

    def write(self, text):
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._to_devnull()
        return len(text)

    def flush(self):
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._to_devnull()

    def _to_devnull(self):
        import os

        self.broken = True
        try:  # what is left in the stream's buffer is flushed again at exit: let it go nowhere, quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


class pipe_safe_stdout:
    """``with pipe_safe_stdout():`` around a command: a closed stdout pipe ends the output, not the command."""

    def __enter__(self):
        self._saved = sys.stdout
        sys.stdout = _PipeSafe(sys.stdout)
        return sys.stdout

    def __exit__(self, *exc):
        stream, sys.stdout = sys.stdout, self._saved
        if isinstance(stream, _PipeSafe):
            stream.flush()
        return False
