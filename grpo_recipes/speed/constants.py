"""The throughput model's constants, each with the published measurement or spec it comes from, and its band (the
optimistic and pessimistic values the low and high step times use). docs/throughput.md lists what was fitted to what.
None is tuned to our own H100 runs (bench/results/gpu-h100-2026-11-26.jsonl): those are the bench's check."""

from __future__ import annotations

# Share of HBM bandwidth a well-compiled decode step reaches: gpt-fast's README (meta-pytorch/gpt-fast, "Benchmarks run
# on an A100-80GB, power limited to 330W"): Llama-2-7B bf16 104.9 tok/s at 1,397.31 GB/s of the card's 2,039 GB/s =
# 0.685. vLLM's CUDA-graph decode is taken at the same share. Band 0.5-0.8: a judgement (paged attention and the
# sampler cost more than gpt-fast's static cache; a newer kernel stack may do better), not a measurement.
DECODE_BW_EFF = (0.685, 0.8, 0.5)  # (point, optimistic, pessimistic)

# Model FLOP utilisation of the compute-bound phases (training forward+backward, log-prob forwards, prefill): verl's
# docs/perf/dpsk.md reports MFU 0.40 / 0.37 / 0.31 for Qwen3-30B-A3B GRPO on 8 / 16 / 32 GPUs (peers-and-memory.md
# §B.4). Point 0.35, band 0.25-0.45 (the published spread widened by a third each way: HF/DeepSpeed trainers are not
# Megatron).
MFU = (0.35, 0.45, 0.25)

# HF generate (``use_vllm false``): the host's time to issue one decoder layer's kernels per generated token (Python,
# the dispatcher, the launches). The host runs ahead of the GPU, so an eager step lasts max(GPU time, host time)
# (model.py ``_decode_step``). The PyTorch blog "Accelerating Generative AI with PyTorch II: GPT, Fast" (2023-11-30)
# measures Llama-7B on an A100 at 25.5 tok/s in eager mode at batch 1, where the GPU's own time is 9.5 ms (gpt-fast's
# README: 104.9 tok/s compiled on the same card), so the eager step is the host's: 1/25.5 s / 32 layers = 1.23 ms
# per layer per step. (The previous pass took the difference, (1/25.5 - 1/104.9) / 32 = 0.93 ms, as an additive
# cost.) Band x2/3 to x1.5, the same judgement as every host-side cost here (HF_HOST_BAND): the GPU machine's CPU is
# neither gpt-fast's nor ours. It replaced x0.8-x2.5, which had been set with our two H100 rows in view; this one was
# also chosen after seeing them (docs/throughput.md).
HF_LAYER_OVERHEAD_S = 1 / 25.5 / 32
# An unmerged PEFT LoRA adds, per adapted linear, dropout + lora_A + lora_B + scaling + add (peft/tuners/lora/layer.py
# ``Linear.forward``): 5 kernels x 7 linears = 35 per layer, about as many as the base layer launches in eager mode (~35
# counted in gpt-fast's model.py): the per-layer overhead doubles. Measured with the real code in
# bench/bench_hf_generate_host.py (transformers 5.19 Qwen2 decoder layer, peft 0.20, r 16 on all 7 linears, this
# repository's 2-core CI host): 36 -> 64 non-view aten ops per layer per decode step (x1.78) and 0.25 -> 0.49 ms of host
# time per layer at batch 1 (x1.96).
PEFT_LORA_LAUNCH_FACTOR = 2.0

# HF generate's per-step cost outside the decoder layers (embedding, final norm, lm_head, the logits processors,
# sampling, the stopping criteria's bookkeeping, DynamicCache and mask updates): measured with the real transformers
# 5.19 loop on a tiny Qwen2 (bench/bench_hf_generate_host.py, batch 1, 2-core CI host; bench/results/
# hf-generate-host-2026-11-26.txt: 0.61 and 0.41 ms in two runs): 0.61 ms of host time per step,
# 50 non-view aten ops (67 with left padding). Band HF_HOST_BAND (a judgement: the GPU host's CPU is not this one).
HF_STEP_FIXED_S = 0.61e-3
# ms-swift's StopWordsCriteria (swift/template/utils.py, ms-swift 4.6), called every decode step, loops over the
# sequences in Python: ``if self.is_done[i]`` (an .item(): a device-to-host copy and sync) and ``self.is_done[i] =
# is_finished`` (a host-to-device copy), after one batch_decode of the last 20 tokens. Host time measured with the
# real class and the Qwen2.5 tokenizer (bench/bench_hf_generate_host.py; 7.8 and 8.3 us in two runs): 7.8 us per
# sequence per step; the two copies at 5-7 us each (cudaMemcpyAsync's per-call latency, Wu et al., "DualPath", arXiv
# 2602.21548, section 5.2): 6 us taken. 7.8 + 2 x 6 = 20 us per sequence per step.
HF_STOPWORDS_PER_SEQ_S = 7.8e-6 + 2 * 6e-6
HF_HOST_BAND = (2 / 3, 1.5)
HF_OVERHEAD_BAND = HF_HOST_BAND

# vLLM's host work between two decode steps (scheduling, preparing the next step's inputs, the sampled tokens' copy to
# the host and their processing), during which the GPU idles: vllm-project/vllm#6854 (RFC "Multi-Step
# Scheduling", 2024-07-26): "5-13ms of GPU bubble" per decode step, and in its profile "about 4ms of GPU bubble" per
# decode. Point 4 ms (the profiled figure); band 2-8 ms (a judgement: V1's engine overlaps part of it, the RFC's range
# reaches 13). Added to every vLLM decode step; it dominates a small model's step, not a large one's.
VLLM_STEP_HOST_S = (4e-3, 2e-3, 8e-3)  # (point, optimistic, pessimistic)

# vLLM with enforce_eager (no CUDA graphs): verl docs/README_vllm0.7.md, rollout 85 s eager vs 62 s with CUDA graphs
# (run_qwen2-7b_seq_balance.sh, vLLM 0.7): x1.37 on the decode.
EAGER_FACTOR = 85 / 62

# One tensor-parallel all-reduce of a decode step's activations: vLLM's custom all-reduce on H100, 0.009-0.045 ms for
# 0.5 KB-1 MB at TP 2-8 (sgl-project/sglang PR #2904, table "vllm"). 0.02 ms, two per layer (attention and MLP outputs).
TP_ALLREDUCE_S = 2e-5

# vLLM sleep + wake per rollout on a colocated engine, seconds, as a + b x (GiB of vLLM weights on the GPU):
# vllm-project/vllm PR #48337 (A100, LoRA): Qwen3-0.6B level 1 1.44 s, level 2 1.92 s; Qwen3-8B level 1 12.76 s,
# level 2 6.84 s.
# The line through the two points per level (1.2 GB = 1.118 GiB and 16.4 GB = 15.27 GiB of bf16 weights): fitted to
# those two points only (level 1: b = 11.32 / 14.16 s per GiB; level 2: b = 4.92 / 14.16).
SLEEP_WAKE = {1: (0.546, 0.800), 2: (1.531, 0.348)}
SLEEP_BAND = (0.7, 1.5)  # judgement: two points on one card

# A rollout server fed one tensor at a time (TRL's ``VLLMClient.update_named_param``, trl/generation/vllm_client.py @
# 0.29.1: one HTTP POST, one collective_rpc on the server and one NCCL broadcast + barrier per parameter tensor): the
# fixed cost per tensor. huggingface/trl PR #5249 (batching these calls): "For Qwen2 0.5B, this cuts the weight sync
# from 0.6sec to 0.15sec"; Qwen2-0.5B has 290 tensors (24 layers x 12 + embeddings + final norm), 1 GB of bf16 weights
# (2 ms of it the transfer at NVLink speed): (0.6 - 0.002) / 290 = 2.1 ms per tensor. Band 1-4 ms: a judgement (one
# measurement, its card and host not stated). ms-swift sends flattened buckets (Framework.weight_sync 'batched').
SERVER_SYNC_PER_TENSOR_S = 2.06e-3
SERVER_SYNC_BAND = (0.5, 2.0)

# Across nodes: 400 Gb/s per GPU (NVIDIA DGX H100 data sheet: 8x ConnectX-7 400 Gb/s), 50 GB/s.
INTERNODE_GBPS = 50.0

# Optimizer step: AdamW reads and writes parameters, gradients and two moments (fp32 master weights under DeepSpeed):
# ~32 bytes moved per trainable parameter (counted: read p, g, m, v and write p, m, v at 4 bytes, plus the 16-bit copy),
# at DECODE_BW_EFF of HBM bandwidth. PCIe Gen4 x16 (32 GB/s, the PCI-SIG spec) for offloaded optimizer states.
ADAM_BYTES_PER_PARAM = 32
PCIE_GBPS = 32.0

# Completion lengths when the launch does not say (--completion-mean): a reasoning model
# (memory.verdicts.reasoning_model,
# ms-swift's thinking templates) runs to the cap (issue 30); others average half the cap. A stated default, not a
# measurement; the output says which one applied.
DEFAULT_COMPLETION_SHARE = 0.5
# Prompt tokens when neither --data-stats nor a shorter max_length says: 256 (a stated default; GSM8K-style prompts
# with a chat template are 100-250 tokens in the sample data's `grpo-data stats`).
DEFAULT_PROMPT = 256
