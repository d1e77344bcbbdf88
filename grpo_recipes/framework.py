"""What a framework is to the shared pipeline: the typed facts and hooks its front end declares.

Each front end's package defines one :class:`Framework` (``frontends/swift/framework.py``,
``frontends/trl/framework.py``, ``frontends/megatron/framework.py``) and ``frontends/__init__.py`` registers it
(``FRAMEWORKS``, one line per framework). Everything outside ``frontends/`` asks ``launch.fw`` (or
``rollout.fw``) what the framework does, never which framework it is: a rule reads ``fw.prompt_limit``, not
``framework == 'trl'`` (tests/test_framework_names.py holds this).

A hook is a ``'module:function'`` target, imported when it is first called; the front ends register their
frameworks here (:func:`register`), so this module (and the launch that carries the facts) imports no front end.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


def resolve(target: str) -> Callable:
    """The function a ``'module:function'`` hook names."""
    module, func = target.split(':')
    return getattr(importlib.import_module(module), func)


@dataclass(frozen=True)
class Handover:
    """What a framework runs between its train step, the weight sync and the rollout on a colocated GPU, at one
    release range: whether the train step's cached blocks (torch's caching allocator keeps freed blocks until
    ``torch.cuda.empty_cache()``) are still reserved when the next phase allocates (``memory.estimate``)."""

    release: str
    """The releases the row holds for, as messages name them (``ms-swift 3.6-3.9``)."""
    offload_before_sync: bool
    """offload_model / offload_optimizer move the weights and optimizer state to the CPU before the weight sync
    (else after it, around the rollout)."""
    empty_before_sync: bool
    """With the engine asleep (sleep_level > 0), the cache is emptied before the weights wake for the sync."""
    empty_before_rollout: bool
    """With the engine asleep, the cache is emptied before the KV cache wakes for the rollout."""
    empty_before_generate: bool
    """Without vLLM, the cache is emptied between the train step and the trainer's own generation (HF generate)."""
    offload_empties: tuple[str, ...]
    """The offload settings whose move empties the cache (``offload_model``, ``offload_optimizer``); () none."""
    source: str
    """Where the row was read (file@tag and function)."""


@dataclass(frozen=True)
class Framework:
    """One framework's facts (what it does) and hooks (what its front end does for the shared pipeline)."""

    name: str
    """The registry key (``swift``, ``trl``, ``megatron``): ``--json``'s ``launch.framework``."""
    display: str
    """How messages name it (``ms-swift``, ``TRL``)."""
    server: str
    """Its rollout server command (``swift rollout``, ``trl vllm-serve``)."""
    server_flag_prefix: str
    """The rollout server's prefix for vLLM's engine flags (``--vllm_tensor_parallel_size`` vs
    ``--tensor_parallel_size``)."""
    server_unknown_source: str
    """Where the rollout server refuses an argument it does not know."""
    server_port_source: str
    """Where the rollout server's ``--port`` and its default are defined."""
    server_gpu_check_source: str | None
    """Where the rollout server checks its GPU count itself (its message is then quoted); None: vLLM finds out."""
    server_host_required: bool
    """The trainer names its rollout server's host (ms-swift's ``vllm_server_host``); False: it defaults to this
    machine (TRL)."""
    launcher_places_processes: bool
    """The launcher (accelerate, torchrun, python) decides processes and their GPUs (process i on cuda:i), not
    NPROC_PER_NODE read by the framework's own CLI."""
    prompt_limit: bool
    """A ``max_length`` limits the prompts (ms-swift truncates or drops longer ones); False: nothing does (TRL),
    so prompts are filtered in the data."""
    own_batch_source: str | None
    """Where the framework itself checks the generation batch (TRL's GRPOConfig); None: the ms-swift release
    decides who checks it (rules/batch.py ``swift_batch_check``)."""
    registry_check: str | None
    """Hook: (ctx) -> findings: ``--model_type`` / ``--template`` against the framework's registry (ms-swift);
    None: it has none."""
    requires_model_flag: bool
    """The framework stops without ``--model`` (unless a checkpoint supplies it)."""
    checks_packages: bool
    """The installed ms-swift and its dependencies judge the launch (rules/packages.py)."""
    rewards_by_name: bool
    """Rewards are named on the command line (``--reward_funcs``); False: the script passes them in code."""
    expandable_toggle_from: tuple[int, int] | None
    """The release from which the framework turns expandable segments off around vLLM itself (ms-swift 4.6:
    ``set_expandable_segments``); None: nothing does."""
    zero3_gathers_for_generation: bool
    """Under ZeRO-3 the whole model is gathered on every GPU for generation, and merged for the vLLM weight sync
    with PEFT (rules/memory.py warns about it)."""
    weight_sync: str
    """How the trainer hands weights to its colocated vLLM: ``batched`` or ``per_param``."""
    old_logps_always: bool
    """The old policy's log-probabilities are computed every step (ms-swift); False: only when TRL needs them."""
    device_map_unless: str
    """When the trainer loads the weights straight onto its GPU with a ``device_map`` (so transformers first warms the
    caching allocator with one block of the checkpoint's size, ``plan.loads_with_device_map``): always unless
    ``sharded`` (ZeRO-3 or FSDP: ms-swift's ``get_default_device_map``) or unless ``distributed`` (more than one
    process or DeepSpeed: TRL sets ``device_map=None``, the model is loaded on the CPU and moved)."""
    logits_span_prompts: bool
    """The training forward's logits span, beyond the completions, the longest minus the shortest prompt of the
    micro-batch: ms-swift pads each sequence on the right and keeps logits from the earliest first label of the
    micro-batch on (swift/rlhf_trainers/utils.py: ``logits_to_keep = (labels.shape[-1] -
    labels.ne(-100).argmax(-1)).max()``). False: the logits cover the completions only (TRL pads prompts on the left,
    trl/trainer/grpo_trainer.py ``logits_to_keep = completion_ids.size(1)``)."""
    missing_knobs: tuple[str, ...]
    """Settings the framework does not have (TRL: ms-swift's offload_model, max_length, ...): the fix search
    leaves them out."""
    fix_arguments: str | None
    """Hook: (fix) -> a memory fix's arguments as the framework's flags (TRL); None: a YAML diff (ms-swift's
    keys, which render_fixes turns into flags for a command line)."""
    model_hub: str | None
    """Why the model always comes from the Hugging Face hub (TRL); None: the launch's flags decide (ms-swift)."""
    vllm_dtype_source: str | None
    """Where the framework hands vLLM the model's own dtype explicitly (ms-swift: ``dtype=`` the model's torch_dtype,
    so a bfloat16 model is bfloat16 in vLLM on any card); None: vLLM's ``auto``, which vLLM resolves itself."""
    runnable: bool
    """``grpo-guard run`` can start it (``swift rlhf``)."""
    swift_release: bool
    """Judged by an ms-swift release (``--swift-version``)."""
    shows_resolved: bool
    """``validate`` prints the values its parser resolved."""
    settings_yaml_in_config: bool
    """The launch's own config file (``launch.config_file``) is where its settings are written; False: the
    framework's config is ``launch.trl.trl_config`` (TrlParser's ``--config``)."""
    read_config: str
    """Hook: (launch, packages) -> (GRPOConfig, leftover words, the launch with the notes reading it made)."""
    post_read: str
    """Hook: (cfg, launch, packages) -> (cfg, launch, assumptions): the framework's own layout after reading
    (TRL 0.14-0.15's vllm_device, ms-swift < 3.6's in-trainer vLLM)."""
    reword: str | None
    """Hook: (report) -> None: the finished report in the framework's own names; None: already in them."""
    render_fixes: str
    """Hook: (report) -> None: every fix in the launch's own syntax (fix_syntax.py)."""
    fixed_launch: str
    """Hook: (launch, fix) -> (the launch with the fix applied, the parts its parser cannot see)."""
    fix_text: str
    """Hook: (fix, launch, syntax, config, env) -> the fix's lines in the launch's syntax (--fastest)."""
    server_command: str
    """Hook: (model, tp, dp) -> the rollout server command that starts tp x dp engines."""
    unknown_arguments: str
    """Hook: (ctx) -> findings: the words the framework's parser refuses (ctx.remaining and the launch's own)."""
    validator: str
    """Hook: (launch, timeout, python, trl_version, model_config) -> RealParseResult: its real parser."""
    handover: str | None = None
    """Hook: (packages) -> :class:`Handover` at the release that judges the launch; None: the memory model plans
    each phase from an empty cache."""
    package: str | None = None
    """The PyPI package whose release judges its launches (``ms-swift``, ``trl``): what ``--swift-version`` /
    ``--trl-version`` and a project's pin (``project_pins``) name."""
    pin_release: str | None = None
    """Hook: (version, packages) -> the packages with ``package`` at that release; ``GuardError`` (one line) where
    the guard cannot judge that release."""
    server_flag_dashes: bool = False
    """Its rollout server's flags are spelled with dashes (``trl vllm-serve --gpu-memory-utilization``)."""

    def server_arg(self, neutral: str) -> str:
        """The rollout server's own flag for one of its vLLM settings, as a fix writes it on its command line:
        ``--vllm_gpu_memory_utilization`` (``swift rollout``), ``--gpu-memory-utilization`` (``trl vllm-serve``)."""
        return self.server_flag_prefix + (neutral.replace('_', '-') if self.server_flag_dashes else neutral)

    def call(self, hook: str, *args: Any, **kwargs: Any) -> Any:
        """Run one of the hooks above by its field name."""
        return resolve(getattr(self, hook))(*args, **kwargs)


_REGISTERED: dict[str, Framework] = {}
"""name -> Framework, as the front ends register them (frontends/__init__.py ``FRAMEWORKS``, on import)."""


def register(*frameworks: Framework) -> None:
    """Make frameworks known by their names (the front ends do this once, when their package is imported)."""
    for fw in frameworks:
        _REGISTERED[fw.name] = fw


def framework_of(name: str) -> Framework:
    """The registered framework of that name (every Launch comes from a front end, which registered its own)."""
    try:
        return _REGISTERED[name]
    except KeyError:
        raise LookupError(
            f'no front end registered for framework {name!r} (known: {sorted(_REGISTERED)}); '
            f'grpo_recipes.frontends registers them when it is imported'
        ) from None


def as_framework(fw: Framework | str) -> Framework:
    """A framework given by its facts or by its registered name (the form tests and older callers pass)."""
    return fw if isinstance(fw, Framework) else framework_of(fw)
