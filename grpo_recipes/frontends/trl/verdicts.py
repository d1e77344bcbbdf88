"""The findings on a TRL launch's arguments: what the parser that reads each word makes of it.

Whose parser that is depends on the launch (frontends/trl/script_launch.py read the script): TRL's TrlParser over
TRL's dataclasses or the script's own (their fields read in its repository), the script's own argparse, the
dataclass a script loads its YAML into, or, for ``trl grpo``, TRL's CLI and then ``accelerate launch``. And on the
release: TRL >= 0.19 refuses a config-file key no dataclass defines; an older TRL's GRPOConfig had the
TrainingArguments fields of the transformers it required. One decision per word, for ``check``; ``validate`` runs the
real parsers where they can run here.
"""

from __future__ import annotations

from ...findings import ERROR, WARNING, Finding
from ...versions import version_tuple
from .arguments import (
    STALE,
    _fields,
    classes_of,
    describe_unknown,
    numeric_type,
    parse_args,
    release_training_fields,
    snapshot,
    takes_a_value,
)
from .config_keys import REJECTS_FROM, config_key_verdict

TRL_PARSER = 'trl/scripts/utils.py (TrlParser.parse_args_and_config)'
HF_PARSER = 'transformers/hf_argparser.py (HfArgumentParser.parse_args_into_dataclasses)'
TRL_CLI_FROM = (0, 29)
"""trl/cli/main.py + trl/cli/commands/training.py: ``trl grpo``'s leftovers go to ``accelerate launch``."""
BF16_OPTIONAL_FROM = (0, 19)
"""GRPOConfig declares ``bf16: Optional[bool] = None`` from v0.19.0 (trl/trainer/grpo_config.py; before,
TrainingArguments' ``bf16: bool = False``, which takes a bare flag)."""
GRPO_SCRIPT_REMAINING_FROM = (0, 23)
"""trl/scripts/grpo.py parses with ``return_remaining_strings=True`` from v0.23.0 (and ignores what is left)."""


def _key(flag: str) -> str:
    return flag.lstrip('-').split('=', 1)[0].replace('-', '_')


def argument_findings(launch, remaining: list[str], trl_version: str | None) -> list[Finding]:
    """Findings (args.unknown, args.config-key, args.value) on a TRL launch's words that its parser refuses or
    ignores. ``remaining``: the words TRL's snapshot fields did not take (read_config)."""
    info = launch.trl
    parse = info.script_parse or {}
    version = trl_version or snapshot()['trl_version']
    vt = version_tuple(version)
    classes = classes_of(info.script)
    out: list[Finding] = []
    out += _argparse_findings(info, parse)
    loaded = parse.get('self_loaded')
    if loaded:
        out += _self_loaded_findings(info, loaded, trl_version)
    release_fields = release_training_fields(trl_version)[1]
    own = parse.get('own_fields')
    own_read = own is not None and not parse.get('own_unread')
    errors = None
    for flag in remaining:
        key = _key(flag)
        config_only = key in (info.trl_config_keys or ()) and key not in _typed(info)
        if loaded and config_only:
            continue  # judged above, as the dataclass's __init__ judges it
        spec = _fields(*classes).get(key)
        if spec is not None:  # a field TRL knows, in the leftovers: argparse refused its value
            if errors is None:
                errors = parse_args(launch.argv, classes)[0].get('_errors', {})
            msg = next((m for f, m in errors.items() if _key(f) == key), None)
            if key == 'bf16' and vt is not None and vt[:2] < BF16_OPTIONAL_FROM and msg and 'expected one' in msg:
                continue  # that release's bf16 was TrainingArguments' `bool = False`: a bare flag is True
            if msg:
                number = numeric_type(spec)
                fix = (
                    f'--{key} true'
                    if takes_a_value(spec)
                    else f'--{key} <{number}>'
                    if number
                    else f'--{key} true|false'
                )
                why = (
                    f' ({key} is typed `{spec["type"]}` with default None, and HfArgumentParser gives such a '
                    f'flag no implicit value)'
                    if takes_a_value(spec)
                    else ''
                )
                out.append(
                    Finding(
                        ERROR,
                        'args.value',
                        [key],
                        f'{flag}: TRL {version}\'s parser stops with "{msg}"{why}',
                        fix,
                        'transformers/hf_argparser.py (HfArgumentParser._parse_dataclass_field)',
                    )
                )
            continue
        if own is not None and (key in own or key in release_fields):
            continue  # the script's own dataclasses define it
        if key in release_fields:
            continue
        if key in STALE:
            pass  # a name an older TRL had: its own explanation (describe_unknown), by release
        elif info.script == 'trl grpo' and vt is not None:
            f = _trl_cli(flag, key, info, version, vt, config_only)
            if f is not None:
                out.append(f)
                continue
        elif own_read and config_only and info.parser_classes == 'own':
            out.append(_own_config_key(flag, key, info, parse, version, vt))
            continue
        elif own_read and not config_only and not parse.get('remaining_ok'):
            out.append(_own_command_line(flag, key, info, parse))
            continue
        verdict = config_key_verdict(flag, launch, trl_version)  # a --config file's key
        if verdict is not None:
            if verdict[0]:
                out.append(Finding(verdict[0], 'args.config-key', [key], verdict[1], verdict[2], TRL_PARSER))
            continue
        msg, fatal = describe_unknown(flag, classes, trl_version)
        if not msg:
            continue
        line = (info.script_lines or {}).get(key)
        if fatal and line is not None and flag not in (info.script_args or []):
            # a keyword the script writes itself (`GRPOConfig(max_prompt_length=512)`): the dataclass refuses it
            out.append(
                Finding(
                    ERROR,
                    'args.unknown',
                    [key],
                    f'{info.script}:{line} sets {key}= in code: {msg}. GRPOConfig(...) stops with '
                    f'"GRPOConfig.__init__() got an unexpected keyword argument \'{key}\'"',
                    f'remove {key}=... at {info.script}:{line}, or check with the TRL the script was written for '
                    f'(--trl-version)',
                    'trl/trainer/grpo_config.py (GRPOConfig, a dataclass)',
                )
            )
            continue
        out.append(
            Finding(
                ERROR if fatal else WARNING,
                'args.unknown',
                [key],
                msg
                + (
                    '. TrlParser stops with "Some specified arguments are not used by the HfArgumentParser"'
                    if fatal
                    else ''
                ),
                f'remove {flag}' if fatal else None,
                'trl/scripts/utils.py (TrlParser)',
            )
        )
    if own_read:
        out += _trl_fields_the_script_lacks(info, parse, set(own) | release_fields, version, vt)
    if parse.get('cli_taken') and vt is not None and vt[:2] < TRL_CLI_FROM:
        out += [_before_trl_cli(key, info, version, vt) for key in parse['cli_taken']]
    return out


def _before_trl_cli(key: str, info, version: str, vt) -> Finding:
    """A ``trl grpo --config`` key TRL 0.29's CLI hands to accelerate (``accelerate_config``, ``num_processes``), on
    an older TRL: its trl/cli.py launched grpo.py with ``launch_command_parser().parse_args([script])`` (no launch
    options), and grpo.py reads the key as any other config key."""
    config = info.trl_config
    head = (
        f"{config}: `{key}`: TRL {version}'s `trl grpo` passes no launch options to accelerate (trl/cli.py before "
        f"0.29); this plan uses it as TRL 0.29's CLI does"
    )
    if REJECTS_FROM <= vt[:2] < GRPO_SCRIPT_REMAINING_FROM:
        return Finding(
            ERROR,
            'args.config-key',
            [key],
            f"{head}, but TRL {version}'s trl/scripts/grpo.py stops with "
            f'"Unknown arguments from config file: [\'--{key}\', ...]"',
            f'remove `{key}` from {config}',
            TRL_PARSER,
        )
    return Finding(
        WARNING,
        'args.config-key',
        [key],
        f'{head}; there it has no effect',
        f"remove `{key}` from {config} and pass accelerate's options to `accelerate launch`",
        TRL_PARSER,
    )


def _trl_fields_the_script_lacks(info, parse: dict, own: set[str], version: str, vt) -> list[Finding]:
    """Words TRL's usual classes take (so read_config applied them) that the script's parser classes lack:
    ``TrlParser((GRPOConfig,))`` has no ``--model_name_or_path``."""
    trl = set(_fields(*classes_of(info.script)))
    out = []
    typed = [_key(a) for a in (info.script_args or []) if a.startswith('--')]
    for key in dict.fromkeys(typed):
        if key in trl and key not in own and key != 'config' and not parse.get('remaining_ok'):
            out.append(_own_command_line(f'--{key}', key, info, parse))
    for key in info.trl_config_keys or ():
        if key in trl and key not in own and key not in typed:
            out.append(_own_config_key(f'--{key}', key, info, parse, version, vt))
    return out


def _typed(info) -> set[str]:
    return {_key(a) for a in (info.script_args or []) if a.startswith('--')}


def _argparse_findings(info, parse: dict) -> list[Finding]:
    ap = parse.get('argparse')
    if not ap:
        return []
    script = info.script
    if ap.get('error'):
        words = ap['error'].split(': ', 1)[1].split() if ap['error'].startswith('unrecognized') else []
        flags = [w for w in words if w.startswith('-')] or [script]
        fix = (
            f'remove {" ".join(words)} (or add_argument it in {script})'
            if words
            else f"the value {script}'s argparse expects"
        )
        return [
            Finding(
                ERROR,
                'args.unknown',
                [_key(f) for f in flags],
                f"{script}: the script's argparse would exit 2: {ap['error']} ({script}:{ap['line']} parses "
                f'its command line with argparse)',
                fix,
                'argparse (Python standard library: ArgumentParser.parse_args -> error)',
            )
        ]
    rest = [w for w in ap.get('rest') or [] if w.startswith('-')]
    if rest and not ap.get('to_trl'):
        return [
            Finding(
                WARNING,
                'args.unknown',
                [_key(f) for f in rest],
                f"{script}: {' '.join(ap['rest'])}: left by the script's parse_known_args ({script}:"
                f'{ap["line"]}) and read by nothing else in it: no effect',
                f'remove {" ".join(ap["rest"])}',
                'argparse (Python standard library: ArgumentParser.parse_known_args)',
            )
        ]
    return []


def _self_loaded_findings(info, loaded: dict, trl_version: str | None) -> list[Finding]:
    fields = loaded.get('fields')
    if fields is None or not loaded.get('file'):
        return []
    known = set(fields) | release_training_fields(trl_version)[1]
    cls, script, config = loaded['cls'], info.script, loaded['file']
    out = []
    for key in info.trl_config_keys or ():
        if key in known:
            continue
        out.append(
            Finding(
                ERROR,
                'args.config-key',
                [key],
                f"{config}: `{key}`: {cls}.__init__() got an unexpected keyword argument '{key}' "
                f"({script}:{loaded['line']} passes the file's keys to {cls}(**...): each must be one of "
                f"its fields, TRL's GRPOConfig's and its own)",
                f'remove `{key}` from {config} (or add the field to {cls})',
                'dataclasses (the generated __init__ takes the fields only)',
            )
        )
    return out


def _trl_cli(flag: str, key: str, info, version: str, vt, config_only: bool) -> Finding | None:
    """``trl grpo``: a word none of its dataclasses defines, by release (frontends/trl/cli_config.py)."""
    config = info.trl_config
    classes = ', '.join(classes_of('trl grpo'))
    if vt[:2] >= TRL_CLI_FROM:
        where = f'{config}: `{key}`' if config_only else flag
        return Finding(
            ERROR,
            'args.config-key' if config_only else 'args.unknown',
            [key],
            f"{where}: neither a field of `trl grpo`'s dataclasses ({classes}) nor an accelerate launch "
            f'option: TRL {version}\'s CLI hands it to accelerate launch, which stops with "Accelerate '
            f'launch command: error: unrecognized arguments: --{key}"',
            f'remove `{key}` from {config}' if config_only else f'remove {flag}',
            'trl/cli/main.py (parse_args_and_config(return_remaining_strings=True)), trl/cli/commands/training.py',
        )
    if config_only and GRPO_SCRIPT_REMAINING_FROM <= vt[:2]:
        return Finding(
            WARNING,
            'args.config-key',
            [key],
            f"{config}: `{key}`: not a field of `trl grpo`'s dataclasses ({classes}); TRL {version}'s "
            f'trl/scripts/grpo.py parses with return_remaining_strings=True and drops it: it has no effect',
            f'remove `{key}` from {config}',
            'trl/scripts/grpo.py (parse_args_and_config)',
        )
    return None


def _own_config_key(flag: str, key: str, info, parse: dict, version: str, vt) -> Finding:
    config, classes = info.trl_config, ', '.join(parse.get('own_classes') or ())
    where = f"{config}: `{key}`: none of the script's dataclasses ({classes}) defines it"
    if vt is not None and vt[:2] >= REJECTS_FROM and not parse.get('remaining_ok'):
        return Finding(
            ERROR,
            'args.config-key',
            [key],
            f"{where}. TRL {version}'s TrlParser stops with \"Unknown arguments from config file: ['--{key}', ...]\"",
            f'remove `{key}` from {config}',
            TRL_PARSER,
        )
    return Finding(
        WARNING,
        'args.config-key',
        [key],
        f"{where}. TRL {version}'s TrlParser drops it "
        + (
            '(the script asks for the remaining strings)'
            if parse.get('remaining_ok')
            else 'silently (rejected from 0.19)'
        )
        + ': it has no effect',
        f'remove `{key}` from {config}',
        TRL_PARSER,
    )


def _own_command_line(flag: str, key: str, info, parse: dict) -> Finding:
    classes = ', '.join(parse.get('own_classes') or ())
    method = parse.get('parse_method')
    if method in ('parse_args_and_config', 'parse_args_into_dataclasses'):
        stop = f"ValueError: Some specified arguments are not used by the HfArgumentParser: ['{flag}', ...]"
        src = HF_PARSER
    else:
        stop = f'{info.script}: error: unrecognized arguments: {flag}'
        src = 'argparse (ArgumentParser.parse_args, which HfArgumentParser is)'
    return Finding(
        ERROR,
        'args.unknown',
        [key],
        f'{flag}: none of the script\'s dataclasses ({classes}) defines it; its parser stops with "{stop}"',
        f'remove {flag}',
        src,
    )
