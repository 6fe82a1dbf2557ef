#!/bin/bash
# The peer on a lent GPU, the second call of a device session (issues 34 and 35: llama.cpp's CUDA
# backend on the same weights, in the same session as ours). Run right after scripts/device-check.sh
# on the warm machine, carrying build-device/peer (scripts/device-prepare-peer.sh):
#   run(command="bash scripts/device-peer.sh", carry=["build-device/peer"], timeout_s=420)
# It unpacks llama-bench and llama-batched-bench, exports builtin:qwen3-8b (the Qwen3-8B shape our
# bench_ttft and bench_step measure) with our CLI (left unpacked by device-check.sh, or from
# build-device/carry when that is carried too) to safetensors, converts them with
# tools/export_gguf.py to a BF16 GGUF (the same bits), and runs, each step under its own limit:
#   1. llama-bench prefill: 512 and 3,000 tokens, flash attention off and on (issue 34's pp figures);
#   2. llama-bench suffix over a cached prefix: 23 tokens at depth 2,952 (the cache hit's work);
#   3. llama-bench decode: 128 tokens at depth 0 and 3,000 (issue 35's tg figures);
#   (a llama-bench from before April 2025 has no -d: then 2 is not run and the decode at depth
#   3,000 comes from llama-batched-bench, one sequence after a 3,000-token prompt;)
#   4. llama-batched-bench: 1, 2, 4, 8 and 16 sequences sharing a 2,952-token prompt (-pps), 64
#      tokens each (issue 35's aggregate decode).
# Everything lands in $OUT: peer.txt (card, driver, peer commit), one JSON/log per step,
# summary.txt. Without a device every step answers "skipped" (a dry run of the script).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT, the output folder of the device tool, must be set}"
P=${PEER_DIR:-/tmp/cc-peer}
D=${DEVICE_DIR:-/tmp/cc-device}
t_start=$(date +%s)
mkdir -p "$P"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
  build-device/peer/llama-cuda.tar.xz "$P" || { echo "cannot unpack the peer" | tee "$OUT/summary.txt"; exit 1; }
if [ ! -x "$D/bin/contextcache-cli" ] && [ -e build-device/carry/programs.tar.xz ]; then
  mkdir -p "$D" && python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    build-device/carry/programs.tar.xz "$D"
fi
source scripts/device-common.sh
cuda_libs=$(cuda_lib_dirs)
LIBS="$P/lib:$D/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 || true
  echo "peer: llama.cpp $(cat "$P/commit.txt"), CUDA build for sm_90"
  echo "our CLI: $(cat "$D/commit.txt" 2>/dev/null | head -1)"
  echo "working tree: $(git log -1 --format='%H %s' 2>&1)"
  for f in "$P"/bin/*; do LD_LIBRARY_PATH="$LIBS" ldd "$f" | grep "not found" | sed "s|^|$(basename "$f"): |"; done
} > "$OUT/peer.txt" 2>&1
: > "$OUT/summary.txt"
BUDGET=${BUDGET:-380}
STEP_NEEDS_DRIVER=1  # llama-bench fails, rather than skips, without a driver
W=$P/work
mkdir -p "$W"
# the same weights on both sides: our CLI's export, then the BF16 GGUF of the same bits (kept for a rerun)
[ -e "$W/hf/model.safetensors" ] || step export_hf 90 "$D/bin/contextcache-cli" --model builtin:qwen3-8b export --out "$W/hf"
[ -e "$W/model-bf16.gguf" ] || step export_gguf 150 env PYTHONPATH="$P/gguf-py" python3 tools/export_gguf.py "$W/hf" \
  "$W/model-bf16.gguf" --outtype bf16 --name builtin:qwen3-8b
G=$W/model-bf16.gguf
LB=("$P/bin/llama-bench" -m "$G" -ngl 99 -o json)
# What this build of the peer takes: its options changed during 2025 (llama-bench's -d, the depth
# of the KV cache before a test, came in April; llama-batched-bench's -fa took on|off|auto from
# the summer, a bare flag before). Asked of the programs themselves; without a driver they do not
# start, and every step below is skipped anyway.
lb_help=$(LD_LIBRARY_PATH="$LIBS" "$P/bin/llama-bench" --help 2>&1)
bb_help=$(LD_LIBRARY_PATH="$LIBS" "$P/bin/llama-batched-bench" --help 2>&1)
depth=1
[ -n "$lb_help" ] && ! grep -q -- "--n-depth" <<< "$lb_help" && depth=0
FA=(-fa on)
[ -n "$bb_help" ] && ! grep -E -q -- "--flash-attn +\[on|'on', 'off'" <<< "$bb_help" && FA=(-fa)
echo "peer options: llama-bench -d $([ $depth = 1 ] && echo yes || echo no); llama-batched-bench ${FA[*]}" >> "$OUT/peer.txt"
step pp 90 "${LB[@]}" -p 512,3000 -n 0 -fa 0,1 -r 3
if [ $depth = 1 ]; then
  step suffix_over_prefix 45 "${LB[@]}" -p 23 -n 0 -d 2952 -fa 0,1 -r 3
  step tg 90 "${LB[@]}" -p 0 -n 128 -d 0,3000 -fa 0,1 -r 3
else
  # no -d: a 23-token prefill over 2,952 cached positions cannot be asked of this llama-bench;
  # decode at depth 0 from it, at depth 3,000 from llama-batched-bench (one sequence after a
  # 3,000-token prompt: its S_TG is decode from position 3,000 to 3,128)
  echo "suffix_over_prefix     not run: this llama-bench has no -d (n-depth)" | tee -a "$OUT/summary.txt"
  step tg 60 "${LB[@]}" -p 0 -n 128 -fa 0,1 -r 3
  step tg_depth3000 60 "$P/bin/llama-batched-bench" -m "$G" -ngl 99 "${FA[@]}" -c 4096 -b 4096 -ub 512 -npp 3000 \
    -ntg 128 -npl 1 --output-format jsonl
fi
step batched 90 "$P/bin/llama-batched-bench" -m "$G" -ngl 99 "${FA[@]}" -c 20480 -b 4096 -ub 512 -npp 2952 -ntg 64 \
  -npl 1,2,4,8,16 -pps --output-format jsonl
# what the peer is and what it made, last (the tool's reply carries the end)
ls -l "$W" >> "$OUT/peer.txt" 2>&1
echo "total $(( $(date +%s) - t_start ))s" | tee -a "$OUT/summary.txt"
