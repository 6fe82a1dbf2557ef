#!/bin/bash
# Run 15's training data (the first run on the derived tokenizer, resources/tokenizers/toolcaller, and the
# v3 generator): 12 make_data.py shards of 1,000 contexts (seeds 1500-1511), made in parallel and
# concatenated in order into DIR/train.pkl (12,000 contexts). The same commit and the same BFCL files make
# the same bytes on any machine, which is what lets train.py --state continue a run made elsewhere (it
# compares the data's stats). Used by run15.sh.   tools/train_toolcaller/make_run15_data.sh DIR
# PYTHON (default python3) and BFCL_DIR (default ../shared/data/bfcl) as in run_gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=$1
PY=${PYTHON:-python3}
export BFCL_DIR=${BFCL_DIR:-../shared/data/bfcl}
mkdir -p "$DATA"
pids=()
for i in $(seq 0 11); do
  "$PY" tools/train_toolcaller/make_data.py --out "$DATA/s$i" --groups 1000 --seed $((1500 + i)) --max-queries 48 \
      --tools-asked 20 --phrasing v3 --rename 0.5 --values wide --tokenizer resources/tokenizers/toolcaller \
      2>"$DATA/s$i.log" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$PY" tools/train_toolcaller/merge_shards.py "$DATA" 12
