"""Seconds per optimizer step of a GRPO launch, phase by phase.

Pure: (GRPOConfig, Plan, SpeedInputs) -> SpeedEstimate. Phases (seconds per optimizer step, on the slowest GPU):

- ``rollout``: prefill (prompts once per group with prefix caching) + decode. A decode step reads the weights and the
  KV cache (memory-bound) or computes 2 x active params per sequence (compute-bound), whichever is longer. The KV cache
  the memory model predicts caps how many sequences run at once, so a rollout runs in waves; the last wave lasts until
  the longest completion ends (the cap unless told otherwise). HF generate (``use_vllm false``) adds a per-layer
  Python/launch cost to every decode step.
- ``logprobs``: the reference model's (``beta != 0``) and the old policy's (always in ms-swift 4.6; in TRL when a
  rollout spans optimizer steps or with vLLM's importance-sampling correction) forward passes, 2 x N x padded tokens,
  once per rollout.
- ``train``: forward + backward, 6 x N x tokens (8 with gradient checkpointing; LoRA 4, 6 with checkpointing).
- ``weight_sync``: weights into vLLM (ZeRO-3 gather, NCCL broadcast to a server) and vLLM's sleep/wake.
- ``other``: the optimizer step and the training collectives (ZeRO-3 gathers per micro-batch, gradient reduction).

Each constant is in constants.py with its source. The band (``low``/``high``) evaluates the same model with every
constant at its optimistic and pessimistic value.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..config import GRPOConfig
from ..framework import as_framework
from ..memory.arch import Arch
from ..plan import Plan, old_logprobs_needed
from . import constants as K
from .specs import GPUSpec


@dataclass(frozen=True)
class SpeedInputs:
    arch: Arch
    spec: GPUSpec
    gpu_name: str
    prompt_mean: int
    """Prompt tokens on average (prefill)."""
    prompt_pad: int
    """Prompt tokens a micro-batch is padded to (its longest prompt)."""
    completion_mean: int
    completion_max: int
    """The longest completion of a batch: max_completion_length unless told otherwise (the long tail)."""
    framework: str = 'swift'
    kv_tokens: int | None = None
    """KV cache tokens per vLLM engine (the memory model's), None when not known: no waves are counted."""
    vllm_weight_bytes: float | None = None
    """vLLM's weights per engine (all TP ranks together), as loaded; None: the model's 16-bit weights."""
    dataset_rows: int | None = None
    vllm_large_card: bool = True
    """vLLM V1's larger defaults (max_num_seqs 1024) apply (memory.vllm._vllm_large_card)."""


@dataclass
class SpeedEstimate:
    step_seconds: float
    step_seconds_low: float
    step_seconds_high: float
    phases: dict
    """rollout, logprobs, train, weight_sync, other: seconds per optimizer step (point estimate)."""
    detail: dict = field(default_factory=dict)
    """Finer terms (prefill, decode, waves, sleep_wake, zero3_gather, optimizer, ...) and the counts behind them."""
    completion_tokens_assumed: dict = field(default_factory=dict)
    """{'mean', 'max', 'why'}."""
    prompt_tokens_assumed: dict = field(default_factory=dict)
    gpus: int = 1
    """GPUs the launch holds (training + rollout server)."""
    tokens_per_second: float = 0.0
    """Completion tokens generated per second of wall time (all GPUs)."""
    seconds_per_prompt: float = 0.0
    gpu_hours_per_epoch: float | None = None
    hours_per_epoch: float | None = None
    assumptions: list = field(default_factory=list)

    @property
    def shares(self) -> dict:
        total = sum(self.phases.values()) or 1.0
        return {k: v / total for k, v in self.phases.items()}

    def to_dict(self) -> dict:
        d = asdict(self)
        d['phase_shares'] = {k: round(v, 3) for k, v in self.shares.items()}
        return d


@dataclass(frozen=True)
class _Consts:
    bw_eff: float
    mfu: float
    hf_overhead: float
    sleep: float
    per_tensor: float = K.SERVER_SYNC_PER_TENSOR_S
    vllm_step: float = K.VLLM_STEP_HOST_S[0]
    hf_host: float = 1.0
    """Multiplier of HF generate's measured host costs (HF_STEP_FIXED_S, HF_STOPWORDS_PER_SEQ_S)."""


POINT = _Consts(K.DECODE_BW_EFF[0], K.MFU[0], K.HF_LAYER_OVERHEAD_S, 1.0)
FAST = _Consts(
    K.DECODE_BW_EFF[1],
    K.MFU[1],
    K.HF_LAYER_OVERHEAD_S * K.HF_OVERHEAD_BAND[0],
    K.SLEEP_BAND[0],
    K.SERVER_SYNC_PER_TENSOR_S * K.SERVER_SYNC_BAND[0],
    K.VLLM_STEP_HOST_S[1],
    K.HF_HOST_BAND[0],
)
SLOW = _Consts(
    K.DECODE_BW_EFF[2],
    K.MFU[2],
    K.HF_LAYER_OVERHEAD_S * K.HF_OVERHEAD_BAND[1],
    K.SLEEP_BAND[1],
    K.SERVER_SYNC_PER_TENSOR_S * K.SERVER_SYNC_BAND[1],
    K.VLLM_STEP_HOST_S[2],
    K.HF_HOST_BAND[1],
)


def hf_kv_passes(a: Arch, batch: float) -> float:
    """Times an HF-generate decode step moves the KV cache's bytes. transformers 5.19's ``DynamicLayer.update``
    (cache_utils.py) concatenates each layer's cache with the new token (read + write); with a padding mask (a batch of
    prompts of different lengths, left-padded) sdpa_attention.py's ``use_gqa_in_sdpa`` is false on CUDA, so
    ``repeat_kv`` copies K and V out to every query head (read + write x heads / kv_heads) and attention reads the
    copy (x heads / kv_heads): 3 + 2 x heads / kv_heads. A batch of one has no padding: cat's 2, attention's 1."""
    if batch <= 1:
        return 3.0
    g = a.heads / max(1, a.kv_heads)
    return 3 + 2 * g


def weight_tensors(a: Arch) -> int:
    """Parameter tensors of the Hugging Face model (what a per-tensor weight sync sends one by one): per layer q, k, v,
    o (+ 3 biases, + q/k norms), the MLP's 3 (a MoE layer: 3 per expert + the router + a shared expert's 3) and 2
    norms; the embeddings, the final norm and an untied lm_head."""
    mlp = (3 * a.experts + 1 + (3 if a.shared_expert_intermediate else 0)) if a.experts else 3
    per_layer = 4 + (3 if a.attention_bias else 0) + (2 if a.qk_norm else 0) + 2 + mlp
    return a.layers * per_layer + 2 + (0 if a.tied else 1)


def train_flops_per_token(cfg: GRPOConfig, n: float) -> float:
    """6N (8N with gradient checkpointing: the forward again); LoRA 4N (6N): no weight gradients for the frozen base."""
    if cfg.is_lora:
        return (6 if cfg.gradient_checkpointing else 4) * n
    return (8 if cfg.gradient_checkpointing else 6) * n


def _attn_flops_per_token(a: Arch, ctx: float) -> float:
    """Forward attention score and value products per token at an average causal context of ctx/2."""
    layers = a.layers if a.attention_layers is None else a.attention_layers
    return 4 * layers * a.q_dim * ctx / 2


def _decode_step(
    a: Arch,
    spec: GPUSpec,
    c: _Consts,
    weight_bytes: float,
    batch: float,
    ctx: float,
    tp: int,
    host_issue: float = 0.0,
    kv_passes: float = 1.0,
    engine: str = 'vllm',
) -> float:
    """One decode step on one engine (TP ranks in parallel): max(bytes / bandwidth, FLOPs / compute) + overheads.
    host_issue: seconds an eager loop's host takes to issue the step's kernels; the host runs ahead of the GPU, so the
    step lasts the longer of the two (the GPU idles between kernels only when the host is slower). kv_passes: how many
    times the step moves the KV cache's bytes (1: read once, as paged attention does). A vLLM engine adds its host
    work between steps (constants.VLLM_STEP_HOST_S); HF generate's serial host costs are the caller's."""
    kv = batch * ctx * a.kv_bytes_per_token(a.dtype_bytes) * kv_passes
    mem = (weight_bytes + kv) / tp / (spec.hbm_gbps * 1e9 * c.bw_eff)
    flops = batch * (2 * a.active_params() + _attn_flops_per_token(a, 2 * ctx)) / tp
    comp = flops / (spec.bf16_tflops * 1e12 * c.mfu)
    t = max(mem, comp, host_issue)
    if tp > 1:
        t += 2 * a.layers * K.TP_ALLREDUCE_S
    if engine == 'vllm':
        t += c.vllm_step
    return t


def _rollout(cfg: GRPOConfig, plan: Plan, inp: SpeedInputs, c: _Consts) -> tuple[float, dict]:
    """Seconds of one rollout (one generation batch) on the slowest engine, and its terms."""
    a, spec = inp.arch, inp.spec
    G = max(1, cfg.num_generations)
    P, Pm, Cm, Cx = inp.prompt_pad, inp.prompt_mean, inp.completion_mean, inp.completion_max
    spg = plan.steps_per_generation or cfg.gradient_accumulation_steps or 1
    d: dict = {}
    if not cfg.use_vllm:
        # HF generate on each training process: its share of the generation batch in one call, padded, no paged KV
        reqs = cfg.per_device_train_batch_size * spg
        w = a.weight_bytes()
        overhead = c.hf_overhead * (K.PEFT_LORA_LAUNCH_FACTOR if cfg.is_lora else 1.0)
        prefill = reqs * P * (2 * a.active_params() + _attn_flops_per_token(a, P)) / (spec.bf16_tflops * 1e12 * c.mfu)
        # the host issues every layer's kernels and the loop's own work; the GPU runs them as they come
        host = a.layers * overhead + K.HF_STEP_FIXED_S * c.hf_host
        step = _decode_step(a, spec, c, w, reqs, P + Cx / 2, 1, host, hf_kv_passes(a, reqs), engine='hf')
        # every row runs to the longest; ms-swift's stop-words check then waits for the step (a device-to-host copy)
        # and loops over the sequences: serial, after the step
        step += reqs * K.HF_STOPWORDS_PER_SEQ_S * c.hf_host
        decode = Cx * step
        d.update(
            engine='hf_generate',
            sequences_per_engine=reqs,
            concurrency=reqs,
            waves=1,
            decode_steps=Cx,
            decode_step_ms=round(step * 1e3, 2),
        )
        return prefill + decode, {**d, 'prefill': prefill, 'decode': decode}
    tp = max(1, cfg.vllm_tensor_parallel_size)
    reqs = plan.rollout_concurrency_per_engine or (plan.generation_batch or G)
    seqs_cap = cfg.vllm_max_num_seqs
    if not seqs_cap:
        # ms-swift colocate sizes max_num_seqs to the rollout (rollout_mixin); a server: vLLM V1's default
        seqs_cap = math.ceil(reqs) if cfg.vllm_mode == 'colocate' else (1024 if inp.vllm_large_card else 256)
    conc = min(reqs, seqs_cap)
    if inp.kv_tokens:
        # sequences that fit at their full length; vLLM admits more and preempts, which costs the same recompute
        conc = min(conc, max(1, inp.kv_tokens // max(1, Pm + Cx)))
    conc = max(1.0, conc)
    waves = math.ceil(reqs / conc - 1e-9)
    w = inp.vllm_weight_bytes if inp.vllm_weight_bytes is not None else a.weight_bytes()
    eager = K.EAGER_FACTOR if cfg.vllm_enforce_eager else 1.0
    # prefix caching (ms-swift's and vLLM's default): a group's G prompts are prefilled once
    prompts = reqs / G if cfg.vllm_enable_prefix_caching is not False else reqs
    prefill = (
        prompts * Pm * (2 * a.active_params() + _attn_flops_per_token(a, Pm)) / tp / (spec.bf16_tflops * 1e12 * c.mfu)
    )
    bulk_steps = (waves - 1) * Cm
    bulk = bulk_steps * _decode_step(a, spec, c, w, conc, Pm + Cm / 2, tp) * eager
    # the last wave: conc_last sequences, the average one ends at the mean, the longest at the cap
    last = reqs - (waves - 1) * conc
    avg_active = max(1.0, last * Cm / max(1, Cx))
    tail = Cx * _decode_step(a, spec, c, w, avg_active, Pm + Cm / 2, tp) * eager
    d.update(
        engine='vllm',
        sequences_per_engine=reqs,
        concurrency=conc,
        max_num_seqs=seqs_cap,
        waves=waves,
        decode_steps=bulk_steps + Cx,
        prefill=prefill,
        decode=bulk + tail,
        long_tail=tail,
        decode_step_ms=round(_decode_step(a, spec, c, w, conc, Pm + Cm / 2, tp) * eager * 1e3, 2),
    )
    return prefill + bulk + tail, d


def _link_gbps(plan: Plan, spec: GPUSpec) -> float:
    return K.INTERNODE_GBPS if plan.nnodes > 1 else spec.link_gbps


def _weight_sync(cfg: GRPOConfig, plan: Plan, inp: SpeedInputs, c: _Consts) -> tuple[float, dict]:
    """Seconds per rollout to put the new weights into vLLM, plus vLLM's sleep/wake (colocate)."""
    if not cfg.use_vllm:
        return 0.0, {}
    a, spec = inp.arch, inp.spec
    w16 = a.weight_bytes(dtype_bytes=2)
    world = max(1, plan.world_size)
    d: dict = {}
    gather = 0.0
    if cfg.zero_stage == 3 and world > 1:  # the full 16-bit weights gathered from every rank
        gather = w16 * (world - 1) / world / (_link_gbps(plan, spec) * 1e9)
    if cfg.vllm_mode == 'server':
        sent = a.lora_params(cfg.lora_rank, cfg.target_modules) * 2 if (cfg.is_lora and cfg.vllm_enable_lora) else w16
        link = K.INTERNODE_GBPS if plan.rollout_remote else spec.link_gbps
        load = sent / (link * 1e9)  # NCCL broadcast trainer -> server
        calls = 0.0
        if as_framework(inp.framework).weight_sync == 'per_param':
            # one HTTP request + collective_rpc + broadcast per tensor (constants.SERVER_SYNC_PER_TENSOR_S)
            calls = weight_tensors(a) * c.per_tensor
        load += calls
        d.update(broadcast=load, broadcast_bytes=sent, per_tensor_calls=calls)
        sleep = 0.0
    else:
        tp = max(1, cfg.vllm_tensor_parallel_size)
        load = 2 * w16 / tp / (spec.hbm_gbps * 1e9 * c.bw_eff)  # merge (LoRA) and load_weights: a copy on the GPU
        sleep = 0.0
        level = cfg.effective_sleep_level
        if level in K.SLEEP_WAKE:
            a0, b = K.SLEEP_WAKE[level]
            gib = (inp.vllm_weight_bytes if inp.vllm_weight_bytes is not None else w16) / tp / 2**30
            sleep = (a0 + b * gib) * c.sleep
        d.update(load=load, sleep_wake=sleep)
    d['zero3_gather'] = gather
    return gather + load + sleep, d


def _train(cfg: GRPOConfig, plan: Plan, inp: SpeedInputs, c: _Consts) -> tuple[float, float, float, dict]:
    """(train, logprobs, other) seconds per optimizer step on one training GPU, and the terms."""
    a, spec = inp.arch, inp.spec
    n = a.active_params()
    bs = cfg.per_device_train_batch_size
    ga = cfg.gradient_accumulation_steps or 1
    # GRPO pads a micro-batch to its longest prompt and completion; padding_free packs the real tokens
    seq = inp.prompt_mean + inp.completion_mean if cfg.padding_free else inp.prompt_pad + inp.completion_max
    tokens = bs * ga * seq  # per GPU per optimizer step
    attn = _attn_flops_per_token(a, seq)
    peak = spec.bf16_tflops * 1e12 * c.mfu
    train = tokens * (train_flops_per_token(cfg, n) + 3 * attn) / peak
    fwd = tokens * (2 * n + attn) / peak
    spg = plan.steps_per_generation or ga
    passes = 1 if cfg.beta != 0 else 0
    old = old_logprobs_needed(cfg, plan, inp.framework)
    # reference and old log-probs: once per rollout (when its batch is prepared), reused over num_iterations
    mu = max(1, cfg.num_iterations)
    logprobs = (fwd * passes + (fwd if old else 0.0)) / mu
    world = max(1, plan.world_size)
    link = _link_gbps(plan, spec) * 1e9
    trainable = a.lora_params(cfg.lora_rank, cfg.target_modules) if cfg.is_lora else a.param_count()
    stage = cfg.zero_stage or 0
    shard = world if stage >= 1 else 1
    optimizer = trainable * K.ADAM_BYTES_PER_PARAM / shard / (spec.hbm_gbps * 1e9 * c.bw_eff)
    if cfg.offload_optimizer or (cfg.deepspeed or '').endswith('offload'):
        optimizer += trainable * 4 / shard / (K.PCIE_GBPS * 1e9)  # 16-bit gradients down, 16-bit weights up
    grad_reduce = 2 * trainable * 2 * (world - 1) / world / link if world > 1 else 0.0
    zero3 = 0.0
    if stage == 3 and world > 1:
        w16 = a.weight_bytes(dtype_bytes=2)
        # forward and backward all-gather per micro-batch (and the recompute's with checkpointing), and the log-prob
        # forwards' gathers
        gathers = ga * (3 if cfg.gradient_checkpointing else 2) + ga * (passes + (1 if old else 0))
        zero3 = gathers * w16 * (world - 1) / world / link
    other = optimizer + grad_reduce + zero3
    return (
        train,
        logprobs,
        other,
        {
            'train_tokens_per_gpu': tokens,
            'padded_sequence': seq,
            'optimizer': optimizer,
            'grad_reduce': grad_reduce,
            'zero3_gather_train': zero3,
            'ref_logprobs': fwd * passes / mu,
            'old_logprobs': old,
            'steps_per_generation': spg,
        },
    )


def _one(cfg: GRPOConfig, plan: Plan, inp: SpeedInputs, c: _Consts) -> tuple[float, dict, dict]:
    ga = cfg.gradient_accumulation_steps or 1
    spg = plan.steps_per_generation or ga
    mu = max(1, cfg.num_iterations)
    per_gen = ga / (spg * mu)  # rollouts per optimizer step
    roll, rd = _rollout(cfg, plan, inp, c)
    sync, sd = _weight_sync(cfg, plan, inp, c)
    train, logp, other, td = _train(cfg, plan, inp, c)
    phases = {
        'rollout': roll * per_gen,
        'logprobs': logp,
        'train': train,
        'weight_sync': sync * per_gen,
        'other': other,
    }
    total = sum(phases.values())
    if cfg.rollout_mode == 'server' and cfg.async_generate:
        # ms-swift async_generate: the next rollout runs on the server while this batch trains
        total = max(phases['rollout'] + phases['weight_sync'], phases['logprobs'] + phases['train'] + phases['other'])
    return total, phases, {**rd, **sd, **td, 'rollouts_per_optimizer_step': per_gen}


def launch_gpus(cfg: GRPOConfig, plan: Plan) -> int:
    """GPUs the launch holds: the training processes, and a rollout server's TP x DP."""
    n = max(1, plan.world_size)
    if cfg.rollout_mode == 'server':
        n += max(1, cfg.vllm_tensor_parallel_size) * max(1, cfg.vllm_data_parallel_size)
    return n


def predict(cfg: GRPOConfig, plan: Plan, inp: SpeedInputs) -> SpeedEstimate:
    total, phases, detail = _one(cfg, plan, inp, POINT)
    low = _one(cfg, plan, inp, FAST)[0]
    high = _one(cfg, plan, inp, SLOW)[0]
    gpus = launch_gpus(cfg, plan)
    completions = plan.optimizer_batch or (cfg.per_device_train_batch_size * (cfg.gradient_accumulation_steps or 1))
    G = max(1, cfg.num_generations)
    prompts = completions / G
    est = SpeedEstimate(
        step_seconds=round(total, 2),
        step_seconds_low=round(low, 2),
        step_seconds_high=round(high, 2),
        phases={k: round(v, 3) for k, v in phases.items()},
        detail={k: (round(v, 4) if isinstance(v, float) else v) for k, v in detail.items()},
        completion_tokens_assumed={'mean': inp.completion_mean, 'max': inp.completion_max},
        prompt_tokens_assumed={'mean': inp.prompt_mean, 'padded': inp.prompt_pad},
        gpus=gpus,
        tokens_per_second=round(completions * inp.completion_mean / total, 1) if total else 0.0,
        seconds_per_prompt=round(total / prompts, 3) if prompts else 0.0,
    )
    if inp.dataset_rows:
        steps = inp.dataset_rows / prompts * max(1, cfg.num_iterations) if prompts else 0
        est.hours_per_epoch = round(steps * total / 3600, 2)
        est.gpu_hours_per_epoch = round(steps * total * gpus / 3600, 1)
    return est
