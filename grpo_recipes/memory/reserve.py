"""The caching allocator's reserve for the analytic fast path, and what the device then holds.

What runs out on a GPU is what torch *reserves* (cached segments, ``torch.cuda.max_memory_reserved``, ms-swift's
``memory(GiB)``) plus what the allocator never sees (the CUDA context). The analytic model counts allocated bytes
(``memory.trainer_terms(fragmentation=1.0)`` is what ``grpo-guard trace`` counts); this module adds the reserve:

    reserved = allocated + RESERVE_PER_BLOCK[allocator] x the largest transient block
               (default allocator: at most the segments left free at the peak, ``segments_left_free``)
    device   = reserved + DEVICE_CONTEXT (+ NCCL buffers where the launch has a communicator), as nvidia-smi shows it

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

# What the device holds beyond torch's reserved bytes, on the basis of the card's capacity (CUDA's total memory,
# ``gpus.CARDS``: 79.18 GiB on an H100 80GB) and of nvidia-smi's memory.used: the training process's CUDA context,
# its loaded kernels and cuBLAS handles. Measured on real ``swift rlhf`` processes (ms-swift 4.6, torch 2.11 + CUDA
# 13.0): 0.80 and 0.83 GiB on the two H100 runs of ../shared/calibration/gpu-h100-2026-11-24/swift_runs.jsonl
# (nvidia-smi), 0.85 and 0.80 on the bench_swift_gpu runs whose device figure counts that process alone
# (bench/results/, H100 and H200, NVML v1 less the driver's reserve). The earlier 1.22 GiB (the shared harness grid,
# reserved + 1.22 on all 34 rows) was read as NVML's v1 ``used``, which also counts the driver's reserved memory that
# CUDA's total leaves out: on the same card and driver (580.159.04, 2026-11-27) v1 ``used`` is 480 MiB at idle, as are
# NVML v2's ``reserved`` and nvidia-smi's memory.reserved, and the grid's first row saw 0.472 GiB before it began, so
# the grid's process held 0.75 GiB (a forward, backward, fused AdamW and generate of a small Qwen2 model on that H100:
# 767-771 MiB, 2026-11-27). Other cards and CUDA versions differ by a few hundred MiB (memory.CUDA_CONTEXT, 1.0 GiB,
# is the older figure from public notes).
DEVICE_CONTEXT = 0.8 * GiB

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

    Where the step runs a no-grad log-probabilities forward before the training forward (``parts['no_grad_pass']``:
    ms-swift 4.6's old-policy pass, every step; the reference's at beta != 0), that pass makes the 16-bit, fp32 and
    per-row segments first, and the optimizer states that the first step creates settle in the smallest free
    segments that hold them (best fit): the 16-bit segment, the row-sized ones and the forward's. At the next step's
    peak that room is free less the states, and states beyond it displace whole logits blocks; the forward's per-row
    blocks below are not left free (``bench/bench_reserve_sweep.py``: 15 shapes simulated as ms-swift 4.6 runs them,
    mean |closed form - simulated| 1.98 GiB with this term against 2.79 without it; the largest errors +4.7 / -4.0
    GiB against +9.2 / -2.2).

    Nothing here is fitted: the terms are sizes the step already has; ``RESERVE_PER_BLOCK`` stays the ceiling."""
    upcast = 0.0 if cfg.deepspeed else block / 2
    row = block / max(1, cfg.per_device_train_batch_size)
    forward = max(0.0, parts['recompute'] - parts['after_forward'])
    room = states_room(cfg, block, parts)
    displaced = math.ceil(max(0.0, parts['states'] - room) / block) * block if block else 0.0
    if parts.get('no_grad_pass'):
        return max(0.0, room - parts['states']) + displaced
    # at least: the fp32 path's per-row blocks of the forward that the 16-bit segment did not hold got segments of
    # their own (half the rows and one; Qwen2.5-0.5B full 32 x 1,152: 18 segments of one row), free at the peak
    # unless the gradients and states settled in them
    forward_rows = max(0.0, block - upcast + row - parts['after_forward']) if upcast else 0.0
    return max(upcast + 2 * row + forward + displaced, upcast + forward_rows)


def states_room(cfg, block: float, parts: dict) -> float:
    """The room of free segments the first step's optimizer states settle in before they displace a logits block
    (``segments_left_free``'s terms)."""
    upcast = 0.0 if cfg.deepspeed else block / 2
    if parts.get('no_grad_pass'):
        row = block / max(1, cfg.per_device_train_batch_size)
        return upcast + 2 * row + max(0.0, parts['recompute'] - parts['after_forward'])
    return upcast + parts['recompute']


def on_the_edge(cfg, block: float, parts: dict) -> bool:
    """Whether the optimizer states and their room (``states_room``) differ by less than one row-sized temporary
    (block / micro-batch): then where each tensor lands decides whether one more logits block is made, which no
    sum of sizes can tell (Qwen2.5-1.5B full 32 x 566 on the H200, 2026-11-27: states 5.75 GiB, room 5.77, and the
    run and the simulator made the block)."""
    if not block or not parts['states']:
        return False
    return abs(parts['states'] - states_room(cfg, block, parts)) < block / max(1, cfg.per_device_train_batch_size)


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
