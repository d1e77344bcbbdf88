"""One typed description of a GRPO launch: the arguments that decide whether it fits and starts.

Every field is an ms-swift 4.6 ``swift rlhf`` argument of the same name. The value is what ms-swift
would hold after parsing and after its GRPO defaults (``RLHFArguments._init_grpo`` and
``_set_default``): e.g. ``gradient_accumulation_steps`` None becomes 1 and ``beta`` None becomes
0.04. Values that ms-swift fills in from the model (``max_length``, ``vllm_max_model_len``) stay
``None`` here and are resolved by the guard against the model's ``config.json``.

tests/test_real_parser.py checks these resolved values against ms-swift's own parse.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from . import swift_args


@dataclass
class GRPOConfig:
    # --- what is trained ---
    model: str | None = None
    """Model id or local dir (``--model``)."""
    model_type: str | None = None
    """ms-swift model type; Qwen2.5 is ``qwen2`` in 4.x (there is no ``qwen2_5`` model type)."""
    template: str | None = None
    """Chat template, e.g. ``qwen2_5`` or ``deepseek_r1``."""
    rlhf_type: str = 'dpo'
    """Must be ``grpo`` for this pack (ms-swift's default is ``dpo``)."""
    tuner_type: str = 'lora'
    """``lora`` or ``full`` (and others). Renamed from ``train_type`` in 4.0."""
    torch_dtype: str | None = None
    """Compute dtype; None takes the model's ``torch_dtype``."""
    quant_method: str | None = None
    """On-the-fly quantisation (``bnb`` for QLoRA). GPTQ/AWQ checkpoints need none."""
    quant_bits: int | None = None
    """Bits for ``quant_method`` (bnb: 4 or 8)."""
    lora_rank: int = 8
    """LoRA rank; also vLLM's ``max_lora_rank`` in colocate mode with ``vllm_enable_lora``."""
    lora_alpha: float = 32
    lora_dropout: float = 0.05
    """ms-swift's default (swift/arguments/tuner_args.py); PEFT then keeps a dropout mask per adapted linear."""
    target_modules: list[str] = field(default_factory=lambda: ['all-linear'])
    """Modules that get LoRA adapters; ``all-linear`` is every linear layer but ``lm_head``."""
    ref_model: str | None = None
    """Reference model; must be unset with LoRA (the adapter is disabled instead)."""
    beta: float = 0.04
    """KL coefficient; GRPO default 0.04. With 0 no reference model is loaded."""

    # --- batch: all counted in completions ---
    per_device_train_batch_size: int = 1
    """Completions per process per micro-step (not prompts)."""
    per_device_eval_batch_size: int = 1
    gradient_accumulation_steps: int | None = 1
    """Micro-steps per optimizer step, as the launch gives it. GRPO default 1 (``_set_default``); None only where no
    GRPO default applied. Arithmetic reads ``accumulation_steps``, never this field."""
    steps_per_generation: int | None = None
    """Micro-steps served by one rollout; None means ``gradient_accumulation_steps``."""
    generation_batch_size: int | None = None
    """Completions per rollout across all processes; None means bs × world × steps_per_generation."""
    num_generations: int = 8
    """Completions per prompt (G). Must be > 1 and divide ``generation_batch_size``."""
    num_generations_eval: int | None = None
    num_iterations: int = 1
    """Optimizer passes over each rollout (μ)."""
    dynamic_sample: bool = False
    """DAPO dynamic sampling: replace all-equal-reward groups by resampled ones (ms-swift's default False)."""
    max_resample_times: int = 3
    """Extra rollouts dynamic sampling may spend per step before it keeps the original batch (ms-swift: 3)."""
    eval_strategy: str | None = None
    """``no``, ``steps`` or ``epoch``; None follows ``save_strategy``. Forced to ``no`` without a val set."""
    eval_steps: int | None = None
    """Steps between evals; None follows ``save_steps`` (SftArguments._init_eval_strategy)."""
    val_dataset: list[str] = field(default_factory=list)
    split_dataset_ratio: float = 0.0
    epsilon: float = 0.2
    """PPO-style clipping range; only acts when the policy moved since the rollout."""

    # --- lengths ---
    max_length: int | None = None
    """In GRPO, the maximum *prompt* length. None: the model's max length."""
    max_completion_length: int = 512
    """Maximum generated tokens per completion (vLLM ``max_tokens``)."""
    truncation_strategy: str = 'left'
    """What happens to a prompt over ``max_length``: ``left`` (cut the head) or ``delete`` (resample)."""
    max_model_len: int | None = None
    """A *model* argument (RoPE/context override), not vLLM's. vLLM's is ``vllm_max_model_len``."""

    # --- vLLM rollout ---
    use_vllm: bool = False
    vllm_mode: str | None = None
    """``colocate`` (vLLM inside each trainer process) or ``server`` (``swift rollout`` on other GPUs)."""
    vllm_gpu_memory_utilization: float = 0.9
    """Fraction of each GPU's *total* memory vLLM reserves (weights + activations + KV cache)."""
    vllm_tensor_parallel_size: int = 1
    vllm_data_parallel_size: int = 1
    vllm_enable_expert_parallel: bool = False
    """vLLM's ``enable_expert_parallel``: a MoE's routed experts are spread over the engine's TP x DP ranks, each
    holding experts / (TP x DP) of them whole, instead of a 1/TP slice of every expert (vLLM
    ``FusedMoEParallelConfig.make``: ``ep_size = tp_size * dp_size`` when expert parallelism is on); the rest of the
    model stays split by TP alone."""
    vllm_max_model_len: int | None = None
    """vLLM context length; None takes the model's full context (32768 or 131072)."""
    vllm_max_num_seqs: int | None = None
    vllm_enforce_eager: bool = False
    """True skips CUDA graphs (saves memory, slower)."""
    vllm_engine_kwargs: str | None = None
    """JSON object passed through to vLLM's engine arguments. The memory model reads
    ``max_num_batched_tokens``, ``max_num_seqs`` and ``kv_cache_dtype`` from it."""
    vllm_limit_mm_per_prompt: str | None = None
    """vLLM's ``limit_mm_per_prompt`` (JSON, e.g. ``{"image": 1, "video": 0}``): which modalities, and how many items,
    its multimodal profiling plans for (see ``vllm_startup.mm_profile``)."""
    vllm_quantization: str | None = None
    """vLLM's ``quantization`` for a rollout server (ms-swift's colocated engine sets ``bitsandbytes`` itself for a
    bnb 4-bit model); ``bitsandbytes`` and ``fp8`` change the weights vLLM holds
    (``vllm_startup.vllm_weight_bytes``)."""
    vllm_enable_lora: bool = False
    vllm_enable_prefix_caching: bool | None = True
    sleep_level: int = 0
    """Colocate only: 1 offloads vLLM weights and drops KV during training; 2 drops both.
    Kept as the user wrote it; see ``effective_sleep_level`` for what ms-swift uses."""
    offload_model: bool = False
    offload_optimizer: bool = False
    move_model_batches: int | None = None
    """Split the weight sync into this many layer groups (lowers the ZeRO-3 gather peak)."""
    async_generate: bool = False
    vllm_server_host: list[str] | None = None
    vllm_in_trainer: bool = False
    """vLLM runs inside a training process on GPU(s) of its own (TRL 0.14-0.15's ``vllm_device``, ms-swift < 3.6's
    "async mode"): planned like a rollout server (``vllm_mode`` 'server') on this machine, with no server to reach.
    Set by the front ends, never a flag."""
    vllm_server_port: list[int] = field(default_factory=lambda: [8000])
    vllm_server_base_url: list[str] | None = None
    vllm_server_group_port: list[int] | None = None
    vllm_server_timeout: float = 240.0

    # --- parallelism and memory ---
    deepspeed: str | None = None
    """``zero0``..``zero3``, ``zero2_offload``, ``zero3_offload`` or a JSON file."""
    fsdp: str | None = None
    """``fsdp2`` (ms-swift's swift/config/fsdp2.json: ``full_shard``, FSDP v2, activation checkpointing on)
    or an FSDP strategy string/JSON file; ``shard_grad_op`` shards gradients and optimizer only."""
    padding_free: bool = False
    """Sequences packed without padding for training and log-probs (swift/rlhf_trainers/grpo_trainer.py: the
    ``template.padding_free`` branches): a micro-batch costs its real tokens, not its longest row's length."""
    sequence_parallel_size: int = 1
    """Ulysses sequence parallelism: each group of this many ranks splits one sequence's tokens."""
    gradient_checkpointing: bool = True
    use_liger_kernel: bool = False
    """Liger kernels: the fused linear + loss never materialises the full-vocabulary logits."""
    ignore_args_error: bool = False
    """ms-swift logs arguments its parser does not know instead of stopping (swift/pipelines/base.py; 3.x:
    swift/llm/base.py)."""
    freeze_vit: bool = True
    """Multimodal models: keep the vision tower frozen (ms-swift's default); full training then trains the LLM only."""
    optim: str | None = None
    """``--optim`` as the user set it; None leaves it to transformers, whose default depends on the installed torch
    (``adamw_torch_fused`` on torch >= 2.8, else ``adamw_torch``; see ``memory.resolve_adamw``)."""
    ds3_gather_for_generation: bool = True

    # --- rewards and data ---
    reward_funcs: list[str] = field(default_factory=list)
    reward_funcs_in_script: bool = False
    """TRL: the training script hands its reward functions to GRPOTrainer in code, so none are named here and
    ``reward_funcs`` stays empty. Set by the TRL front end, never a flag."""
    reward_weights: list[float] | None = None
    reward_model: list[str] | None = None
    use_gym_env: bool | None = None
    """Rewards come from a gym environment; None: in server mode the rollout server decides (its --use_gym_env)."""
    teacher_model: str | None = None
    """OPD-RL: a teacher's log-ratio is the advantage (with no reward_funcs, the only signal)."""
    teacher_model_server: str | None = None
    external_plugins: list[str] = field(default_factory=list)
    dataset: list[str] = field(default_factory=list)
    columns: str | None = None
    system: str | None = None

    explicit: frozenset[str] = frozenset()
    """The argument names the user set (the rest are ms-swift defaults)."""

    @classmethod
    def from_argv(cls, argv: list[str]) -> tuple['GRPOConfig', list[str]]:
        """Parse ``argv`` with the snapshot parser; returns (config, remaining unknown strings)."""
        values, remaining, explicit = swift_args.parse_explicit(argv)
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == 'explicit' or f.name not in values:
                continue
            kwargs[f.name] = values[f.name]
        if 'optim' not in explicit:
            kwargs.pop('optim', None)  # the snapshot's default is the torch it was taken with, not the user's
        cfg = cls(**kwargs, explicit=frozenset(explicit))
        cfg._apply_grpo_defaults(values)
        return cfg, remaining

    def _apply_grpo_defaults(self, values: dict[str, Any]) -> None:
        # ms-swift RLHFArguments: _init_max_completion_length, _init_grpo, _set_default.
        self.max_completion_length = (
            values.get('response_length') or values.get('max_new_tokens') or self.max_completion_length
        )
        if self.gradient_accumulation_steps is None:
            self.gradient_accumulation_steps = 1 if self.rlhf_type == 'grpo' else self.gradient_accumulation_steps
        if self.rlhf_type == 'grpo':
            if self.truncation_strategy is None:
                self.truncation_strategy = 'left'
            if self.beta is None:
                self.beta = 0.04
        if not (self.val_dataset or self.split_dataset_ratio > 0):
            self.eval_strategy = 'no'  # SftArguments.__post_init__
        elif self.eval_strategy is None:  # SftArguments._init_eval_strategy: eval follows the save strategy
            self.eval_strategy = values.get('save_strategy') or 'steps'
        if self.eval_strategy == 'steps' and self.eval_steps is None:
            self.eval_steps = values.get('save_steps')

    @property
    def accumulation_steps(self) -> int:
        """The gradient accumulation the plan and the rules use: the one place it is derived. Unset is 1 (ms-swift's
        GRPO default, ``RLHFArguments._set_default``; transformers' ``TrainingArguments`` default for TRL). 0 and
        negatives are kept as written, never turned into 1: ms-swift and TRL refuse or divide by them, and
        ``batch.accumulation`` says so."""
        return 1 if self.gradient_accumulation_steps is None else int(self.gradient_accumulation_steps)

    def is_set(self, name: str) -> bool:
        return name in self.explicit

    @property
    def rollout_mode(self) -> str | None:
        """How completions are generated: ``colocate`` (vLLM in every training process), ``server`` (a rollout server,
        or an in-trainer vLLM on GPUs of its own: ``vllm_in_trainer``), None (no vLLM: the trainer's own generate).
        The one place ``use_vllm`` and ``vllm_mode`` are read together."""
        return self.vllm_mode if self.use_vllm else None

    @property
    def effective_sleep_level(self) -> int:
        """ms-swift forces sleep_level 0 with async_generate, without vLLM, or in server mode (_init_grpo)."""
        if self.async_generate or not self.use_vllm or self.vllm_mode == 'server':
            return 0
        return self.sleep_level

    @property
    def is_lora(self) -> bool:
        return self.tuner_type not in ('full',)

    @property
    def fsdp_sharding(self) -> str | None:
        """``full_shard`` or ``shard_grad_op`` for an FSDP launch, None without FSDP. ms-swift's ``fsdp2``
        preset is full_shard (swift/config/fsdp2.json); a JSON file we cannot read counts as full_shard."""
        if not self.fsdp:
            return None
        text = self.fsdp.lower()
        return 'shard_grad_op' if 'shard_grad_op' in text or 'hybrid_shard_zero2' in text else 'full_shard'

    @property
    def zero_stage(self) -> int | None:
        """The ZeRO stage of a built-in ``--deepspeed`` preset (None if no DeepSpeed or a custom file)."""
        if not self.deepspeed:
            return None
        name = self.deepspeed.lower()
        for stage in (0, 1, 2, 3):
            if name.startswith(f'zero{stage}'):
                return stage
        return None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d['explicit'] = sorted(self.explicit)
        return d
