"""The launch plan: processes, devices and batch arithmetic, derived before anything loads.

Pure: GRPOConfig + launch environment + Hardware → Plan. Batch sizes follow ms-swift 4.6's
``_init_generation_batch_params`` (swift/rlhf_trainers/args_mixin.py); everything is in completions
unless the name says prompts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .config import GRPOConfig
from .framework import Framework, as_framework
from .hardware import Hardware
from .launch import visible_devices


def _int_env(env: dict[str, str], key: str) -> int | None:
    raw = env.get(key)
    if raw is None or raw.strip() == '':
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def world_size(env: dict[str, str], strict: bool = False) -> int:
    """Training processes in all: NNODES x NPROC_PER_NODE (unset or invalid counts as 1, as torchrun is
    then not used). ``strict`` raises ValueError naming the variable instead of tolerating a bad value;
    the rules report bad values themselves, the real-parser run needs a number."""
    if strict:
        for key in ('NNODES', 'NPROC_PER_NODE'):
            raw = env.get(key)
            if raw is not None and raw.strip() != '' and _int_env(env, key) is None:
                raise ValueError(f'{key}={raw!r}: must be an integer')
    nnodes, _, per_node = _layout(env)
    return max(1, nnodes) * per_node


def _layout(env: dict[str, str]) -> tuple[int, int | None, int]:
    """(NNODES or 1, NPROC_PER_NODE as set, processes per node): unset or invalid counts mean one."""
    nnodes = _int_env(env, 'NNODES') or 1
    nproc = _int_env(env, 'NPROC_PER_NODE')
    return nnodes, nproc, (nproc if nproc and nproc > 0 else 1)


@dataclass
class Plan:
    nnodes: int
    node_rank: int | None
    nproc_per_node: int | None
    """As set in the environment (None: unset, i.e. one process without torchrun)."""
    processes_per_node: int
    world_size: int
    visible_gpus: list[int] | None
    """Training GPU ids on this node, from CUDA_VISIBLE_DEVICES (None: unset, so all GPUs present)."""
    visible_count: int | None
    rollout_gpus: list[int] | None
    rollout_remote: str | None = None
    """Why the rollout server runs on another machine (Hardware.rollout_remote); None: this node."""
    processes: list[dict] = field(default_factory=list)
    """One row per local process: rank, local_rank and the GPU it drives."""
    gradient_accumulation_steps: int = 1
    """Micro-steps per optimizer step (``GRPOConfig.accumulation_steps``; below 1 the launch is refused by
    ``batch.accumulation`` and the batch figures are shown as written)."""
    optimizer_batch: int = 0
    """Completions per optimizer step: world × per_device_train_batch_size × gradient_accumulation_steps."""
    global_micro_batch: int = 0
    """Completions per micro-step across all processes."""
    generation_batch: int | None = None
    """Completions per rollout (ms-swift ``generation_batch_size``)."""
    steps_per_generation: int | None = None
    prompts_per_rollout: float | None = None
    prompts_per_optimizer_step: float | None = None
    completions_per_process_per_step: int = 0
    """Completions one process trains on per optimizer step: per_device_train_batch_size × GA."""
    vllm_engines: int | None = None
    """Colocate: world / TP engines; server: DP (each TP-wide)."""
    rollout_concurrency_per_engine: float | None = None
    """Completions one vLLM engine generates per rollout (for KV sizing)."""

    def to_dict(self) -> dict:
        return asdict(self)


def build_plan(cfg: GRPOConfig, env: dict[str, str], hw: Hardware) -> Plan:
    nnodes, nproc, per_node = _layout(env)
    node_rank = _int_env(env, 'NODE_RANK')
    world = world_size(env)

    visible = visible_devices(env.get('CUDA_VISIBLE_DEVICES'))
    if visible is not None:
        visible_count = len(visible)
    elif hw.gpus is not None:
        visible_count = hw.gpus
        visible = list(range(hw.gpus))
    else:
        visible_count = None

    processes = []
    base_rank = (node_rank or 0) * per_node
    for local in range(per_node):
        gpu = visible[local] if visible is not None and local < len(visible) else None
        processes.append({'rank': base_rank + local, 'local_rank': local, 'gpu': gpu})

    bs = cfg.per_device_train_batch_size
    ga = cfg.accumulation_steps
    global_micro = bs * world
    gbs, spg = cfg.generation_batch_size, cfg.steps_per_generation
    if gbs is None and spg is None:
        spg = ga
        gbs = global_micro * spg
    elif gbs is not None and spg is None:
        spg = gbs // global_micro if global_micro and gbs % global_micro == 0 else None
    elif gbs is None and spg is not None:
        gbs = global_micro * spg
    G = cfg.num_generations
    plan = Plan(
        nnodes=nnodes,
        node_rank=node_rank,
        nproc_per_node=nproc,
        processes_per_node=per_node,
        world_size=world,
        visible_gpus=visible,
        visible_count=visible_count,
        rollout_gpus=list(hw.rollout_gpus) if hw.rollout_gpus is not None else None,
        rollout_remote=hw.rollout_remote,
        processes=processes,
        gradient_accumulation_steps=ga,
        optimizer_batch=world * bs * ga,
        global_micro_batch=global_micro,
        generation_batch=gbs,
        steps_per_generation=spg,
        completions_per_process_per_step=bs * ga,
    )
    if G and G > 0:
        plan.prompts_per_rollout = gbs / G if gbs is not None else None
        plan.prompts_per_optimizer_step = world * bs * ga / G
    if cfg.use_vllm and gbs is not None:
        tp = max(1, cfg.vllm_tensor_parallel_size)
        if cfg.vllm_mode == 'colocate':
            plan.vllm_engines = max(1, world // tp)
        elif cfg.vllm_mode == 'server':
            plan.vllm_engines = max(1, cfg.vllm_data_parallel_size) * max(1, len(cfg.vllm_server_host or [None]))
        if plan.vllm_engines:
            plan.rollout_concurrency_per_engine = gbs / plan.vllm_engines
    return plan


@dataclass(frozen=True)
class PromptBound:
    """The longest prompt a launch lets through, worked out in one place (``prompt_bound``)."""

    tokens: int | None
    """Tokens; None when nothing bounds it and no context length is known."""
    why: str
    """What sets it, in words (``max_length``, vLLM's max_model_len - max_completion_length, the data, the model
    context)."""
    bounded: bool
    """Whether the launch or the data bounds it (False: only the model context does)."""


def prompt_bound(
    cfg: GRPOConfig,
    context_len: int | None,
    data_max: int | None = None,
    *,
    vllm: bool = True,
    leave_room: bool = True,
    clamp: bool = True,
) -> PromptBound:
    """The longest prompt to plan for. A prompt is at most ``max_length`` (ms-swift truncates or resamples longer
    ones); with ``vllm``, prompt + completion is at most vLLM's max_model_len (ms-swift caps max_tokens at
    max_model_len - prompt, swift/infer_engine/infer_engine.py ``set_default_max_tokens``); with ``data_max`` (the
    data's longest prompt, ``grpo-data stats``) at most that. When none of these applies it is the model context,
    less max_completion_length with ``leave_room``. ``clamp`` caps the result at the model context.

    The callers differ only in these switches: the memory verdict uses them all; the memory estimate's default
    counts max_length only (no vLLM bound, no room left); the length rules compare against vLLM's max_model_len and
    so leave it out, and keep a given max_length as written (``clamp`` only when max_length is unset)."""
    C = cfg.max_completion_length
    bounds = [(cfg.max_length, 'max_length')] if cfg.max_length else []
    mml = cfg.vllm_max_model_len if (vllm and cfg.use_vllm) else None
    if mml:
        where = "the rollout server's max_model_len" if cfg.vllm_mode == 'server' else 'vllm_max_model_len'
        bounds.append((max(0, mml - C), f'{where} {mml} - max_completion_length {C}'))
    if data_max is not None:
        bounds.append((data_max, "the data's longest prompt (--data-stats)"))
    bounded = bool(bounds)
    if not bounds:
        if context_len is None:
            return PromptBound(None, 'nothing bounds it', False)
        bounds.append(
            (max(1, context_len - C), f'the model context {context_len} - max_completion_length {C}')
            if leave_room
            else (context_len, f'the model context {context_len}')
        )
    n, why = min(bounds, key=lambda b: b[0])
    return PromptBound(min(n, context_len) if clamp and context_len is not None else n, why, bounded)


def old_logprobs_needed(cfg: GRPOConfig, plan: Plan, framework: Framework | str) -> bool:
    """Whether the old policy's log-probs are a forward pass of their own. ms-swift 4.6 computes them for every batch
    it prepares (swift/rlhf_trainers/grpo_trainer.py ``_prepare_batch_inputs``: ``old_per_token_logps`` under
    ``torch.no_grad()``, no condition). TRL only when gradient_accumulation_steps is not a multiple of
    steps_per_generation x num_iterations, or with vLLM's importance-sampling correction (on by default;
    trl/trainer/grpo_trainer.py, TRL 0.29)."""
    if as_framework(framework).old_logps_always:
        return True
    spg = plan.steps_per_generation or cfg.gradient_accumulation_steps or 1
    if (cfg.gradient_accumulation_steps or 1) % (spg * max(1, cfg.num_iterations)) != 0:
        return True
    return bool(cfg.use_vllm)


def no_grad_passes(cfg: GRPOConfig, plan: Plan, fw: Framework | str | None) -> list[str]:
    """The no-grad log-probabilities forwards the trainer ``fw`` runs before each training step, in order: the old
    policy's (``old_logprobs_needed``; none for ``fw`` None, the harness's step) and the reference's (beta != 0: the
    frozen copy, or the adapter disabled under LoRA)."""
    old = fw is not None and old_logprobs_needed(cfg, plan, fw)
    return (["the old policy's"] if old else []) + (["the reference's"] if cfg.beta else [])


def loads_with_device_map(cfg: GRPOConfig, plan: Plan, framework: Framework | str) -> bool:
    """Whether the trainer loads the weights straight onto its GPU with a ``device_map``, so that transformers'
    ``from_pretrained`` first asks the caching allocator for one fp16 block of the checkpoint's bytes and frees it
    (transformers 5 modeling_utils.py ``caching_allocator_warmup``): the weights then sit in that one segment
    (``Framework.device_map_unless``)."""
    unless = as_framework(framework).device_map_unless
    if unless == 'sharded':
        return not (cfg.zero_stage == 3 or cfg.fsdp_sharding)
    return plan.world_size <= 1 and not cfg.deepspeed
