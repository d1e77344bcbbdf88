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

:func:`grpo_recipes.frontends.read_launch` dispatches a command line (``swift rlhf``/``swift rollout``, ``accelerate launch``,
``python``, ``torchrun``, ``trl grpo``/``trl vllm-serve``), a config file or a launcher script to its
front end and returns one :class:`Launch`. Rules and the memory model see only this and ``GRPOConfig``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

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
    framework: str = 'swift'
    """``swift`` or ``trl``: whose argument names every message and fix uses."""
    kind: str = 'train'
    """``train`` (a trainer, maybe with its rollout server) or ``rollout`` (a rollout server on its own)."""
    rollout: 'Rollout | None' = None
    """Server mode: the rollout server as launched (``--rollout CMD``, or the script's own command)."""
    names: dict[str, str] = field(default_factory=dict)
    """Framework-neutral field -> the framework's own flag, where they differ (TRL's ``max_prompt_length``)."""
    trl: dict[str, Any] = field(default_factory=dict)
    """TRL launches: the launcher (``accelerate``/``python``/``torchrun``/``trl``), accelerate's settings and
    where they came from; empty for ms-swift."""
    command: list[str] = field(default_factory=list)
    """The command as typed (launcher and script included), for messages."""
    alloc: 'AllocSetting | None' = None
    """The CUDA caching allocator's variables (``PYTORCH_ALLOC_CONF``/``PYTORCH_CUDA_ALLOC_CONF``) the training
    process starts with and where each was set (``allocconf.AllocSetting``; ``allocconf.phases`` gives the allocator
    of the trainer and the vLLM phase); None: neither is set."""

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
        return {'framework': self.framework, 'config_file': self.config_file, 'argv': self.argv, 'env': self.env,
                'file_env': self.file_env, 'uses_torchrun': self.uses_torchrun, 'notes': self.notes,
                'rollout': self.rollout.to_dict() if self.rollout else None, 'trl': self.trl,
                'alloc': self.alloc.to_dict() if self.alloc else None}


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

    @property
    def gpus(self) -> list[int] | None:
        """GPU ids from its CUDA_VISIBLE_DEVICES (None: unset or unreadable)."""
        return visible_devices(self.env.get('CUDA_VISIBLE_DEVICES'))

    @property
    def gpus_needed(self) -> int:
        return max(1, self.tensor_parallel_size) * max(1, self.data_parallel_size)

    def flag(self, neutral: str) -> str:
        """The server's own flag for tensor_parallel_size, data_parallel_size, max_model_len, ..."""
        if self.framework == 'trl':
            return '--' + neutral
        return '--vllm_' + neutral

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict
        d = asdict(self)
        d['gpus'] = self.gpus
        return d
