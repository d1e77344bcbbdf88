#!/usr/bin/env bash
# Qwen2.5-7B-Instruct, LoRA GRPO on 2 training nodes x 4x A100-80G + a rollout node (server mode, ms-swift 4.6). On every training node: NODE_RANK=<0|1> MASTER_ADDR=<node 0> ROLLOUT_HOST=<rollout node> bash <this .sh>; on the rollout node: ROLE=rollout bash <this .sh>
# Steps: prepare + filter the data, grpo-guard check, start `swift rollout`, swift rlhf.
# Environment: MODEL DATASET OUTPUT_DIR TRAIN_GPUS ROLLOUT_GPUS MASTER_PORT DRY_RUN=1 (see scripts/launch_lib.sh)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../../scripts/launch_lib.sh
source "$HERE/../../scripts/launch_lib.sh"
grpo_launch "${RECIPE:-$HERE/lora-2x4xa100-80g-multinode.yaml}" "$@"
