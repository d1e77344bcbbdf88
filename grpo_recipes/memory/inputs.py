"""The memory model's inputs and output (:class:`Inputs`, :class:`GPUMemory`) and its constants, each with
the source it comes from (peers-and-memory.md is ../shared/reference/peers-and-memory.md); none is fitted to a
particular case."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from .arch import Arch

if TYPE_CHECKING:
    from ..allocconf import AllocConf
    from ..framework import Framework, Handover

GiB = 2**30

# CUDA context + kernels per process. HF "model memory anatomy": 1.3 GB on a V100 after the first
# CUDA op; gpu_poor assumes 650 MB; we take 1.0 GiB (peers-and-memory.md §E.8).
CUDA_CONTEXT = 1.0 * GiB
# NCCL buffers per communicator group a process joins: ~0.5 GiB (peers-and-memory.md §E.9: 4 MiB x
# channels x peers FIFOs; a 512 MiB NET buffer seen for one rank; 1.6 GB for a busy communicator).
NCCL_PER_GROUP = 0.5 * GiB
# vLLM's "non-torch" memory (CUDA/cuBLAS workspaces, and with TP > 1 the NCCL and custom
# all-reduce buffers). Logged by vLLM per worker on H100 for six models (llm-d-benchmark,
# config_explorer/empirical-vllm-memory-results.md): 0.13-0.14 GiB at TP 1, 0.54-0.55 GiB at TP 2.
VLLM_NON_TORCH_TP1 = 0.14 * GiB
VLLM_NON_TORCH_TP = 0.55 * GiB
# The sampler step of vLLM's profiling run holds, for R dummy requests over the full vocabulary V
# (logits are gathered across TP ranks before sampling), this many R x V fp32-sized buffers at its peak.
# Counted from the code, not fitted:
# - native (vllm/v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p; the dummy batch sets top-k and
#   top-p, so the whole vocabulary is sorted): the bf16 logits the runner holds (0.5), their fp32 copy
#   (1), the sort's values (1) and int64 indices (2), and inside torch's segmented sort
#   (aten/src/ATen/native/cuda/Sort.cu segmented_sort_pairs) an int64 index input (2) plus cub's
#   alternate key and value buffers (1 + 2): 9.5.
# - flashinfer (flashinfer.sampling.top_k_top_p_sampling_from_logits): bf16 logits (0.5), fp32 logits
#   (1), the top-k masked copy (1) and its softmax (1): 3.5.
# Check: llm-d's H100 logs (R = 1024) give 9.57-9.64 x R x V x 4 bytes once the dummy forward's hidden
# states are taken off, for Qwen3-0.6B, Qwen3-32B, Llama-3.1-8B, Llama-3.3-70B and gpt-oss-20b.
SAMPLER_BUFFERS = {'native': 9.5, 'flashinfer': 3.5}
# From vLLM 0.17.0 the native top-k/top-p sorts only batches under 8 rows: from 8 rows on it runs vLLM's Triton
# kernel (vllm/v1/sample/ops/topk_topp_sampler.py ``apply_top_k_top_p``: "HAS_TRITON and logits.shape[0] >= 8";
# topk_topp_triton.py, vllm PR #33538; in the 0.17.0 and 0.17.1 wheels, not in 0.16.0), which masks the fp32
# logits in place. Its peak, read in the 0.17.1 wheel (v1/sample/sampler.py, ops/topk_topp_sampler.py): the
# runner's bf16 logits (0.5), their fp32 copy (1), ``forward_native``'s softmax (1) and ``random_sample``'s
# exponential draws (1): 3.5 R x V fp32 buffers, plus the kernel's cached buffer of one vocabulary row per program
# (``min(next_power_of_2(min(rows, SMs)), SMs)`` rows; ``gpus.SMS``).
TRITON_SAMPLER_FROM = (0, 17, 0)
TRITON_SAMPLER_MIN_ROWS = 8
TRITON_SAMPLER_BUFFERS = 3.5
TRITON_SAMPLER_MAX_SMS = 142  # an unknown card: the most SMs of the catalogue (gpus.SMS, L40S), the larger buffer
# CUDA-graph pools, kept even when vLLM sleeps (verl note, §D.3); enforce_eager removes them.
# Public vLLM logs show "Graph capturing finished ... took 0.3-1.0 GiB" and, from the profiler, "Estimated CUDA
# graph memory: 0.36 GiB total" (vLLM 0.27.1, gpustack/runner PR #251); we take 0.5 GiB.
VLLM_CUDA_GRAPHS = 0.5 * GiB
# From this vLLM on, the memory profiler captures graphs against a dummy KV cache and takes their memory out of
# the KV budget (vllm PR #30515, off by default when merged; the log says "CUDA graph memory profiling is enabled
# (default since v0.21.0)"; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 turns it off). Before it, graphs are
# captured after the KV cache is allocated and come on top of gpu_memory_utilization.
VLLM_GRAPHS_PROFILED_FROM = (0, 21, 0)
# Allocator fragmentation on the dynamic terms (activations, logits): Megatron's x1.05 (§E.10).
FRAGMENTATION = 1.05
# KV cache block size (vLLM default 16 tokens); a sequence needs ceil(len/16) blocks.
KV_BLOCK = 16
# bitsandbytes' 8-bit AdamW: two uint8 moments and two fp32 absmax per block of 256 values, per parameter
# (bitsandbytes/optim/optimizer.py Optimizer2State.init_state, block_wise)
EIGHT_BIT_MOMENTS = 2 + 8 / 256
# ZeRO-3 steps the optimizer one sub-group of at most this many fp32 elements at a time (ms-swift's
# swift/config/zero3.json and zero3_offload.json: "sub_group_size": 1e9; deepspeed stage3.py _optimizer_step).
ZERO3_SUB_GROUP = 10**9


@dataclass
class GPUMemory:
    gpu: str
    """GPU id (or ``train`` / ``rollout`` when ids are unknown)."""
    role: str
    """``train+vllm`` (colocate), ``train``, ``rollout`` (server), ``train+hf-generate``."""
    capacity_gib: float
    components: dict = field(default_factory=dict)
    """Every term in GiB, named; the phase totals are built from these."""
    phases: dict = field(default_factory=dict)
    """Total GiB per phase."""
    phase: str = ''
    """The phase that peaks."""
    total_gib: float = 0.0
    peak_fraction: float = 0.0
    fits: bool = True
    headroom_pct: float = 0.0
    vllm: dict = field(default_factory=dict)
    """vLLM accounting: requested, weights, activation, kv_gib, kv_tokens, checks."""
    problems: list = field(default_factory=list)
    """Failed checks, each a dict: check, message."""
    phase_terms: dict = field(default_factory=dict)
    """The terms of the peak phase, largest first (GiB)."""
    quantities: dict = field(default_factory=dict)
    """The peak as torch's allocated and reserved bytes and the device's used memory (``reserve.quantities``)."""
    verdict: str = ''
    """What the table's verdict column says when not the peak's own fits/OOM: ``OOM if long`` (the OOM needs prompts
    or completions longer than those reached as a rule: a warning, not a refusal) or ``withheld`` (errors that decide
    the batch or the processes are open: the figures are shown, no verdict)."""
    phase_parts: dict = field(default_factory=dict)
    """Every phase's terms (GiB), phase -> {term: GiB}: what ``check``'s bars and ``--plot`` draw."""

    def to_dict(self) -> dict:
        return asdict(self)


def _g(x: float) -> float:
    return round(x / GiB, 2)


@dataclass
class Inputs:
    """What the memory model needs beyond the config: the model and the card."""

    arch: Arch
    capacity_gib: float
    gpu_name: str | None = None
    prompt_len: int | None = None
    """Tokens per prompt to plan for (default: max_length, capped by the context)."""
    logits_from_prompt: int | None = None
    """The shortest prompt of a micro-batch whose logits start at its first label: the logits then span the planned
    prompt less this beyond the completions (``memory.trainer.logits_rows``; set by ``memory.trainer.logits_from``).
    None: the logits cover the completions only."""
    sft: bool = False
    """Plain supervised training (calibration): one train phase, loss over every token."""
    vllm_entry: str = 'offline'
    """vLLM defaults of the entry point: ``offline`` (LLM class, what ms-swift uses) or ``server``."""
    vllm_sampler: str = 'native'
    """Top-k/top-p sampler of vLLM's profiling run, ``native`` or ``flashinfer`` (see resolve_sampler)."""
    vllm_sampler_why: str = ''
    """Why that sampler was assumed (shown with the vLLM accounting)."""
    vllm_version: str | None = None
    """The vLLM that runs the rollouts, when known (installed, or a calibration case's): before 0.8 the V0
    engine's scheduler defaults apply (see ``vllm_terms``)."""
    vllm_use_v1_env: str | None = None
    """``VLLM_USE_V1`` as the launch sets it: 0 runs vLLM 0.8-0.9 on the V0 engine (``vllm_engine.uses_v0``)."""
    vllm_graphs_env: str | None = None
    """``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` as the launch sets it (see ``graphs_profiled``)."""
    adamw: str = 'fused'
    """How the trainer's AdamW steps: ``fused`` (one kernel, no temporaries), ``foreach`` (holds a copy of the
    second moments during the step), ``8bit`` (bitsandbytes: 1-byte moments) or ``other`` (counted as AdamW); see
    ``resolve_adamw``."""
    adamw_why: str = ''
    weight_sync: str = 'batched'
    """How ZeRO-3 weights reach vLLM: ``batched`` (ms-swift: the model gathered in ``move_model_batches`` groups, all
    at once when unset) or ``per_param`` (TRL: trl/generation/vllm_generation.py ``sync_weights`` gathers one
    parameter at a time without PEFT; with PEFT it gathers the whole model to merge the adapters)."""
    """Why that AdamW was assumed (shown with the assumptions)."""
    images_per_prompt: int = 0
    """Multimodal models: images in each prompt (0: text only), for the vision tower's term (vision_train.py)."""
    max_pixels: int | None = None
    """Multimodal models: ms-swift's ``MAX_PIXELS`` bound per image (None: the processor's max_pixels)."""
    alloc: AllocConf | None = None
    """The CUDA caching allocator the trainer phase runs with (``allocconf.AllocConf``; None: torch's defaults).
    Set from the launch by ``envfix.with_alloc``; the allocator's reserve term reads it."""
    alloc_vllm: AllocConf | None = None
    """The allocator behind a colocated vLLM engine's torch allocations (``allocconf.AllocConf``); None: no vLLM in
    the training process, or vLLM's sleep-mode pool (never expandable segments)."""
    replayed: tuple | None = None
    """(``replay.replay_key``, bytes): torch's reserve above the allocated peak for the launch's own training step,
    from the traced step's replay (``check --replay``); the closed form (``reserve.reserve_bytes``) serves any other
    shape. None: the closed form everywhere."""
    framework: Framework | None = None
    """The launch's framework (``framework.Framework``: its facts, e.g. whether it runs a no-grad pass for the old
    policy's log-probabilities, ``plan.old_logprobs_needed``); None: the harness grid's step, which runs none."""
    handover: Handover | None = None
    """What the framework runs between the train step, the weight sync and the rollout at its release
    (``framework.Handover``, from the front end's ``handover`` hook): which phases start with the train step's cached
    blocks still reserved. None: every phase planned from an empty cache."""
