#!/bin/bash
# What a call to the `device` tool would send: the working tree (tracked files and untracked ones
# that git does not ignore) plus the carried paths given as arguments, against the tool's 64 MiB.
# Exits 1, saying so, when it is over. Used by scripts/device-prepare.sh; before a training session
# on a lent GPU (tools/train_toolcaller/run15_device.sh):
#   bash scripts/device-budget.sh tools/train_toolcaller/state/run15/carry tools/train_toolcaller/state/bfcl.tar.xz
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$(( 64 << 20 ))
# (one stat over the whole list: `xargs du -c | tail -1` would keep only the last batch's total)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard |
  xargs -0 stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
carry_bytes=0
for p in "$@"; do
  [ -e "$p" ] || { echo "device-budget: $p does not exist" >&2; exit 1; }
  carry_bytes=$(( carry_bytes + $(du -sb "$p" | cut -f1) ))
done
total=$(( tree_bytes + carry_bytes ))
echo "device budget: working tree $tree_bytes bytes + carry $carry_bytes bytes = $total bytes" \
  "($(( total >> 20 )) MiB of the tool's 64 MiB)"
[ "$total" -lt "$limit" ] || { echo "device-budget: over the device tool's 64 MiB by $(( total - limit )) bytes" >&2; exit 1; }
