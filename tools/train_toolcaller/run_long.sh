#!/bin/bash
# Run 12: run 10's weights (run_gpu.sh) continued on the CPU with long contexts. Run 10 never saw a
# prompt longer than 3,627 tokens (make_data.py's 2-26 tools), and the evaluation's 50-tool prompts
# are 9,228 tokens long; this stage adds 600 contexts of 27-55 tools (up to 10,000 tokens, new seed)
# to 1,800 of run 10's own contexts and trains on the mix for 44 minutes on 2 cores (901 steps),
# learning rate 1e-3 held, then decayed over the second half (WSD), fresh AdamW.
#   tools/train_toolcaller/run_long.sh [OUT]
# INIT: the run-10 weights to start from (default: resources/models/toolcaller as of commit 1249a0b,
# taken from git history). RUN10_DATA: run_gpu.sh's data pickle (default /tmp/toolcaller_gpu_data/
# train.pkl; made here by make_run10_data.sh when it is missing, ~2 minutes on 2 cores).
# N_NORMAL: how many of run 10's contexts join the 600 long ones (default 1800: run 12; 5400: run 13).
# By default the 44-minute learning-rate schedule of the recorded run is replayed step for step
# (--replay-lrs LRS, default runs/run12_train_log.json), so the run's length does not depend on the
# machine; FRESH=1 runs on the clock instead (TIME_LIMIT_S, default 2640). Same Python needs as run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/toolcaller_long}
PY=${PYTHON:-python3}
export BFCL_DIR=${BFCL_DIR:-../shared/data/bfcl}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
INIT=${INIT:-}
if [ -z "$INIT" ]; then
  INIT=$WORK/run10
  mkdir -p "$INIT"
  git show 1249a0b:resources/models/toolcaller/model.safetensors > "$INIT/model.safetensors"
fi
RUN10_DATA=${RUN10_DATA:-/tmp/toolcaller_gpu_data/train.pkl}
if [ ! -f "$RUN10_DATA" ]; then
  [ "$(basename "$RUN10_DATA")" = train.pkl ] || { echo "run_long.sh: RUN10_DATA must end in train.pkl" >&2; exit 2; }
  tools/train_toolcaller/make_run10_data.sh "$(dirname "$RUN10_DATA")"
fi
"$PY" tools/train_toolcaller/make_data.py --out "$WORK/long" --groups 600 --seed 5000 --max-queries 48 --tools-asked 20 \
    --phrasing v2 --rename 0.5 --values wide --min-k 27 --max-k 55 --max-prefix 10000 2>"$WORK/long.log"
# the mix: the 600 long contexts (the first 16 are the validation set) and N_NORMAL of run 10's,
# drawn with random.Random(12) from all but its own 16 validation contexts
"$PY" tools/train_toolcaller/mix_data.py "$WORK/mix.pkl" --take "$WORK/long/train.pkl" \
    --sample "$RUN10_DATA" "${N_NORMAL:-1800}" 12
if [ "${FRESH:-0}" = 1 ]; then SCHEDULE=(--time-limit-s "${TIME_LIMIT_S:-2640}"); else
  SCHEDULE=(--replay-lrs "${LRS:-tools/train_toolcaller/runs/run12_train_log.json}"); fi
"$PY" tools/train_toolcaller/train.py --data "$WORK/mix.pkl" --out "$OUT" --init-from "$INIT" --steps 100000 \
    "${SCHEDULE[@]}" --seed 1234 --threads 2 --workers 1 --device "${DEVICE:-cpu}" --prefix-chunk 512 --lr 1e-3 \
    --warmup 20 --max-queries 48 --val-groups 16 --eval-every 300 --export-every 300 --lead-weight 3 --aux-weight 0.3 \
    --gather-weight 0.5 --match-weight 0.5 --collect-weight 0.5 --point-weight 0.5 --bf16 --schedule wsd \
    --decay-frac 0.5 --config '{"num_hidden_layers": 4, "intermediate_size": 448}'
