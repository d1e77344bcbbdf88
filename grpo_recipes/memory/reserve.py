"""The caching allocator's reserve for the analytic fast path, and what the device then holds.

What runs out on a GPU is what torch *reserves* (cached segments, ``torch.cuda.max_memory_reserved``, ms-swift's
``memory(GiB)``) plus what the allocator never sees (the CUDA context). The analytic model counts allocated bytes
(``memory.trainer_terms(fragmentation=1.0)`` is what ``grpo-guard trace`` counts); this module adds the reserve:

    reserved = allocated + RESERVE_PER_BLOCK[allocator] x the largest transient block
               (default allocator: at most the segments left free at the peak, ``segments_left_free``)
    device   = reserved + DEVICE_CONTEXT (+ NCCL buffers where the launch has a communicator)

The largest transient block of a GRPO/SFT step is the fp32 logits of one micro-batch (micro-batch x completion x
vocabulary x 4 bytes: accelerate's upcast and the four buffers of its backward, see ``memory.trainer_terms``).
Freed blocks of that size are split for smaller requests and cannot serve the next full-size one, so the
allocator's segments grow by whole blocks; with ``expandable_segments:True`` free pages at the end of the one
segment are extended instead, and less is left over.

``RESERVE_PER_BLOCK`` comes from the simulator (``allocator.py``), not from a measurement: for every shape of the
sweep in ``bench/bench_allocator.py`` (Qwen2.5-7B LoRA and Qwen2.5-1.5B full, checkpointing on and off,
micro-batch 1-32, completions 512-16,384, traced on fake tensors), (simulated reserved peak - simulated allocated
peak) / that shape's fp32 logits block; the median over the sweep for each allocator setting. The bench prints
the ratios; re-derive after changing the simulator or the trace. ``max_split_size_mb`` and the options
``allocconf`` lists as not modelled are planned as the default allocator, and the verdict says so.
"""

from __future__ import annotations

import math

from ..allocconf import DEFAULT, AllocConf

GiB = 2**30

# NVML's device-used minus torch's reserved peak, the same 1.22 GiB on every one of the 34 rows of the shared H100
# grid (../shared/calibration/gpu-h100-2026-11-24/README.md: "NVML's device-used is reserved + 1.22 GiB"; one H100
# 80GB, torch 2.11 + CUDA 13.0): the CUDA context, cuBLAS handles and NVML's own view. Other cards and CUDA versions
# differ by a few hundred MiB (memory.CUDA_CONTEXT, 1.0 GiB, is the older figure from public notes).
DEVICE_CONTEXT = 1.22 * GiB

# Simulated reserve over the simulated allocated peak, in units of the largest transient block (median over the
# sweep of bench/bench_allocator.py, 19 shapes, 2026-11-24, re-derived after the trace ran attention as real
# tensors do (unpadded micro-batches): default 1.96 (range 0.56-2.55), expandable 0.21 (0.10-1.10); see the module
# docstring). One number per setting is the fast path's approximation: the trace and
# `grpo-guard trace` replay the real sequence.
RESERVE_PER_BLOCK = {'default': 1.96, 'expandable': 0.21}


def allocator_kind(conf: AllocConf | None) -> tuple[str, str]:
    """('default' | 'expandable', why) for an allocator setting (``allocconf.AllocConf``; None: torch's defaults)."""
    conf = conf or DEFAULT
    why = f'{conf.variable}={conf.text}' if conf.text else "torch's default caching allocator"
    extra = ([f'max_split_size_mb:{conf.max_split_size // 2**20}'] if conf.max_split_size else []) + conf.unmodelled
    if extra:
        why += f' ({", ".join(extra)} planned as the default allocator: not modelled)'
    return ('expandable' if conf.expandable_segments else 'default'), why


def largest_transient(cfg, arch, rows: int | None = None) -> float:
    """Bytes of the largest block a training step frees and asks for again: one micro-batch's logits (fp32, or 16-bit
    under DeepSpeed; Liger's fused loss never holds them: its chunk instead, as memory.trainer_terms counts it) over
    ``rows`` positions per sequence (``memory.trainer.logits_rows``; None: the completion)."""
    bs, V = cfg.per_device_train_batch_size, arch.vocab
    C = math.ceil((rows or cfg.max_completion_length) / max(1, cfg.sequence_parallel_size))
    if cfg.use_liger_kernel:
        return max(1, math.ceil(bs * C / math.ceil(V / arch.hidden))) * V * 4
    # under DeepSpeed the logits stay 16-bit (accelerate adds no fp32 copy: memory.trainer.logits)
    return bs * C * V * (2 if cfg.deepspeed else 4)


def segments_left_free(cfg, block: float, parts: dict) -> float:
    """Bytes of cached segments free at the allocated peak (the logits' backward) under the default allocator, from
    what the simulator (allocator.py) holds there when it replays a traced step (bench/bench_allocator.py; e.g.
    Qwen2.5-1.5B full 32 x 640: one 4.65 GiB segment and 0.5 GiB of small ones free beside four busy 9.3 GiB
    logits segments; Qwen2.5-7B LoRA 16 x 1,152: the same plus five 1.3 GiB recompute segments). A segment never
    merges with another, and a freed block serves a later request only if it is at least that large, so free at the
    peak are:

    - the 16-bit logits' own segment (half the fp32 block), freed by accelerate's upcast before any fp32 block is
      asked for, too small for one (accelerate convert_outputs_to_fp32; none under DeepSpeed, which keeps 16 bits);
    - two row-sized temporaries (block / micro-batch each) of TRL's row-by-row log-softmax and its backward
      (trl/trainer/utils.py ``selective_log_softmax``, the fp32 path's per-row logsumexp);
    - the forward's working set (one recomputed layer under checkpointing), less what the gradients and the
      optimizer states, allocated after that forward, put back into its segments;
    - whole logits blocks made again where the optimizer states of the first step settled in freed logits segments
      (the states beyond the room the 16-bit segment and the forward's segments leave).

    Nothing here is fitted: the terms are sizes the step already has; ``RESERVE_PER_BLOCK`` stays the ceiling."""
    upcast = 0.0 if cfg.deepspeed else block / 2
    row = block / max(1, cfg.per_device_train_batch_size)
    forward = max(0.0, parts['recompute'] - parts['after_forward'])
    displaced = math.ceil(max(0.0, parts['states'] - upcast - parts['recompute']) / block) * block if block else 0.0
    # at least: the fp32 path's per-row blocks of the forward that the 16-bit segment did not hold got segments of
    # their own (half the rows and one; Qwen2.5-0.5B full 32 x 1,152: 18 segments of one row), free at the peak
    # unless the gradients and states settled in them
    forward_rows = max(0.0, block - upcast + row - parts['after_forward']) if upcast else 0.0
    return max(upcast + 2 * row + forward + displaced, upcast + forward_rows)


def reserve_bytes(cfg, arch, conf: AllocConf | None, parts: dict | None = None, rows: int | None = None) -> float:
    """The allocator's reserve above the allocated peak, in bytes, for the launch's allocator setting: the sweep's
    ratio to the logits block (``RESERVE_PER_BLOCK``), and under the default allocator no more than the segments
    left free at the peak (``segments_left_free``; ``parts`` from ``memory.trainer.reserve_inputs``) when the
    fp32 logits are the block (not Liger's chunks)."""
    kind, _ = allocator_kind(conf)
    block = largest_transient(cfg, arch, rows)
    ceiling = RESERVE_PER_BLOCK[kind] * block
    if kind != 'default' or parts is None or cfg.use_liger_kernel:
        return ceiling
    return min(ceiling, segments_left_free(cfg, block, parts))


# The train step's own terms (memory.estimate's names): what the step allocates on top of the resident weights,
# gradients and optimizer state and frees again, with the allocator's reserve above them.
STEP_TERMS = (
    'activations',
    'logits',
    'adamw_foreach_temp',
    'tied_embedding_grad_temp',
    'overlap',
    'zero3_live_params',
    'vision_forward_temp',
    'allocator_reserve',
)
# The term of a later phase that holds the train step's cached blocks (memory.estimate).
CARRIED = 'train_cache'


def carried(train_terms: dict, new_bytes: float) -> float:
    """Bytes of the train step's cached blocks still reserved in a later phase that no ``torch.cuda.empty_cache()``
    precedes (``release_cached_blocks`` is the only call that hands a cached segment back; a freed block stays in
    its pool): the step's reserved bytes above its resident state (``STEP_TERMS``: everything it allocated and
    freed, with the allocator's reserve), less what the phase's own requests through the same allocator
    (``new_bytes``: the ZeRO-3 weights gathered for the sync) take from them. ``get_free_block`` serves a request
    from the best-fitting cached block first, and a gathered parameter (at most the embedding, vocabulary x hidden)
    is no larger than the step's largest freed block (a micro-batch's logits, micro-batch x completion x
    vocabulary) whenever micro-batch x completion >= hidden, so the phase grows the cache only by what the cache
    cannot hold. ``memory.trace.handover_replay`` replays the same handover block by block."""
    step = sum(v for k, v in train_terms.items() if k in STEP_TERMS)
    return max(0.0, step - new_bytes)


# Terms of a phase that torch's caching allocator never holds (memory.estimate's names): what the device adds to
# torch's reserved bytes (vLLM's weights, KV cache and CUDA-graph pool are torch allocations; its non-torch memory is
# not).
OUTSIDE_TORCH = ('cuda_context', 'nccl', 'vllm_non_torch')


def quantities(terms: dict, total: float, modelled: bool | None = None) -> dict:
    """The peak phase as the three figures a GPU reports (GiB): ``allocated`` (torch.cuda.max_memory_allocated,
    what `grpo-guard trace` counts), ``reserved`` (torch.cuda.max_memory_reserved, ms-swift's memory(GiB)) and
    ``device`` (nvidia-smi's used memory, what an OOM is measured against). ``modelled``: the caching allocator was
    modelled for the launch (``Inputs.alloc``; None: judged by the phase's terms), whatever phase peaks; its reserve
    and the train step's carried cache are reserved, not allocated. Without it the reserve is the 1.05 allowance
    inside the dynamic terms and allocated is not told apart (None)."""
    outside = sum(v for k, v in terms.items() if k in OUTSIDE_TORCH)
    reserved = total - outside
    if modelled is None:
        modelled = 'allocator_reserve' in terms
    cached = terms.get('allocator_reserve', 0.0) + terms.get(CARRIED, 0.0)
    return {
        'allocated_gib': round((reserved - cached) / GiB, 2) if modelled else None,
        'reserved_gib': round(reserved / GiB, 2),
        'device_gib': round(total / GiB, 2),
        'reserve_basis': 'caching-allocator reserve (reserve.py)'
        if modelled
        else 'a 1.05 allowance on activations and logits (memory.FRAGMENTATION)',
    }
