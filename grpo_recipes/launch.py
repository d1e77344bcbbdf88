"""The one typed launch every front end produces (``frontends/swift/``, ``frontends/trl/``).

How ``swift rlhf`` 4.6 reads a launch (``swift/cli/main.py``), which :class:`Launch` mirrors:

``swift rlhf cfg.yaml --extra v`` does three things before anything is imported:

1. ``parse_yaml_args``: a ``.yaml``/``.yml``/``.json`` first argument is loaded; each top-level key
   becomes ``--key value``; a list becomes several values; a dict becomes a JSON string; anything
   else becomes ``str(value)``. The file's ``ENV:`` mapping sets environment variables, but a
   variable already in the environment wins (ms-swift logs a warning). Extra CLI arguments follow.
2. ``get_torchrun_args``: ``NPROC_PER_NODE``, ``MASTER_PORT``, ``NNODES``, ``NODE_RANK`` and
   ``MASTER_ADDR`` become torchrun flags; torchrun is used only if ``NPROC_PER_NODE`` or ``NNODES``
   is set.
3. The trainer process sees ``CUDA_VISIBLE_DEVICES``.

:func:`grpo_recipes.frontends.read_launch` dispatches a command line (``swift rlhf``/``swift rollout``,
``accelerate launch``, ``python``, ``torchrun``, ``trl grpo``/``trl vllm-serve``), a config file or a launcher script
to its front end and returns one :class:`Launch`. Rules and the memory model see only this and ``GRPOConfig``.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .framework import Framework, framework_of

if TYPE_CHECKING:
    from .allocconf import AllocSetting

CONFIG_SUFFIXES = ('.yaml', '.yml', '.json')
# The launch environment that decides processes and devices (ms-swift.md §1.10).
LAUNCH_ENV_KEYS = ('CUDA_VISIBLE_DEVICES', 'NPROC_PER_NODE', 'NNODES', 'NODE_RANK', 'MASTER_ADDR', 'MASTER_PORT')
TORCHRUN_ENV_KEYS = ('NPROC_PER_NODE', 'MASTER_PORT', 'NNODES', 'NODE_RANK', 'MASTER_ADDR')


def visible_devices(raw: str | None) -> list[int] | None:
    """GPU ids of a CUDA_VISIBLE_DEVICES value ([] for an empty one); None: unset or not a list of ids. The one
    place the variable is parsed."""
    if raw is None:
        return None
    try:
        return [int(x) for x in raw.split(',')] if raw.strip() else []
    except ValueError:
        return None


def visible_count(cvd: str | None, gpus: int | None) -> tuple[int | None, str]:
    """GPUs ``torch.cuda.device_count()`` would see in the launching process: the ids of its CUDA_VISIBLE_DEVICES,
    else the node's GPUs (``--gpus`` or nvidia-smi); (None, why) when neither is known."""
    if cvd is not None:
        ids = [x for x in cvd.split(',') if x.strip()]
        return len(ids), f'CUDA_VISIBLE_DEVICES={cvd}'
    if gpus:
        return gpus, f'{gpus} GPU(s) on the node'
    return None, 'the GPU count is not known (pass --gpus)'


@dataclass
class TrlSpecifics:
    """What a TRL launch says besides its GRPO arguments, as the TRL front end read it (frontends/trl/reader.py
    ``load_trl``); for an ms-swift launch only the in-trainer vLLM fields below may be set. None: not given."""

    launcher: str | None = None
    """The launcher as typed: ``accelerate``, ``trl``, ``torchrun``, ``deepspeed``, ``python``/``python3``."""
    script: str | None = None
    """The training script (``trl grpo`` for TRL's own CLI, ``-m module`` for a module)."""
    script_args: list[str] | None = None
    """The script's arguments as typed (empty when the script ignores its command line)."""
    accelerate: dict[str, Any] | None = None
    """accelerate's settings (frontends/trl/accelerate.py ``accelerate_settings``: num_processes, zero_stage, ...,
    config_source)."""
    gpu_ids: str | None = None
    """accelerate's ``--gpu_ids``, which becomes CUDA_VISIBLE_DEVICES."""
    nproc_from_devices: bool = False
    """No --num_processes and no config file: accelerate starts one process per visible GPU."""
    launcher_cvd: str | None = None
    """CUDA_VISIBLE_DEVICES as the launcher saw it (before --gpu_ids applies)."""
    torchrun: dict[str, Any] | None = None
    """torchrun's / deepspeed's own options (nproc_per_node, nnodes, ...)."""
    display: str | None = None
    """The launch as the user would name it (``accelerate launch train_grpo.py``)."""
    prefix: str | None = None
    """The words that start the launch (``accelerate launch``, ``python``)."""
    ignores_cli: dict[str, Any] | None = None
    """A script that never parses its command line: its path, the ignored flags, the lines of its settings."""
    script_settings: str | None = None
    """The note on the settings a script writes in code (``GRPOConfig(...)``)."""
    script_flags: list[str] | None = None
    """Those settings as flags, read before the command line's."""
    script_lines: dict[str, int] | None = None
    """Flag name -> the line of the script where it sets that keyword (``GRPOConfig(max_prompt_length=...)``)."""
    trl_config: str | None = None
    """TrlParser's ``--config`` YAML."""
    trl_config_keys: list[str] | None = None
    """Its keys (frontends/trl/config_keys.py judges them)."""
    parser_classes: str | None = None
    """Whose dataclasses parse the flags: ``trl``, ``own`` or None (frontends/trl/config_keys.py)."""
    script_parse: dict[str, Any] | None = None
    """What the script's own parsers make of its words (frontends/trl/script_parsers.py): its dataclasses' fields,
    its argparse's verdict, a config file it loads into its own GRPOConfig class."""
    vllm_device: str | None = None
    """TRL 0.14-0.15: ``vllm_device`` as set or defaulted (``auto``), with use_vllm."""
    vllm_device_index: int | None = None
    """TRL 0.14-0.15: the cuda:N index ``vllm_device`` resolves to."""
    vllm_device_gpu: int | tuple[int, ...] | None = None
    """The GPU(s) an in-trainer vLLM runs on by itself (TRL 0.14-0.15's vllm_device, ms-swift < 3.6's async mode)."""
    swift_infer_workers: dict[str, Any] | None = None
    """ms-swift < 3.6's async mode: workers, visible GPUs, NPROC_PER_NODE and version (rule device.infer-workers)."""
    entry: dict[str, Any] | None = None
    """ms-swift's own entry script run by ``deepspeed``/``torchrun``/``python`` (frontends/swift/entry.py): the
    launcher, the script, how it is shown, the launcher's options, the source line and its CUDA_VISIBLE_DEVICES."""

    def get(self, key: str, default: Any = None) -> Any:
        """Mapping-style reading (with ``[key]``) for code that takes these as a mapping (accelerate_cmd)."""
        value = getattr(self, key)
        return default if value is None else value

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key)
        if value is None:
            raise KeyError(key)
        return value

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) not in (None, False)}


@dataclass
class Launch:
    """One ``swift rlhf`` launch, as ms-swift would see it."""

    argv: list[str]
    """The final argv handed to ``swift/cli/rlhf.py`` (file keys first, then extra CLI args)."""
    env: dict[str, str]
    """The launch environment (``LAUNCH_ENV_KEYS`` that are set), after the file's ``ENV:`` block."""
    file_env: dict[str, str] = field(default_factory=dict)
    """Variables the file's ``ENV:`` block sets (as strings), whether or not they took effect."""
    config_file: str | None = None
    """The YAML/JSON file, if the launch came from one."""
    notes: list[str] = field(default_factory=list)
    """Things ms-swift would log while reading the launch (e.g. an ENV value overridden)."""

    @property
    def read_argv(self) -> list[str]:
        """The arguments as ms-swift reads them (``argv`` already holds the file's keys, then the CLI's)."""
        return self.argv

    framework: str = 'swift'
    """``swift`` or ``trl``: whose argument names every message and fix uses."""
    kind: str = 'train'
    """``train`` (a trainer, maybe with its rollout server) or ``rollout`` (a rollout server on its own)."""
    rollout: 'Rollout | None' = None
    """Server mode: the rollout server as launched (``--rollout CMD``, or the script's own command)."""
    names: dict[str, str] = field(default_factory=dict)
    """Framework-neutral field -> the framework's own flag, where they differ (TRL's ``max_prompt_length``)."""
    trl: TrlSpecifics = field(default_factory=TrlSpecifics)
    """TRL launches: the launcher, accelerate's settings and where they came from, the script (``TrlSpecifics``);
    empty for ms-swift but for its in-trainer vLLM layout."""
    command: list[str] = field(default_factory=list)
    """The command as typed (launcher and script included), for messages."""
    alloc: 'AllocSetting | None' = None
    """The CUDA caching allocator's variables (``PYTORCH_ALLOC_CONF``/``PYTORCH_CUDA_ALLOC_CONF``) the training
    process starts with and where each was set (``allocconf.AllocSetting``; ``allocconf.phases`` gives the allocator
    of the trainer and the vLLM phase); None: neither is set."""

    unread_trainer: str | None = None
    """Why the launch's training command was not read (a script that runs neither ms-swift's nor TRL's GRPO): only its
    rollout server was checked, so the verdict is UNCHECKED, never OK."""
    node_gpus: int | None = None
    """GPUs per node the scheduler allocates (``#SBATCH --gres=gpu:N`` / ``--gpus-per-node``): the hardware's GPU
    count when neither ``--gpus`` nor nvidia-smi gives one."""
    workdir: str | None = None
    """The directory a launch script ``cd``s to before its launch, where it is here: the launch's relative paths
    (configs, scripts, the model and data) are read from there (``in_dir``). None: the guard's own directory."""

    @property
    def fw(self) -> Framework:
        """What its framework does (the front end's :class:`~grpo_recipes.framework.Framework`)."""
        return framework_of(self.framework)

    def name(self, field_name: str) -> str:
        """The user's own flag for a framework-neutral field name."""
        return self.names.get(field_name, field_name)

    @property
    def uses_torchrun(self) -> bool:
        return 'NPROC_PER_NODE' in self.env or 'NNODES' in self.env

    def torchrun_args(self) -> list[str]:
        out: list[str] = []
        for key in TORCHRUN_ENV_KEYS:
            if key in self.env:
                out += [f'--{key.lower()}', self.env[key]]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            'framework': self.framework,
            'config_file': self.config_file,
            'argv': self.argv,
            'env': self.env,
            'file_env': self.file_env,
            'uses_torchrun': self.uses_torchrun,
            'notes': self.notes,
            'rollout': self.rollout.to_dict() if self.rollout else None,
            'trl': self.trl.to_dict(),
            'alloc': self.alloc.to_dict() if self.alloc else None,
            'unread_trainer': self.unread_trainer,
        }


@dataclass
class Rollout:
    """A vLLM rollout server (``swift rollout`` or ``trl vllm-serve``) as its command sets it up."""

    framework: str
    """``swift`` or ``trl``."""
    argv: list[str]
    """Its arguments (after ``swift rollout`` / ``trl vllm-serve``)."""
    env: dict[str, str]
    source: str
    """Where it was read: ``--rollout``, ``script.sh:3`` or ``script.sh:3 (comment)``."""
    model: str | None = None
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    max_model_len: int | None = None
    """None: the model's full context (both servers pass None on to vLLM)."""
    gpu_memory_utilization: float = 0.9
    """Both servers default to 0.9 (RolloutArguments via VllmArguments; trl vllm_serve.ScriptArguments)."""
    max_num_seqs: int | None = None
    enforce_eager: bool = False
    engine_kwargs: str | None = None
    quantization: str | None = None
    unknown: list[str] = field(default_factory=list)
    """Its arguments the server would reject, each described with the fix."""
    intended: dict[str, Any] = field(default_factory=dict)
    """Values read from renamed/stale flags (ms-swift 3.x ``--data_parallel_size``), used for planning."""
    use_gym_env: bool = False
    """``swift rollout --use_gym_env true``: the server's gym environment gives the rewards (rollout_mixin.py reads
    it from the server unless the trainer sets it)."""
    remote: str | None = None
    """Why the server is taken to run on another machine than the trainer (the script's comment above it,
    e.g. ``# run in another node``); None: nothing says so. Its GPU ids then name that machine's GPUs."""
    launcher: str | None = None
    """A job launcher the server is started through (``srun``): the scheduler places it, so which GPUs of which
    node it takes is not known here."""
    foreground: str | None = None
    """Where the script starts the server without ``&`` before its training launch (``script.sh:1``, the launch's
    line): bash waits for the server, which does not exit, so the launch after it never starts. None otherwise."""
    commented: bool = False
    """The command is quoted in a comment of the script (ms-swift's examples document their servers that way): what
    it would refuse at start-up, or a port the trainer does not use, is a warning (the user may start it otherwise)."""

    @property
    def fw(self) -> Framework:
        """What its framework does (the front end's :class:`~grpo_recipes.framework.Framework`)."""
        return framework_of(self.framework)

    @property
    def gpus(self) -> list[int] | None:
        """GPU ids from its CUDA_VISIBLE_DEVICES (None: unset or unreadable)."""
        return visible_devices(self.env.get('CUDA_VISIBLE_DEVICES'))

    @property
    def gpus_needed(self) -> int:
        return max(1, self.tensor_parallel_size) * max(1, self.data_parallel_size)

    def flag(self, neutral: str) -> str:
        """The server's own flag for tensor_parallel_size, data_parallel_size, max_model_len, ..."""
        return self.fw.server_flag_prefix + neutral

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
        d['gpus'] = self.gpus
        return d


def other_dir(path: str | None) -> str | None:
    """``path`` made absolute when it is a directory here other than the working one (where a launch script ``cd``s
    to), else None."""
    if not path or not os.path.isdir(path) or os.path.realpath(path) == os.path.realpath(os.getcwd()):
        return None
    return os.path.abspath(path)


@contextmanager
def in_dir(path: str | None):
    """Within: the working directory is ``path`` (a launch's ``workdir``), as it is for the launch; None, or the
    working directory itself: unchanged."""
    if other_dir(path) is None:
        yield
        return
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)
