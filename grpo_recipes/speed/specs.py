"""Peak dense bf16 tensor FLOP/s, HBM bandwidth and GPU-to-GPU link bandwidth per catalogue card (gpus.CATALOGUE
names), from the vendor's data sheets. Dense figures (NVIDIA quotes sparsity doubled: halved here).

The ratio peak / bandwidth is the decode batch at which a step turns compute-bound: ~153 on an A100-80G and ~295 on
an H100 SXM for bf16 weights, as issue 30 states."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPUSpec:
    bf16_tflops: float
    """Dense bf16 tensor-core peak, TFLOP/s."""
    hbm_gbps: float
    """Memory bandwidth, GB/s (1e9)."""
    link_gbps: float
    """GPU-to-GPU bandwidth one way, GB/s: NVLink (total bidirectional / 2), or PCIe Gen4 x16 (32 GB/s) / Gen5 x16
    (64 GB/s) for cards without NVLink."""
    source: str


_A100 = 'NVIDIA A100 Tensor Core GPU data sheet (nvidia.com, 2021): BF16 312 TFLOPS dense (624 sparse); NVLink 600 GB/s'
_H100 = (
    'NVIDIA H100 Tensor Core GPU data sheet (nvidia.com, 2023), H100 SXM: BF16 1,979 TFLOPS with sparsity (989.5 '
    'dense), 3.35 TB/s, NVLink 900 GB/s'
)
_A800 = 'A800 = A100 compute and memory, NVLink cut to 400 GB/s (NVIDIA A800 data sheet)'
SPECS: dict[str, GPUSpec] = {
    'A100-40G': GPUSpec(312, 1555, 300, _A100 + '; 40GB: 1,555 GB/s'),
    'A100-80G': GPUSpec(312, 2039, 300, _A100 + '; 80GB SXM: 2,039 GB/s'),
    'A800-40G': GPUSpec(312, 1555, 200, _A800),
    'A800-80G': GPUSpec(312, 2039, 200, _A800),
    'H100-80G': GPUSpec(989.5, 3350, 450, _H100),
    'H800-80G': GPUSpec(
        989.5, 3350, 200, 'H800 SXM: H100 compute and memory, NVLink 400 GB/s (NVIDIA H800 data sheet)'
    ),
    'H20': GPUSpec(148, 4000, 450, 'NVIDIA H20 product brief: BF16 148 TFLOPS dense, 4.0 TB/s, NVLink 900 GB/s'),
    'H200': GPUSpec(
        989.5,
        4800,
        450,
        'NVIDIA H200 data sheet (SXM): BF16 1,979 TFLOPS sparse (989.5 dense), 4.8 TB/s, NVLink 900 GB/s',
    ),
    'L40S': GPUSpec(
        362, 864, 32, 'NVIDIA L40S data sheet: BF16 362.05 TFLOPS dense (733 sparse), 864 GB/s, PCIe Gen4 x16'
    ),
    'A10': GPUSpec(125, 600, 32, 'NVIDIA A10 data sheet: BF16 125 TFLOPS dense (250 sparse), 600 GB/s, PCIe Gen4 x16'),
    'RTX3090': GPUSpec(
        71,
        936,
        32,
        'NVIDIA Ampere GA102 whitepaper: RTX 3090 FP16/BF16 tensor with FP32 accumulate 71 '
        'TFLOPS dense, 936 GB/s; PCIe Gen4 x16',
    ),
    'RTX4090': GPUSpec(
        165.2,
        1008,
        32,
        'NVIDIA Ada Lovelace whitepaper: RTX 4090 FP16/BF16 tensor with FP32 '
        'accumulate 165.2 TFLOPS dense, 1,008 GB/s; PCIe Gen4 x16',
    ),
    'A6000': GPUSpec(
        154.8,
        768,
        32,
        'NVIDIA RTX A6000 data sheet: BF16 tensor 154.8 TFLOPS dense (309.7 sparse), 768 GB/s; PCIe Gen4 x16',
    ),
    # Volta and Turing have no bf16 tensor cores: their 16-bit figure is fp16's (a bf16 launch fails before it runs)
    'V100-32G': GPUSpec(
        125, 900, 150, 'NVIDIA V100 data sheet (SXM2): 125 TFLOPS fp16 tensor, 900 GB/s, NVLink 300 GB/s'
    ),
    'V100-16G': GPUSpec(
        125, 900, 150, 'NVIDIA V100 data sheet (SXM2): 125 TFLOPS fp16 tensor, 900 GB/s, NVLink 300 GB/s'
    ),
    'T4': GPUSpec(
        65, 320, 16, 'NVIDIA T4 data sheet: 65 TFLOPS fp16 tensor (mixed precision), 320 GB/s, PCIe Gen3 x16'
    ),
    'L4': GPUSpec(
        121, 300, 32, 'NVIDIA L4 data sheet: BF16 242 TFLOPS with sparsity (121 dense), 300 GB/s, PCIe Gen4 x16'
    ),
}


def spec_for(card: str | None) -> GPUSpec | None:
    """The spec of a catalogue card name (``Hardware.capacity()``'s first value), None when not catalogued."""
    return SPECS.get(card or '')
