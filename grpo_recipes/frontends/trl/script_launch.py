"""A TRL launch's training script, read as Python would run it (with ``ast``; nothing of it is executed): which of the
launch's words TRL's parser gets, the settings the script writes, and what its own parsers make of the rest.

- a script that never parses its command line: its words are ignored (frontends/trl/script_cli.py);
- a script with its own ``argparse`` and no TrlParser/HfArgumentParser: argparse takes the words (an unknown one
  stops it: "unrecognized arguments"), TRL's parser gets none, and ``GRPOConfig(learning_rate=args.lr)`` takes the
  parsed value; with ``parse_known_args`` and a TrlParser, the words argparse leaves go on to TRL's parser;
- a script whose TrlParser takes its own dataclasses: their fields, read in the script's repository;
- a script that loads its own YAML into a GRPOConfig class (``MyConfig(**yaml.safe_load(...))``): the file's keys are
  that class's keyword arguments.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from ...errors import GuardError


def yaml_flags(data: dict, skip: tuple[str, ...] = ()) -> list[str]:
    """A config mapping as flags, the way TrlParser hands its keys to argparse (lists spread, dicts as JSON)."""
    out: list[str] = []
    for k, v in data.items():
        if k in skip:
            continue
        out += [f'--{k}'] + (
            [str(x) for x in v] if isinstance(v, list) else [json.dumps(v) if isinstance(v, dict) else str(v)]
        )
    return out


def read_script(
    script: str, script_args: list[str], info: dict[str, Any], environ: dict[str, str] | None = None
) -> list[str]:
    """The words TRL's parser reads for this script (the settings it writes first), with what was found recorded in
    ``info`` (the launch's TrlSpecifics fields). ``environ``: the environment the training process starts with,
    for the settings the script reads from it (``os.environ.get("LR", "2e-4")``)."""
    from .accelerate import _read_yaml
    from .script import read_script_settings
    from .script_cli import parses_command_line
    from .script_parsers import config_file_of, has_trl_parser, parser_dataclasses, script_argparse, self_loaded_config

    try:
        text = Path(script).read_text(encoding='utf-8')
    except (OSError, UnicodeDecodeError) as e:
        raise GuardError(f'{script}: cannot read ({e})') from None
    try:
        tree: ast.Module | None = ast.parse(text)
    except SyntaxError:
        tree = None
    text_ok = tree is not None
    parse: dict[str, Any] = {}
    bound: dict[str, Any] = {}
    trl_words = list(script_args)
    trl_parser = text_ok and has_trl_parser(text)
    ap = script_argparse(text, script_args, prog=script) if text_ok else None
    if ap is not None and (not trl_parser or ap.known):
        parse['argparse'] = {
            'error': ap.error,
            'rest': ap.rest if ap.known else [],
            'known': ap.known,
            'line': ap.line,
            'to_trl': trl_parser,
        }
        bound = {f'{ns}.{k}': v for ns in ap.namespaces for k, v in ap.values.items()}
        # parse_known_args and a TRL parser: it reads what argparse left when handed it (``args=rest``), else the
        # whole command line (sys.argv), argparse's own options included
        trl_words = (list(ap.rest) if ap.rest_passed else list(script_args)) if (ap.known and trl_parser) else []
        parse['argparse']['rest_passed'] = ap.rest_passed
    if (
        tree is not None
    ):  # its own dataclasses' fields and the YAML files it loads itself, for settings written from them
        from .script import ENVIRON
        from .script_parsers import dataclass_bindings, yaml_bindings

        bound = {
            **({ENVIRON: dict(environ)} if environ is not None else {}),
            **yaml_bindings(tree, script),
            **(dataclass_bindings(tree, script, script_args) if trl_parser else {}),
            **bound,
        }
    settings = read_script_settings(text, bound)
    _adapter_config(settings)
    if 'argparse' in parse and not trl_parser:  # fixes go where the script takes its settings (script_cli.py)
        parse['argparse'].update(
            lines=settings.lines,
            config_line=settings.config_line,
            options={
                flag: ap.options[attr.split('.', 1)[1]]
                for flag, attr in settings.from_cli.items()
                if attr.split('.', 1)[1] in ap.options
            },
        )
    if trl_parser:
        own = parser_dataclasses(text, script)
        if own is not None:
            parse.update(
                own_fields=sorted(own.fields),
                own_classes=own.classes,
                own_unread=own.unread,
                parse_method=own.method,
                remaining_ok=own.remaining_ok,
            )
    loaded = self_loaded_config(text, script) if text_ok else None
    flags = list(settings.flags)
    if loaded is not None:
        path = config_file_of(script_args)
        parse['self_loaded'] = {
            'cls': loaded.cls,
            'fields': sorted(loaded.fields) if loaded.fields is not None else None,
            'line': loaded.line,
            'file': path,
        }
        trl_words = []  # the command line is the script's own (the file's path); the file is the config
        if path is not None:
            data = _read_yaml(Path(path), f'the config {script} loads')
            flags = yaml_flags(data) + flags
            info['trl_config'] = path
            info['trl_config_keys'] = [str(k) for k in data]
    if parse:
        info['script_parse'] = parse
    if not parses_command_line(text):  # its flags are ignored when it runs: plan without them
        info['ignores_cli'] = {
            'script': script,
            'ignored': list(script_args),
            'lines': settings.lines,
            'config_line': settings.config_line,
        }
        trl_words = []
    info['script_args'] = trl_words
    if flags or settings.unread:
        note = settings.note(script)
        if loaded is not None and info.get('trl_config'):
            note = (
                f"{info['trl_config']}'s keys are {loaded.cls}'s keyword arguments ({script}:{loaded.line} "
                f'loads the file itself)' + (f'; {note}' if note else '')
            )
        info['script_settings'] = note
        info['script_flags'] = flags
        info['script_lines'] = dict(settings.lines)
        return flags + trl_words
    return trl_words


def _adapter_config(settings) -> None:
    """``PeftModel.from_pretrained(base, "dir")``: the LoraConfig the adapter was saved with
    (``dir/adapter_config.json``, peft/config.py ``PeftConfigMixin.from_pretrained``), where that directory is here."""
    if not settings.adapter:
        return
    path = Path(settings.adapter) / 'adapter_config.json'
    try:
        data = json.loads(path.read_text(encoding='utf-8'))
    except (OSError, UnicodeDecodeError, ValueError):
        return
    if not isinstance(data, dict) or data.get('peft_type', 'LORA') != 'LORA':
        return
    from .script import LORA_FLAGS

    for key, flag in LORA_FLAGS.items():
        v = data.get(key)
        if v is None or flag == 'lora_dropout':
            continue
        settings.flags += [f'--{flag}', *([str(x) for x in v] if isinstance(v, list) else [str(v)])]
        settings.read.append(f'{path} {key}')
    settings.unread = [u for u in settings.unread if not u.startswith("the adapter's LoraConfig")]
