"""Every fix in the launch's own syntax, and the fixed launch that ``--verify`` puts through the real parser.

A fix is written for where the user sets the value: ``key: value`` lines for a YAML config (``swift rlhf
config.yaml``, ``trl grpo --config f.yaml`` / ``TrlParser``'s ``--config``), ``--key value`` flags for a command line
(``swift rlhf --key value ...``, ``accelerate launch train.py --flag ...``). The rules and the fix search write in
one neutral form (ms-swift's YAML names; a TRL launch's report is reworded by its front end, ``Framework.reword``);
the front end's ``render_fixes`` turns that into the launch's syntax after the check (ms-swift's flags:
``frontends/swift/wording.py``; TrlParser's ``--config`` keys or a script's own lines: ``frontends/trl/wording.py``).
"""

from __future__ import annotations

import re

from .launch import CONFIG_SUFFIXES

PLACEHOLDER = r'<[^<>]*>(?:\s*[-+*/]\s*\d+)*'
"""A value the user works out (``<your longest prompt> + 2048``): never split into words nor quoted as a string."""


def syntax_of(launch) -> tuple[str, str | None]:
    """('yaml', the file) when the launch's settings come from a YAML/JSON config file, else ('flags', None)."""
    if not launch.fw.settings_yaml_in_config:
        f = launch.trl.trl_config
        return ('yaml', f) if f else ('flags', None)
    f = launch.config_file or ''
    return ('yaml', f) if f.endswith(CONFIG_SUFFIXES) else ('flags', None)


def render_fixes(report) -> None:
    """Rewrite every finding's fix (and the memory fix) in the syntax of the launch (see the module docstring)."""
    if report.launch.kind != 'train':
        return
    report.launch.fw.call('render_fixes', report)


def fixed_launch(launch, fix):
    """The launch with ``fix`` applied as the user would apply it, for the real parser (``--verify``); and the
    parts of the fix the parser cannot see (accelerate's own options)."""
    return launch.fw.call('fixed_launch', launch, fix)


def placeholder_named(text: str | None) -> str | None:
    """A setting whose value is a placeholder, as one token the user replaces and the placeholder beside it:
    ``--flag <your longest prompt> + 2048`` -> ``--flag N (N = <your longest prompt> + 2048)`` (a shell would read
    ``<your`` as a redirection), ``key: <...>`` -> ``key: N  # N = <...>`` (YAML would read a string)."""
    if not text:
        return text
    text = re.sub(rf'(?m)^(\w+): ({PLACEHOLDER})(.*)$', r'\1: N  # N = \2\3', text)
    return re.sub(rf'((?<![\w-])--[\w-]+|(?<![\w-])\w+:) ({PLACEHOLDER})', r'\1 N (N = \2)', text)
