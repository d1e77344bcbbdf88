#!/usr/bin/env bash
# Qwen2.5-32B-Instruct-GPTQ-Int4, LoRA GRPO on 4x A100-40G: 2 training GPUs + 2 rollout GPUs (server, DP 2)
# Steps: prepare + filter the data, grpo-guard check, start `swift rollout`, swift rlhf.
# Environment: MODEL DATASET OUTPUT_DIR TRAIN_GPUS ROLLOUT_GPUS MASTER_PORT DRY_RUN=1 (see scripts/launch_lib.sh)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../../scripts/launch_lib.sh
source "$HERE/../../scripts/launch_lib.sh"
grpo_launch "${RECIPE:-$HERE/lora-4xa100-40g.yaml}" "$@"
