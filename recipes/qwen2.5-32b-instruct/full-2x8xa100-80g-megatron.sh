#!/usr/bin/env bash
# Qwen2.5-32B-Instruct, full-parameter GRPO on 2 nodes x 8x A100-80G with Megatron-SWIFT (TP 8, DP 2), vLLM colocated (ms-swift 4.6). On every node: NODE_RANK=<0|1> MASTER_ADDR=<node 0> bash <this .sh>
# Steps: prepare + filter the data, grpo-guard check, megatron rlhf (the recipe's @command).
# Environment: MODEL DATASET OUTPUT_DIR NNODES NODE_RANK MASTER_ADDR MASTER_PORT DRY_RUN=1 (see scripts/launch_lib.sh)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/../../scripts/launch_lib.sh
source "$HERE/../../scripts/launch_lib.sh"
grpo_launch "${RECIPE:-$HERE/full-2x8xa100-80g-megatron.yaml}" "$@"
