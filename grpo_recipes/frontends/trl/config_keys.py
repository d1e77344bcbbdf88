"""Keys of a TRL ``--config`` YAML that the parser's dataclasses lack: one decision for ``check`` and ``validate``.

TrlParser (trl/scripts/utils.py) sets each config key as the default of the parser action whose ``dest`` matches
(``set_defaults_with_config``) and returns the keys no action took. What happens to them depends on the release:

- up to 0.18, ``parse_args_and_config`` drops them silently (v0.18.0 trl/scripts/utils.py: the config's remaining
  strings are only returned with ``return_remaining_strings=True``);
- from 0.19 it raises ``ValueError("Unknown arguments from config file: [...]. Please remove them, add them to the
  dataclass, or set `fail_with_unknown_args=False`.")`` (v0.19.0, huggingface/trl PR #3543 "Fail when unknown args
  are provided in the config file"; unchanged to v0.29.1).

"The dataclasses" are the script's: a script whose ``TrlParser``/``HfArgumentParser`` takes TRL's own
``ScriptArguments``/``GRPOConfig``/``ModelConfig`` has exactly TRL's fields; a script with its own dataclasses
(open-r1's ``GRPOScriptArguments`` and ``GRPOConfig`` subclass) has theirs, read in its repository by
frontends/trl/script_parsers.py (frontends/trl/verdicts.py decides with them; ``trl grpo``'s CLI hands such keys to
accelerate: frontends/trl/cli_config.py). This module is the decision where those classes could not be read: a key
TRL's classes lack is, on TRL >= 0.19, an error for TRL's own classes and a warning for a script's own; on TRL <= 0.18
a warning (it has no effect). ``validate`` runs the installed TRL's parser and judges what it leaves to a script's own
dataclasses by their fields where they were read (realparse.py ``_own_leftovers``), so both say the same.
"""

from __future__ import annotations

import ast

REJECTS_FROM = (0, 19)
"""First TRL release whose TrlParser rejects unknown config-file keys."""
TRL_CLASSES = ('ScriptArguments', 'GRPOConfig', 'ModelConfig')
PARSERS = ('TrlParser', 'HfArgumentParser')


def parser_classes(script: str | None, text: str | None = None) -> str | None:
    """'trl' when the script parses with TRL's own dataclasses (or is ``trl grpo``), 'own' when with any other,
    None when it cannot be told (no script text, or no parser call in it)."""
    if script == 'trl grpo':
        return 'trl'
    if text is None:
        if not script or not script.endswith('.py'):
            return None
        try:
            with open(script, encoding='utf-8') as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    from_trl = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'trl':
            from_trl.update(a.asname or a.name for a in node.names)
    kinds = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name not in PARSERS:
            continue
        arg = node.args[0]
        items = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
        names = [
            (
                i.attr
                if isinstance(i, ast.Attribute) and isinstance(i.value, ast.Name) and i.value.id == 'trl'
                else i.id
                if isinstance(i, ast.Name)
                else None
            )
            for i in items
        ]
        own = any(
            n is None or n not in TRL_CLASSES or (n not in from_trl and not isinstance(i, ast.Attribute))
            for n, i in zip(names, items)
        )
        kinds.append('own' if own else 'trl')
    if not kinds:
        return None
    return 'own' if 'own' in kinds else 'trl'


def _vt(v):
    from ...versions import version_tuple

    return version_tuple(v)


def config_key_verdict(flag: str, launch, trl_version: str | None):
    """None when ``flag`` is not a key of the launch's --config file alone (the command-line rules judge it);
    else (severity or None for no finding, message, fix)."""
    from .arguments import CLASSES, describe_unknown, snapshot

    key = flag.lstrip('-').split('=', 1)[0].replace('-', '_')
    info = launch.trl
    if key not in (info.trl_config_keys or ()):
        return None
    typed = {a.lstrip('-').split('=', 1)[0].replace('-', '_') for a in (info.script_args or []) if a.startswith('--')}
    if key in typed:
        return None
    msg, removed = describe_unknown(flag, CLASSES, trl_version)
    if not msg:
        return (None, '', None)  # a field the judged release still had
    version = trl_version or snapshot()['trl_version']
    vt = _vt(version)
    config = info.trl_config
    what = msg.split(': ', 1)[1] if ': ' in msg else msg
    kind = info.parser_classes
    if kind != 'own':
        what = what.replace(' (your script may define it)', '')
    where = f'{config}: `{key}`'
    if vt is not None and vt >= REJECTS_FROM:
        head = (
            f'{where}: {what}. TRL {version}\'s TrlParser stops with "Unknown arguments from config file: '
            f"['--{key}', ...]\""
        )
        if kind == 'own':
            return ('warning', head + " unless the script's own dataclasses define it", None)
        if kind is None and not removed:
            # the script's parser was not read (the script is not here, or parses in a way not read): a key TRL never
            # had may be a field of its own dataclasses (open-r1's GRPOScriptArguments: reward_funcs, system_prompt)
            return (
                'warning',
                head + " unless the script's own dataclasses define it (its parser was not read)",
                f'remove `{key}` from {config}, unless the script defines it',
            )
        assumed = '' if kind == 'trl' else " (the script's parser was not read; TRL's own dataclasses assumed)"
        return ('error', head + assumed, f'remove `{key}` from {config}')
    return (
        'warning',
        f"{where}: {what}. TRL {version}'s TrlParser drops unknown config-file keys silently "
        f'(rejected from 0.19): it has no effect',
        f'remove `{key}` from {config}',
    )
