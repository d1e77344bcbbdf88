"""User-facing errors: one line naming the file, line or argument, and the fix.

The CLI prints ``str(err)`` and exits with ``err.exit_code``; it never shows a traceback for these.
"""


class GuardError(Exception):
    """Bad input (missing file, invalid YAML, bad ENV block, bad flag). Exit status 2."""

    exit_code = 2


class InvalidLaunch(GuardError):
    """The launch itself is invalid (ms-swift's parser would reject it). Exit status 1."""

    exit_code = 1
