"""The memory model: per-GPU memory of a GRPO launch, phase by phase, and what decides it.

arch (config.json -> parameters, weight and KV bytes), gpus (capacities), inputs (Inputs, GPUMemory, constants),
trainer (the trainer's terms), vllm (one vLLM engine and its checks), estimate (pure: config, plan, inputs ->
GPUMemory per GPU), verdicts (memory -> findings), search (the largest length that fits; the smallest fix),
trace (the trainer step on fake tensors) and calibrate (scores on published measurements).
"""
