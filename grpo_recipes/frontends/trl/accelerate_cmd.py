"""What ``accelerate launch`` (and ``trl grpo``, which runs through it) does before the training script starts,
where the TRL front end needs it: the usage error of a launch with no script, the process count when neither
``--num_processes`` nor a config file gives one, and the command's name as the user typed it.

Sources: accelerate 1.15.0 ``accelerate/commands/launch.py``: ``launch_command_parser`` declares
``training_script`` as a required positional, so argparse stops with "the following arguments are required:
training_script" (exit 2) before anything starts; ``_validate_launch_command``, branch taken when no
``--config_file`` is given and accelerate's default config file does not exist: ``args.num_processes =
torch.cuda.device_count()`` when ``--num_processes`` is unset, and with more than one GPU "More than one GPU was
found, enabling multi-GPU training" (``multi_gpu``). ``torch.cuda.device_count()`` counts the GPUs
``CUDA_VISIBLE_DEVICES`` leaves visible. TRL 0.29 ``trl/cli/accelerate_launcher.py`` parses ``trl grpo``'s
launch options with the same ``launch_command_parser`` and calls ``launch_command``, so the same defaults apply.
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import GuardError
from ...launch import visible_count


def display_command(argv: list[str], script: str | None) -> str:
    """The launch as the user would name it: ``accelerate launch train_grpo.py``, ``trl grpo``,
    ``python train_grpo.py``, ``torchrun train_grpo.py``."""
    head = os.path.basename(argv[0]) if argv else ''
    if head == 'trl':
        return 'trl ' + (argv[1] if len(argv) > 1 else 'grpo')
    from ..launchers import is_python, python_options

    if is_python(head):
        rest = python_options(argv[1:])[1]
        if rest[:1] == ['-m'] and rest[1:2] and rest[1].startswith('torch.distributed.'):
            head = f'{head} -m {rest[1]}'  # python -m torch.distributed.run train.py
    if head == 'accelerate':
        return f'accelerate launch {script}' if script else 'accelerate launch'
    return f'{head} {script}' if script else head


def launcher_prefix(argv: list[str]) -> str:
    """The words that start the launch: ``accelerate launch``, ``trl grpo``, ``python``, ``torchrun``."""
    head = os.path.basename(argv[0]) if argv else ''
    if head in ('accelerate', 'trl'):
        return ' '.join([head] + argv[1:2])
    return head


class NoScript(GuardError):
    """``accelerate launch [options]`` with no training script (exit 2, as accelerate's argparse)."""

    def __init__(self, source: str):
        self.source = source
        super().__init__(
            f'{source}: `accelerate launch` has no training script, so accelerate stops at once with '
            f'"error: the following arguments are required: training_script" '
            f'(accelerate/commands/launch.py launch_command_parser)'
        )

    def with_next(self, following: str | None) -> str:
        """The message, naming the script's next command (a continuation line whose ``\\`` was lost)."""
        if not following:
            return str(self)
        return (
            f'{self}; the next command (`{following[:60]}`) runs on its own: did the line above it lose its '
            f'trailing `\\`?'
        )


def require_script(script: str | None, source: str) -> None:
    """``accelerate launch [options]`` with no training script: accelerate's argparse stops at once."""
    if script is None or not script.strip():
        raise NoScript(source)


def default_processes(launch_env: dict[str, str], trl: dict[str, Any], gpus: int | None) -> str | None:
    """accelerate with no config file and no ``--num_processes``: one process per visible GPU. Sets
    ``NPROC_PER_NODE`` in ``launch_env`` and returns the assumption to print (None when not that case)."""
    if not trl.get('nproc_from_devices'):
        return None
    n, why = visible_count(trl.get('launcher_cvd'), gpus)  # accelerate counts before --gpu_ids applies
    name = trl.get('display') or 'accelerate launch'
    if trl.get('launcher') not in (None, 'accelerate', 'trl'):  # torchrun --nproc-per-node gpu, deepspeed
        if n is None:
            return f'`{name}` starts one process per visible GPU and {why}; planned as 1 process'
        launch_env['NPROC_PER_NODE'] = str(max(1, n))
        return f'`{name}` starts one process per visible GPU ({why}): {n} process(es)'
    if n is None:
        return (
            f'`{name}` has no --num_processes and no accelerate config file: accelerate starts one process per '
            f'visible GPU, and {why}; planned as 1 process'
        )
    launch_env['NPROC_PER_NODE'] = str(max(1, n))
    multi = ', multi-GPU' if n > 1 else ''
    return (
        f'`{name}` has no --num_processes and no accelerate config file: accelerate 1.x starts one process per '
        f'visible GPU ({why}: {n} process(es){multi}; accelerate/commands/launch.py _validate_launch_command)'
    )


def config_num_processes(conf: dict, source: str, given=None):
    """The process count of an accelerate config file that has no ``num_processes`` (and no ``--num_processes`` on
    the command line), as accelerate 1.15.0 reads it (the file's own value otherwise):
    ``accelerate/commands/config/config_args.py``
    ``BaseConfig.process_config`` sets 1 when ``distributed_type`` is ``NO``; otherwise ``ClusterConfig.num_processes``
    keeps its default -1 and ``accelerate/commands/launch.py::_validate_launch_command`` stops with "You need to
    manually pass in `--num_processes` using this config yaml." (the device count is used only when there is no config
    file at all: :func:`default_processes`)."""
    kind = conf.get('distributed_type')
    if 'distributed_type' not in conf:
        raise GuardError(
            f'accelerate config {source}: no distributed_type, so accelerate stops with "A '
            f'`distributed_type` must be specified in the config file." (accelerate/commands/config/'
            f'config_args.py process_config); add e.g. `distributed_type: MULTI_GPU` and `num_processes`'
        )
    if given is not None or 'num_processes' in conf:
        return conf.get('num_processes')  # the command line's --num_processes is applied after
    if kind == 'NO':
        return 1
    raise GuardError(
        f'accelerate config {source}: distributed_type {kind} and no num_processes, so '
        f'`accelerate launch` '
        f'stops with "You need to manually pass in `--num_processes` using this config yaml." (accelerate/'
        f'commands/launch.py _validate_launch_command); add `num_processes: N` to the file or pass '
        f'--num_processes N'
    )


# accelerate launch's flags (no value) that `trl grpo` hands to accelerate (accelerate/commands/launch.py).
ACCELERATE_FLAGS = {
    'multi_gpu',
    'use_deepspeed',
    'use_fsdp',
    'cpu',
    'tpu',
    'debug',
    'quiet',
    'same_network',
    'use_megatron_lm',
    'no_python',
    'module',
}


def trl_cli_launch_args(
    args: list[str], value_options: set[str], trl_fields: set[str], flags: set[str] = ACCELERATE_FLAGS
) -> tuple[list[str], list]:
    """``trl grpo ARGS``: TRL's CLI parses ARGS with its GRPO parser and hands what that parser does not know to
    ``accelerate launch`` (trl/cli/commands/training.py: ``context.remaining_args``). -> (accelerate's words, the
    rest): an option accelerate knows and no TRL dataclass field has (``--num_processes 2``, ``--multi_gpu``)."""
    acc: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        name, eq, _ = args[i][2:].partition('=') if args[i].startswith('--') else ('', '', '')
        key = name.replace('-', '_')
        if key and key not in trl_fields and (key in value_options or key in flags):
            n = 1 if eq or key in flags else 2
            acc += args[i : i + n]
            i += n
            continue
        rest.append(args[i])
        i += 1
    return acc, rest
