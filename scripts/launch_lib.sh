#!/usr/bin/env bash
# Shared steps of the recipe launchers (recipes/<model>/<variant>.sh). A launcher sources this file
# and calls:  grpo_launch RECIPE.yaml [extra swift rlhf args...]
#
# Steps, in order:
#   1. data     grpo-data prepare-gsm8k (GSM8K question/answer -> messages + solution), then
#               grpo-data filter to the recipe's max_length with the model's tokenizer; the same for the
#               held-out eval set when the recipe has a val_dataset (passed as --val_dataset)
#   2. guard    grpo-guard check on the recipe's hardware; stops here on any error
#   3. rollout  server-mode recipes: `swift rollout` on ROLLOUT_GPUS, health-checked; a trap stops it
#               on every exit (success, failure, Ctrl-C)
#   4. train    swift rlhf RECIPE --model --dataset [--val_dataset] --output_dir [extra args]; a recipe whose
#               header says `# @command: megatron rlhf` runs with that command instead (Megatron-SWIFT)
#
# Environment (all optional):
#   MODEL          model id or local dir (default: the recipe's `model`)
#   DATASET        what `swift rlhf --dataset` takes: a local file, a hub id, id:subset, path#N (default: the
#                  full GSM8K train split, modelscope/gsm8k:main, or openai/gsm8k:main with USE_HF=1)
#   VAL_DATASET    held-out eval data for recipes with a val_dataset (default: the bundled 200-row sample of the
#                  GSM8K test split, data_tools/sample/gsm8k_test_200.jsonl)
#   PREPARE        gsm8k (default) or none (DATASET is already ms-swift GRPO data with a `solution`)
#   TOKENIZER      tokenizer for the length filter (default: MODEL, a local dir or a hub id in the local
#                  cache, so lengths are measured with the model's own chat template)
#   DEMO=1         the bundled 300-row GSM8K sample and the bundled Qwen2.5 tokenizer (offline demo, not a
#                  training run: about 37 optimizer steps)
#   OUTPUT_DIR     run directory (default: output/<model>/<variant>)
#   TRAIN_GPUS     training GPU ids, e.g. 0,2,3 (sets CUDA_VISIBLE_DEVICES and NPROC_PER_NODE)
#   ROLLOUT_GPUS   server mode: GPU ids of `swift rollout` (default: the recipe's @rollout_gpus)
#   ROLLOUT_HOST   server mode: host of the rollout server (default: the recipe's vllm_server_host)
#   ROLE           all (default) | rollout: only run `swift rollout` (on a dedicated rollout node)
#   GPUS, GPU_TYPE hardware the guard plans for (default: the recipe header)
#   HEALTH_TIMEOUT seconds to wait for the rollout server's /health/ (default 900)
#   MASTER_PORT NNODES NODE_RANK MASTER_ADDR   as ms-swift uses them (torchrun)
#   SWIFT          the swift executable (default: swift)
#   DRY_RUN=1      print every command, run nothing

_grpo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROLLOUT_PID=""
TRAIN_PID=""

# Use the project's .venv (made by `make`) when its commands are not on PATH yet.
if ! command -v grpo-recipes >/dev/null 2>&1 && [[ -x "$_grpo_root/.venv/bin/grpo-recipes" ]]; then
  PATH="$_grpo_root/.venv/bin:$PATH"
  export PATH
fi
if ! command -v grpo-recipes >/dev/null 2>&1; then
  printf '[grpo-recipes] error: grpo-recipes is not installed here; run "make demo" (creates .venv) or\n' >&2
  printf '  pip install -e %s, then activate that environment\n' "$_grpo_root" >&2
  exit 1
fi

grpo_log() { printf '[grpo-recipes] %s\n' "$*" >&2; }
grpo_die() { grpo_log "error: $*"; exit 1; }

# Print a command, each word quoted only when the shell needs it.
grpo_print() {
  local word out="+"
  for word in "$@"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
      out+=" $word"
    else
      out+=" $(printf '%q' "$word")"
    fi
  done
  printf '%s\n' "$out" >&2
}

# Print a command; run it unless DRY_RUN=1.
grpo_run() {
  grpo_print "$@"
  if [[ "${DRY_RUN:-0}" == "1" ]]; then
    return 0
  fi
  "$@"
}

# Stop the rollout server and the trainer (if running), whole process groups, TERM then KILL.
grpo_cleanup() {
  local pid
  for pid in "$TRAIN_PID" "$ROLLOUT_PID"; do
    [[ -n "$pid" ]] || continue
    if kill -0 "$pid" 2>/dev/null; then
      grpo_log "stopping process group $pid"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      local waited=0
      while kill -0 "$pid" 2>/dev/null && (( waited < 30 )); do
        sleep 1
        waited=$((waited + 1))
      done
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  TRAIN_PID=""
  ROLLOUT_PID=""
}

grpo_on_signal() {
  grpo_log "interrupted"
  grpo_cleanup
  exit 130
}

# Wait until GET URL answers, the server process dies, or the timeout passes.
grpo_wait_health() {
  local url="$1" pid="$2" timeout="$3" log="$4" start
  start=$(date +%s)
  while true; do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$url" 2>/dev/null; then
      grpo_log "rollout server healthy at $url"
      return 0
    fi
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      grpo_log "rollout server exited before it became healthy; last lines of $log:"
      tail -n 20 "$log" >&2 || true
      return 1
    fi
    if (( $(date +%s) - start >= timeout )); then
      grpo_log "rollout server not healthy at $url after ${timeout}s (HEALTH_TIMEOUT); last lines of $log:"
      tail -n 20 "$log" >&2 || true
      return 1
    fi
    sleep 1
  done
}

grpo_launch() {
  local recipe="$1"
  shift
  [[ -f "$recipe" ]] || grpo_die "recipe $recipe not found"
  local swift="${SWIFT:-swift}"
  local name variant model_dir
  variant="$(basename "$recipe" .yaml)"
  model_dir="$(basename "$(dirname "$recipe")")"
  name="$model_dir/$variant"

  # every recipe value in one call (one Python start-up instead of ten), one per line in this order
  local values
  values="$(grpo-recipes arg "$recipe" model max_length vllm_mode use_vllm @gpus @gpu_type @rollout_gpus \
    vllm_server_host vllm_server_port ENV.NNODES val_dataset @command)" || grpo_die "cannot read $recipe (see the error above)"
  local -a v
  mapfile -t v <<< "$values"
  # the command that runs the recipe: `swift rlhf`, or the recipe's own (`# @command: megatron rlhf`)
  local -a train_cmd=("$swift" rlhf) guard_target=("$recipe")
  if [[ -n "${v[11]:-}" ]]; then
    read -r -a train_cmd <<< "${v[11]}"
    guard_target=(-- "${train_cmd[@]}" "$recipe")
  fi
  local model="${MODEL:-${v[0]:-}}"
  local dataset="${DATASET:-}"
  if [[ -z "$dataset" && "${DEMO:-0}" == "1" ]]; then
    dataset="$_grpo_root/data_tools/sample/gsm8k_train_300.jsonl"
  elif [[ -z "$dataset" && "${USE_HF:-0}" =~ ^(1|true|True)$ ]]; then
    dataset="openai/gsm8k:main"
  elif [[ -z "$dataset" ]]; then
    dataset="modelscope/gsm8k:main"
  fi
  local output_dir="${OUTPUT_DIR:-output/$name}"
  local max_length="${v[1]:-}" mode="${v[2]:-}"
  [[ "${v[3]:-}" == "true" ]] || mode=""
  local gpus="${GPUS:-${v[4]:-}}" gpu_type="${GPU_TYPE:-${v[5]:-}}" rollout_gpus="${ROLLOUT_GPUS:-${v[6]:-}}"
  local host="${ROLLOUT_HOST:-${v[7]:-}}" port="${v[8]:-}"
  host="${host%% *}"
  port="${port%% *}"

  if [[ -n "${TRAIN_GPUS:-}" ]]; then
    local -a ids
    IFS=',' read -r -a ids <<< "$TRAIN_GPUS"
    export CUDA_VISIBLE_DEVICES="$TRAIN_GPUS" NPROC_PER_NODE="${#ids[@]}"
  fi
  local nnodes="${NNODES:-${v[9]:-}}"
  if [[ -n "$nnodes" && "$nnodes" -gt 1 && "${ROLE:-all}" != "rollout" ]]; then
    [[ -n "${NODE_RANK:-}" && -n "${MASTER_ADDR:-}" ]] ||
      grpo_die "$name is a ${nnodes}-node recipe: export NODE_RANK (0..$((nnodes - 1))) and MASTER_ADDR (node 0's address) on every node"
  fi

  local -a rollout_cmd=()
  if [[ "$mode" == "server" ]]; then
    local -a rargs
    local rollout_args
    rollout_args="$(grpo-recipes rollout-args "$recipe")" || grpo_die "cannot build the swift rollout arguments of $recipe"
    mapfile -t rargs <<< "$rollout_args"
    rollout_cmd=("$swift" rollout --model "$model" "${rargs[@]}")
  fi
  # ms-swift downloads a model that is neither local nor cached: offline, say so in one line before anything
  # starts (not for DRY_RUN, nor for another SWIFT executable, which may not download at all)
  if [[ "${DRY_RUN:-0}" != "1" && -z "${SWIFT:-}" ]]; then
    grpo-recipes model-check "$model" || exit 1  # its one line says why
  fi
  if [[ "${ROLE:-all}" == "rollout" ]]; then
    [[ "$mode" == "server" ]] || grpo_die "ROLE=rollout needs a server-mode recipe; $name is ${mode:-not using vLLM}"
    grpo_run env "CUDA_VISIBLE_DEVICES=$rollout_gpus" "${rollout_cmd[@]}"
    return
  fi

  # 1. data
  local data_dir="$output_dir/data" train_file
  local tokenizer="${TOKENIZER:-}"
  local -a tok_args=()
  if [[ -z "$tokenizer" && "${DEMO:-0}" == "1" ]]; then
    grpo_log "DEMO=1: the bundled 300-row GSM8K sample, lengths measured with the bundled Qwen2.5 tokenizer and" \
      "chat template (a demo, not a training run; unset DEMO for the full dataset and the model's own template)"
  else
    tok_args=(--tokenizer "${tokenizer:-$model}")
  fi
  [[ "${DRY_RUN:-0}" == "1" ]] || mkdir -p "$data_dir"
  local fix="offline or not cached? set DATASET=/path/to/train.jsonl and TOKENIZER=/path/to/model (or DEMO=1 for the bundled sample)"
  local prepared="$dataset"
  if [[ "${PREPARE:-gsm8k}" == "gsm8k" ]]; then
    prepared="$data_dir/prepared.jsonl"
    grpo_run grpo-data prepare-gsm8k "$dataset" -o "$prepared" || grpo_die "reading $dataset failed (above); $fix"
  fi
  train_file="$data_dir/train.jsonl"
  grpo_run grpo-data filter "$prepared" -o "$train_file" --max-length "$max_length" --quiet "${tok_args[@]}" ||
    grpo_die "the length filter failed (above); $fix"
  local -a swift_args=(--model "$model" --dataset "$train_file" --output_dir "$output_dir")
  # held-out eval (the recipe's val_dataset): GSM8K test rows, prepared and filtered like the train rows
  local val="${VAL_DATASET:-$_grpo_root/data_tools/sample/gsm8k_test_200.jsonl}"
  if [[ -n "${v[10]:-}" ]]; then
    local val_prepared="$val" val_file="$data_dir/val.jsonl"
    if [[ "${PREPARE:-gsm8k}" == "gsm8k" ]]; then
      val_prepared="$data_dir/val.prepared.jsonl"
      grpo_run grpo-data prepare-gsm8k "$val" -o "$val_prepared" || grpo_die "reading $val failed (above); $fix"
    fi
    grpo_run grpo-data filter "$val_prepared" -o "$val_file" --max-length "$max_length" --quiet "${tok_args[@]}" ||
      grpo_die "the length filter of the eval set failed (above); $fix"
    swift_args+=(--val_dataset "$val_file")
  fi

  # 2. guard
  if [[ "$mode" == "server" && -n "${ROLLOUT_HOST:-}" ]]; then
    swift_args+=(--vllm_server_host "$host")
  fi
  local -a hw=(--gpus "$gpus" --gpu-type "$gpu_type")
  if [[ "$mode" == "server" ]]; then
    # the guard reads the rollout command the launcher runs (never executes it): its GPUs, TP x DP, KV
    local rollout_line
    if [[ -n "$rollout_gpus" && ( -z "$nnodes" || "$nnodes" -le 1 ) ]]; then
      rollout_line="$(printf '%q ' "CUDA_VISIBLE_DEVICES=$rollout_gpus" "${rollout_cmd[@]}")"
    else
      rollout_line="$(printf '%q ' "${rollout_cmd[@]}")"  # on another node: its GPUs are not visible here
    fi
    hw+=(--rollout "$rollout_line")
  fi
  local -a guard_cmd=(grpo-guard check "$recipe" "${hw[@]}" -- "${swift_args[@]}" "$@")
  if [[ "${guard_target[0]}" == "--" ]]; then  # the recipe's own command, then its arguments
    guard_cmd=(grpo-guard check "${hw[@]}" "${guard_target[@]}" "${swift_args[@]}" "$@")
  fi
  grpo_run "${guard_cmd[@]}" ||
    grpo_die "grpo-guard refused the launch (fix the errors above, or run swift rlhf by hand)"

  trap grpo_cleanup EXIT
  trap grpo_on_signal INT TERM

  # 3. rollout server (server mode, when it runs on this machine)
  if [[ "$mode" == "server" && ( "$host" == "127.0.0.1" || "$host" == "localhost" ) ]]; then
    local log="$output_dir/rollout.log"
    if [[ "${DRY_RUN:-0}" == "1" ]]; then
      grpo_run env "CUDA_VISIBLE_DEVICES=$rollout_gpus" "${rollout_cmd[@]}"
    else
      grpo_print env "CUDA_VISIBLE_DEVICES=$rollout_gpus" "${rollout_cmd[@]}" ">$log" "&"
      setsid env "CUDA_VISIBLE_DEVICES=$rollout_gpus" "${rollout_cmd[@]}" > "$log" 2>&1 &
      ROLLOUT_PID=$!
      grpo_wait_health "http://$host:$port/health/" "$ROLLOUT_PID" "${HEALTH_TIMEOUT:-900}" "$log" ||
        grpo_die "the rollout server did not come up"
    fi
  elif [[ "$mode" == "server" ]]; then
    grpo_log "rollout server expected at $host:$port (start it there with ROLE=rollout)"
    if [[ "${DRY_RUN:-0}" != "1" ]]; then
      grpo_wait_health "http://$host:$port/health/" "" "${HEALTH_TIMEOUT:-900}" /dev/null ||
        grpo_die "no rollout server at $host:$port"
    fi
  fi

  # 4. train
  if [[ "${DRY_RUN:-0}" == "1" ]]; then
    grpo_run "${train_cmd[@]}" "$recipe" "${swift_args[@]}" "$@"
    return
  fi
  grpo_print "${train_cmd[@]}" "$recipe" "${swift_args[@]}" "$@"
  setsid "${train_cmd[@]}" "$recipe" "${swift_args[@]}" "$@" &
  TRAIN_PID=$!
  local rc=0
  wait "$TRAIN_PID" || rc=$?
  TRAIN_PID=""
  return "$rc"
}
