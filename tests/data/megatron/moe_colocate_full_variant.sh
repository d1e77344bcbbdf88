#!/bin/bash
# Our variant of the shape of ms-swift's examples/megatron/grpo/moe_colocate_full.sh (Qwen3-30B-A3B, 8 GPUs,
# TP 4 x PP 2, EP 4, colocated vLLM at TP 8), written for the guard's tests; not ms-swift's file.
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
NPROC_PER_NODE=8 \
PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
megatron rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen3-30B-A3B-Instruct-2507 \
    --tensor_model_parallel_size 4 \
    --expert_model_parallel_size 4 \
    --pipeline_model_parallel_size 2 \
    --global_batch_size 8 \
    --micro_batch_size 1 \
    --steps_per_generation 1 \
    --num_generations 8 \
    --reward_funcs accuracy format \
    --use_vllm true \
    --vllm_mode colocate \
    --vllm_gpu_memory_utilization 0.4 \
    --vllm_tensor_parallel_size 8 \
    --vllm_max_model_len 16384 \
    --max_length 8192 \
    --max_completion_length 8192 \
    --tuner_type full \
    --beta 0.00 \
    --sleep_level 2 \
    --offload_model true \
    --offload_optimizer true \
    --optimizer_cpu_offload true \
    --use_precision_aware_optimizer \
    --recompute_granularity selective \
    --sequence_parallel true \
    --padding_free true \
    --max_epochs 1
