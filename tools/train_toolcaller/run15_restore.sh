#!/bin/bash
# Bring a run15_device.sh session back: check the parts against pack.sha256, unpack carry/ into the run's
# state (train.py resumes from it when it is further on than state.pt) and the decayed branch, when there
# is one, into tools/train_toolcaller/state/run15_branch-STEP.
#   tools/train_toolcaller/run15_restore.sh FILES_AT
set -euo pipefail
cd "$(dirname "$0")/../.."
IN=$1
S=tools/train_toolcaller/state
(cd "$IN" && sha256sum -c pack.sha256)
tmp=$(mktemp -d)
cat "$IN"/pack.tar.part-* | tar -xf - -C "$tmp"
mkdir -p "$S/run15"
rm -rf "$S/run15/carry.prev" && { [ -d "$S/run15/carry" ] && mv "$S/run15/carry" "$S/run15/carry.prev" || true; }
mv "$tmp/carry" "$S/run15/carry"
step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$S/run15/carry/run.json")
if [ -d "$tmp/branch" ]; then
  rm -rf "$S/run15_branch-$step" && mv "$tmp/branch" "$S/run15_branch-$step"
  for f in tokenizer.json tokenizer_config.json; do ln -s "../../../../resources/tokenizers/toolcaller/$f" "$S/run15_branch-$step/$f"; done
  echo "branch: $S/run15_branch-$step"
fi
rm -rf "$tmp"
echo "carry at step $step: $S/run15/carry"
