"""``trl grpo --config F.yaml``: the keys of F that TRL's CLI hands to ``accelerate launch``.

TRL's CLI (0.29: trl/cli/main.py) parses the whole command line with one TrlParser whose ``grpo`` subparser has
``trl grpo``'s dataclasses (trl/scripts/grpo.py ``make_parser``: GRPOScriptArguments, GRPOConfig, ModelConfig,
DatasetMixtureConfig), ``--config`` included, with ``return_remaining_strings=True``: a key of the file none of them
defines comes back as ``--key value`` (trl/scripts/utils.py ``set_defaults_with_config``), before the command line's
own leftovers. trl/cli/commands/training.py passes those to ``accelerate launch``: ``accelerate_config`` becomes
``--config_file`` (trl/cli/accelerate_config.py ``resolve_accelerate_config_argument``: a file, or a config TRL
ships, e.g. ``zero3``), an accelerate option (``num_processes: 4``) is accelerate's (the command line's, later,
wins), and anything else stops accelerate's parser: "Accelerate launch command: error: unrecognized arguments".
TRL's own docs show such files (docs/source/clis.md: ``accelerate_config: zero2`` in a ``trl sft --config`` file).
"""

from __future__ import annotations

from pathlib import Path

FROM = (0, 29)
"""First release whose ``trl grpo`` hands the config's leftover keys (and ``--accelerate_config``) to accelerate; up to
0.28 trl/cli.py launched grpo.py with ``launch_command_parser().parse_args([script])`` (no launch options)."""


def config_launch_words(script_args: list[str]) -> tuple[list[str], str | None, list[str]]:
    """-> (accelerate's options from the file, its ``accelerate_config`` or None, the keys so taken)."""
    if '--config' not in script_args:
        return [], None, []
    i = script_args.index('--config')
    if i + 1 >= len(script_args):
        return [], None, []
    from .accelerate import _read_yaml
    from .accelerate_cmd import ACCELERATE_FLAGS
    from .arguments import ACCELERATE_VALUE_OPTIONS, TRL_GRPO_CLASSES, _fields

    data = _read_yaml(Path(script_args[i + 1]), '--config')
    fields = set(_fields(*TRL_GRPO_CLASSES))
    words: list[str] = []
    taken: list[str] = []
    acc_config = None
    for k, v in data.items():
        key = str(k)
        if key in fields or key == 'env':
            continue
        if key == 'accelerate_config':
            acc_config, taken = str(v), taken + [key]
        elif key in ACCELERATE_VALUE_OPTIONS:
            words += [f'--{key}', str(v)]
            taken.append(key)
        elif key in ACCELERATE_FLAGS and isinstance(v, bool):
            words += [f'--{key}'] if v else []
            taken.append(key)
    return words, acc_config, taken
