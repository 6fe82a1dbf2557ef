#!/bin/bash
# Run 14: run 13's weights (run_long.sh with N_NORMAL=5400) continued on one CUDA GPU, with long
# contexts throughout. Data: 1,200 new contexts of 27-55 tools (make_data.py seeds 6000 and 6001,
# up to 10,000 tokens; the first 16 are the validation set), run 12's 600 long contexts (seed 5000,
# as run_long.sh makes them) and 5,400 of run 10's contexts drawn with random.Random(13); learning
# rate LR (default 1e-3) held after a 20-step warm-up, then decayed over the second half (WSD), fresh
# AdamW, 4 input-building workers.
#   INIT=DIR tools/train_toolcaller/run_gpu_long.sh [OUT]
# INIT: run 13's model directory (required). CHATS=LO-HI: no-tool requests per new long context
# (make_data.py --chats; default its 3-5). DATA: a mix made earlier (skips making the data; ~1 minute
# on 2 cores, plus make_run10_data.sh's 2 if RUN10_DATA is missing). By default the run replays the
# recorded learning rates of run 14a step for step (LRS: runs/run14a_lrs.json; run14b_lrs.json with
# CHATS=8-12, run14c_lrs.json with LR=2e-3), so its length does not depend on the machine; FRESH=1
# runs on the clock instead (TIME_LIMIT_S, default 430: runs 14a-c, three at once on one H200). The
# GPU's arithmetic is not bit-reproducible, so the weights come out close to the recorded ones, not
# equal. Needs a Python with torch (CUDA), numpy and regex; BFCL_DIR must hold BFCL v4.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/toolcaller_run14}
PY=${PYTHON:-python3}
export BFCL_DIR=${BFCL_DIR:-../shared/data/bfcl}
INIT=${INIT:?INIT must name the model directory of run 13 (run_long.sh with N_NORMAL=5400)}
DATA=${DATA:-}
if [ -z "$DATA" ]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  RUN10_DATA=${RUN10_DATA:-/tmp/toolcaller_gpu_data/train.pkl}
  if [ ! -f "$RUN10_DATA" ]; then
    [ "$(basename "$RUN10_DATA")" = train.pkl ] || { echo "run_gpu_long.sh: RUN10_DATA must end in train.pkl" >&2; exit 2; }
    tools/train_toolcaller/make_run10_data.sh "$(dirname "$RUN10_DATA")"
  fi
  LONG=(--max-queries 48 --tools-asked 20 --phrasing v2 --rename 0.5 --values wide --min-k 27 --max-k 55 --max-prefix 10000)
  for seed in 6000 6001; do
    "$PY" tools/train_toolcaller/make_data.py --out "$WORK/l$seed" --groups 600 --seed $seed "${LONG[@]}" \
        ${CHATS:+--chats "$CHATS"} 2>"$WORK/l$seed.log" &
  done
  "$PY" tools/train_toolcaller/make_data.py --out "$WORK/l5000" --groups 600 --seed 5000 "${LONG[@]}" 2>"$WORK/l5000.log"
  wait
  "$PY" tools/train_toolcaller/mix_data.py "$WORK/mix.pkl" --take "$WORK"/l6000/train.pkl "$WORK"/l6001/train.pkl \
      "$WORK"/l5000/train.pkl --sample "$RUN10_DATA" 5400 13
  DATA=$WORK/mix.pkl
fi
if [ "${FRESH:-0}" = 1 ]; then SCHEDULE=(--time-limit-s "${TIME_LIMIT_S:-430}"); else
  SCHEDULE=(--replay-lrs "${LRS:-tools/train_toolcaller/runs/run14a_lrs.json}"); fi
"$PY" tools/train_toolcaller/train.py --data "$DATA" --out "$OUT" --init-from "$INIT" --steps 100000 "${SCHEDULE[@]}" \
    --seed 1234 --threads 1 --workers "${WORKERS:-4}" --device "${DEVICE:-cuda}" --lr "${LR:-1e-3}" --warmup 20 \
    --max-queries 48 --val-groups 16 --eval-every 500 --lead-weight 3 --aux-weight 0.3 --gather-weight 0.5 \
    --match-weight 0.5 --collect-weight 0.5 --point-weight 0.5 --bf16 --schedule wsd --decay-frac 0.5 \
    --config '{"num_hidden_layers": 4, "intermediate_size": 448}'
