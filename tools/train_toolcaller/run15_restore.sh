#!/bin/bash
# Bring a run15_device.sh session back: check the parts against pack.sha256, unpack carry/ into the run's
# state (train.py resumes from it when it is further on than state.pt) and the decayed branch, when there
# is one, into STATE-branch-STEP (STATE: default tools/train_toolcaller/state/run15).
#   tools/train_toolcaller/run15_restore.sh FILES_AT
set -euo pipefail
cd "$(dirname "$0")/../.."
IN=$1
STATE=${STATE:-tools/train_toolcaller/state/run15}
(cd "$IN" && sha256sum -c pack.sha256)
tmp=$(mktemp -d)
cat "$IN"/pack.tar.part-* | tar -xf - -C "$tmp"
mkdir -p "$STATE"
rm -rf "$STATE/carry.prev" && { [ -d "$STATE/carry" ] && mv "$STATE/carry" "$STATE/carry.prev" || true; }
mv "$tmp/carry" "$STATE/carry"
step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$STATE/carry/run.json")
if [ -d "$tmp/branch" ]; then
  rm -rf "$STATE-branch-$step" && mv "$tmp/branch" "$STATE-branch-$step"
  for f in tokenizer.json tokenizer_config.json; do cp "resources/tokenizers/toolcaller/$f" "$STATE-branch-$step/$f"; done
  echo "branch: $STATE-branch-$step (an HF directory: contextcache-cli --model DIR)"
fi
rm -rf "$tmp"
echo "carry at step $step: $STATE/carry"
