#!/bin/bash
# One session of run 15 on a lent GPU (the `device` tool's `run`), prepared here and carried there:
#   carry: tools/train_toolcaller/state/run15/carry (the run's bf16 weights and run.json, ~30 MB; absent
#          for the run's first session) and tools/train_toolcaller/state/bfcl.tar.xz (BFCL v4, 0.3 MB:
#          ../shared does not travel; made with `tar -cJf tools/train_toolcaller/state/bfcl.tar.xz -C
#          ../shared/data/bfcl BFCL_v4_*.json LICENSE README.md possible_answer`), so the working tree
#          stays under the tool's 64 MiB (check here first: bash scripts/device-budget.sh
#          tools/train_toolcaller/state/run15/carry tools/train_toolcaller/state/bfcl.tar.xz)
#   command: bash tools/train_toolcaller/run15_device.sh SECONDS [BRANCH_STEPS]
# It makes run 15's data there (the same bytes as here), trains SECONDS more (DEVICE=cuda), optionally
# branches a decayed copy of BRANCH_STEPS, and packs what comes back into $OUT as at most 8 files of at
# most 16 MiB (the tool's limits): pack.tar split in 15 MiB parts (carry/, branch/), pack.sha256,
# session.log, gpu.txt. Here: tools/train_toolcaller/run15_restore.sh FILES_AT puts them in the state.
# DEVICE=cpu OUT=/tmp/x runs the same on this machine (a dry run of the packing).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?OUT, the output folder of the device tool, must be set}"
SECONDS_TRAIN=${1:?seconds}
S=tools/train_toolcaller/state
export STATE=${STATE:-$S/run15}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 DEVICE=${DEVICE:-cuda}
mkdir -p /tmp/run15_bfcl && tar -xJf "$S/bfcl.tar.xz" -C /tmp/run15_bfcl
export BFCL_DIR=/tmp/run15_bfcl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  git log -1 --format='commit %H %s' 2>&1 || true
  "$PY" -c 'import torch; print("torch", torch.__version__)'; } > "$OUT/gpu.txt"
t0=$(date +%s)
PYTHON="$PY" tools/train_toolcaller/make_run15_data.sh /tmp/run15_data > "$OUT/session.log" 2>&1 ||
  { tail -n 3 /tmp/run15_data/s*.log | tee -a "$OUT/session.log"; exit 1; }
echo "data: $(( $(date +%s) - t0 )) s" >> "$OUT/session.log"
set -o pipefail
DATA=/tmp/run15_data PYTHON="$PY" OUT=/tmp/run15_out tools/train_toolcaller/run15.sh "$SECONDS_TRAIN" >> "$OUT/session.log" 2>&1
P=/tmp/run15_pack
rm -rf "$P" && mkdir -p "$P" && cp -r "$STATE/carry" "$P/carry"
if [ -n "${2:-}" ]; then
  DATA=/tmp/run15_data PYTHON="$PY" OUT="$P/branch" BRANCH="$2" tools/train_toolcaller/run15.sh >> "$OUT/session.log" 2>&1
  rm -f "$P/branch/tokenizer.json" "$P/branch/tokenizer_config.json"   # links into the repo
fi
tar -C "$P" -cf - . | split -b 15m -d - "$OUT/pack.tar.part-"
(cd "$OUT" && sha256sum pack.tar.part-* > pack.sha256)
echo "packed: $(ls "$OUT" | tr '\n' ' ') in $(( $(date +%s) - t0 )) s" >> "$OUT/session.log"
tail -5 "$OUT/session.log"
