#!/usr/bin/env bash
# DeepSeek-R1-Distill-Qwen-32B, bnb 4-bit QLoRA GRPO on 4x A100-80G, vLLM colocated (ms-swift 4.6)
# Steps: prepare + filter the data, grpo-guard check, swift rlhf.
# Environment: MODEL DATASET OUTPUT_DIR TRAIN_GPUS ROLLOUT_GPUS MASTER_PORT DRY_RUN=1 (see scripts/launch_lib.sh)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../../scripts/launch_lib.sh
source "$HERE/../../scripts/launch_lib.sh"
grpo_launch "${RECIPE:-$HERE/qlora-4xa100-80g.yaml}" "$@"
