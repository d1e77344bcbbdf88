#!/usr/bin/env bash
# Qwen3-30B-A3B (MoE), LoRA GRPO on 8x A100-80G with Megatron-SWIFT expert parallelism (EP 8), vLLM colocated (ms-swift 4.6)
# Steps: prepare + filter the data, grpo-guard check, megatron rlhf (the recipe's @command).
# Environment: MODEL DATASET OUTPUT_DIR TRAIN_GPUS MASTER_PORT DRY_RUN=1 (see scripts/launch_lib.sh)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../../scripts/launch_lib.sh
source "$HERE/../../scripts/launch_lib.sh"
grpo_launch "${RECIPE:-$HERE/lora-8xa100-80g-megatron.yaml}" "$@"
