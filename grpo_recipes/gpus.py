"""GPU capacities as ``torch.cuda.get_device_properties(i).total_memory`` reports them, in GiB.

Sources: values marked (cal) are the capacities stated in ../shared/calibration/memory_cases.jsonl
(from CUDA OOM messages or vLLM logs of those cards); the others are the nominal memory minus the
usual ECC/reserved share as seen in public PyTorch OOM messages ("GPU 0 has a total capacity of
X GiB") for that card. ``--gpu-mem`` overrides any of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    """One catalogue card: what the memory model, the sampler buffer and the dtype rule read of it."""

    capacity_gib: float
    """``torch.cuda.get_device_properties(i).total_memory`` in GiB (the module's sources; ``source`` below)."""
    nominal_gb: int
    """Memory as sold, in GB, to match a source that names only a class ("24GB GPUs")."""
    sms: int
    """Streaming multiprocessors (NVIDIA's architecture whitepapers and datasheets). vLLM's Triton top-k/top-p kernel
    runs one program per SM and keeps a vocabulary row for each (memory.vllm_profile_peak)."""
    compute_capability: tuple[int, int]
    """NVIDIA's "CUDA GPUs" table (developer.nvidia.com/cuda-gpus): bf16 kernels need 8.0 (vLLM refuses bfloat16
    below it at engine start: vllm/v1/worker/gpu_worker.py ``_check_if_gpu_supports_dtype``)."""
    source: str
    """Where ``capacity_gib`` comes from."""


# capacity GiB, nominal GB, SMs (A100 and A800 108, H100/H800/H200 SXM 132, H20 78, L40S 142, A10 72, RTX 3090 82,
# RTX 4090 128, RTX A6000 84, V100 80, T4 40, L4 58), compute capability, capacity's source
CARDS: dict[str, Card] = {
    'A100-40G': Card(39.39, 40, 108, (8, 0), 'torch OOM messages; A100 40GB (cal: verl case 39.39)'),
    'A100-80G': Card(79.15, 80, 108, (8, 0), 'torch OOM messages; A100 80GB (cal: vLLM log 79.15)'),
    'A800-40G': Card(39.56, 40, 108, (8, 0), 'cal: ms-swift #3848 OOM message'),
    'A800-80G': Card(79.15, 80, 108, (8, 0), 'same die and memory as A100 80GB'),
    'H100-80G': Card(79.18, 80, 132, (9, 0), 'cal: llm-d vLLM logs 79.18'),
    'H800-80G': Card(79.18, 80, 132, (9, 0), 'same memory as H100 80GB'),
    'H20': Card(95.0, 96, 78, (9, 0), 'cal: trl #2972 (H20 96GB)'),
    'H200': Card(
        139.81,
        141,
        132,
        (9, 0),
        'torch OOM message "GPU 0 has a total capacity of 139.81 GiB" on 8x "NVIDIA H200", '
        'https://github.com/sungwon-chae/arxiv_confi/blob/HEAD/etu_logging.md (H200 141GB)',
    ),
    'L40S': Card(44.39, 48, 142, (8, 9), 'torch OOM messages for L40S 48GB'),
    'A10': Card(22.07, 24, 72, (8, 6), 'torch OOM messages for A10 24GB'),
    'RTX3090': Card(23.58, 24, 82, (8, 6), 'cal: ms-swift README case (3090)'),
    'RTX4090': Card(23.64, 24, 128, (8, 9), 'cal: vLLM #13061 (4090)'),
    'A6000': Card(
        47.54,
        48,
        84,
        (8, 6),
        'torch OOM message "47.54 GiB total capacity", google-research/semivl#18 (RTX A6000 48GB)',
    ),
    'V100-32G': Card(
        31.74,
        32,
        80,
        (7, 0),
        'torch OOM messages "GPU 0 has a total capacity of 31.74 GiB" on a "Tesla V100-SXM2-32GB" (a public '
        'KernelBench evaluation log)',
    ),
    'V100-16G': Card(
        15.78,
        16,
        80,
        (7, 0),
        "torch's _CudaDeviceProperties(name='Tesla V100-SXM2-16GB', ..., total_memory=16160MB) (MiB: 15.78 GiB), "
        "YOLOv5's profile() output as quoted in its public docs",
    ),
    'T4': Card(
        14.74,
        16,
        40,
        (7, 5),
        'huggingface/trl examples/notebooks/grpo_trl_lora_qlora.ipynb: "GPU = Tesla T4. Max memory = 14.741 GB" '
        '(torch total_memory / 1024**3)',
    ),
    'L4': Card(
        22.03,
        24,
        58,
        (8, 9),
        'torch OOM message "GPU 0 has a total capacity of 22.03 GiB" on a single NVIDIA L4 (24 GB)',
    ),
}

# Views of CARDS by field, for the readers that want one figure per card.
CATALOGUE: dict[str, tuple[float, str]] = {k: (c.capacity_gib, c.source) for k, c in CARDS.items()}
NOMINAL_GB = {k: c.nominal_gb for k, c in CARDS.items()}
SMS = {k: c.sms for k, c in CARDS.items()}
COMPUTE_CAPABILITY = {k: c.compute_capability for k, c in CARDS.items()}


def _norm(name: str) -> str:
    s = name.upper().replace('NVIDIA', '').replace('GEFORCE', '').replace(' ', '').replace('_', '-')
    s = s.replace('80GB', '80G').replace('40GB', '40G')
    return s.strip('-')


def sm_count(name: str | None) -> int | None:
    """The SM count of the catalogue card ``name`` names (one card only), else None."""
    cards = candidates(name)
    counts = {SMS[k] for k, _ in cards}
    return counts.pop() if len(counts) == 1 else None


def _family(card: str) -> str:
    """A catalogue name without its size and vendor prefix: A100-40G -> A100, RTX3090 -> 3090."""
    return card.split('-')[0].removeprefix('RTX')


def candidates(name: str | None) -> list[tuple[str, float]]:
    """Every catalogue card a loosely stated GPU could be, for sources that leave the size or the model
    out: "A100" without a size is the 40 GB or the 80 GB card; "24GB GPUs" is any 24 GB card. A name
    with a size, or a single match, gives one card; an unknown name gives none."""
    if not name:
        return []
    key = _norm(name)
    family = re.search(r'(A100|A800|H100|H800|H200|H20|L40S?|A6000|A10|3090|4090|V100|T4|L4)', key)
    size = re.search(r'(\d{2,3})\s*G', key)
    if family:
        fam = 'L40S' if family.group(1) == 'L40' else family.group(1)
        cards = [k for k in CATALOGUE if _family(k) == fam]
        if size:
            cards = [k for k in cards if NOMINAL_GB[k] == int(size.group(1))] or cards
        return [(k, CATALOGUE[k][0]) for k in cards]
    if size:
        return [(k, CATALOGUE[k][0]) for k in CATALOGUE if NOMINAL_GB[k] == int(size.group(1))]
    return []
