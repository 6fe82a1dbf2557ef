#!/bin/bash
# Run 10's training data (the shipped model's first stage): 12 make_data.py shards of 1,500 contexts (seeds
# 1234-1245), made in parallel and concatenated in order into DIR/train.pkl (18,000 contexts).
# Used by run_gpu.sh and run_long.sh.   tools/train_toolcaller/make_run10_data.sh DIR
# PYTHON (default python3) and BFCL_DIR (default ../shared/data/bfcl) as in those scripts.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=$1
PY=${PYTHON:-python3}
export BFCL_DIR=${BFCL_DIR:-../shared/data/bfcl}
mkdir -p "$DATA"
pids=()
for i in $(seq 0 11); do
  "$PY" tools/train_toolcaller/make_data.py --out "$DATA/s$i" --groups 1500 --seed $((1234 + i)) --max-queries 48 \
      --tools-asked 20 --phrasing v2 --rename 0.5 --values wide 2>"$DATA/s$i.log" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$PY" tools/train_toolcaller/merge_shards.py "$DATA" 12
