#!/bin/bash
# One call on a lent GPU, prepared by scripts/device-prepare.sh (which says how to call it). Unpacks
# the programs, then runs, most important first and each under its own time limit so that the
# whole stays under 8 minutes:
#   1. the CUDA self-test, full sweep (every op and whole-model row; the tensor-core attention's
#      rows included: vs float64, split == tiled, segment and row invariance, cached == full);
#   2. bench_step on the Qwen3-8B shape: 1, 2, 4, 8 and 16 sequences decoding together at depth 0
#      and 2,985, one after another (serial), in one pass (CONTEXTCACHE_CUDA_BATCH=stacked's step;
#      the self-test's "several sequences in one step" rows check its bits) and in one pass as CUDA
#      graphs (CONTEXTCACHE_CUDA_GRAPHS's path; the "graphs" rows); then every opt-in path together:
#      the tensor-core attention (CONTEXTCACHE_CUDA_ATTENTION=mma), our own tensor-core GEMMs
#      (CONTEXTCACHE_CUDA_GEMM=own; the "own gemm" rows), stacked, as graphs with the fused small
#      kernels (+fused: CONTEXTCACHE_CUDA_FUSED's path; the "fused" rows) captured every step, and
#      as graphs captured once per shape and KV-length bucket and replayed (+replay:
#      CONTEXTCACHE_CUDA_GRAPHS=replay; the "graph replay" rows), each step's logits brought back
#      and picked on the host, then greedy tokens picked on the device (--greedy backend with
#      CONTEXTCACHE_CUDA_GREEDY=device; the "device greedy" rows);
#   3. bench_ttft on the Qwen3-8B shape (5 and 20 tools) with CONTEXTCACHE_CUDA_ATTENTION=mma, BF16
#      KV (the GPU's default width) and the upload ring (CONTEXTCACHE_CUDA_UPLOAD=ring: its
#      upload GB/s against the staged uploads of the next run), then with the scalar attention and
#      F32 KV (as the first device run measured it);
#   4. bench_prefill's CUDA rows (prefill 512 / 3,000 tokens, decode): mma attention, mma attention
#      with our own GEMMs, scalar.
# Every step's limit is cut to what is left of BUDGET seconds (default 470), so the call ends
# before the tool's timeout with its summary.
# Everything lands in $OUT: gpu.txt (card, driver, commit), one log (and JSON) per step and
# summary.txt (step, exit code, seconds), printed last. Run here (no device), every step answers
# "skipped" (exit 77): a dry run of the script and the carry.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT, the output folder of the device tool, must be set}"
D=${DEVICE_DIR:-/tmp/cc-device}
rm -rf "$D" && mkdir -p "$D"
t_start=$(date +%s)
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
  build-device/carry/programs.tar.xz "$D" || { echo "cannot unpack the carry" | tee "$OUT/summary.txt"; exit 1; }
# CUDA's libraries: the image's toolkit, or the wheels next to its PyTorch
source scripts/device-common.sh
cuda_libs=$(cuda_lib_dirs)
LIBS="$D/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 || true
  echo "programs built at: $(cat "$D/commit.txt")"
  echo "working tree: $(git log -1 --format='%H %s' 2>&1)"
  echo "LD_LIBRARY_PATH for the programs: $LIBS"
  echo "the CLI's default numerics on this device: $(LD_LIBRARY_PATH="$LIBS" "$D/bin/contextcache-cli" --backend cuda \
    --model builtin:qwen3-test key --json --tools resources/toolsets/tools_5.json 2>&1 | grep -o '"backend_numerics":"[^"]*"')"
  for f in "$D"/bin/*; do LD_LIBRARY_PATH="$LIBS" ldd "$f" | grep "not found" | sed "s|^|$(basename "$f"): |"; done
} > "$OUT/gpu.txt" 2>&1
: > "$OUT/summary.txt"
BUDGET=${BUDGET:-470}
step selftest 200 "$D/bin/contextcache-cli" selftest --backend cuda --json
# decode first (issue 35: graphs, our own GEMMs), then the attention's TTFT and prefill (issue 34)
step step_decode 120 "$D/bin/bench_step" --backend cuda --depth 0,2985 --sequences 1,2,4,8,16 --tokens 8 --runs 2 \
  --kv bf16 --batch serial,stacked,stacked+graphs
step step_decode_own 110 CONTEXTCACHE_CUDA_ATTENTION=mma CONTEXTCACHE_CUDA_GEMM=own CONTEXTCACHE_CUDA_GREEDY=device \
  "$D/bin/bench_step" --backend cuda --depth 0,2985 --sequences 1,2,4,8,16 --tokens 8 --runs 2 --kv bf16 \
  --batch stacked,stacked+graphs+fused,stacked+replay+fused --greedy host,backend
step ttft_mma 90 CONTEXTCACHE_CUDA_ATTENTION=mma CONTEXTCACHE_CUDA_UPLOAD=ring "$D/bin/bench_ttft" --backend cuda --tools 5,20 --runs 3 --kv bf16
step ttft_scalar 90 CONTEXTCACHE_CUDA_ATTENTION=scalar "$D/bin/bench_ttft" --backend cuda --tools 5,20 --runs 3
step prefill_mma 50 CONTEXTCACHE_CUDA_ATTENTION=mma "$D/bin/bench_prefill" --backend cuda \
  --benchmark_out="$OUT/prefill_mma.json" --benchmark_out_format=json
step prefill_mma_own 50 CONTEXTCACHE_CUDA_ATTENTION=mma CONTEXTCACHE_CUDA_GEMM=own "$D/bin/bench_prefill" \
  --backend cuda --benchmark_out="$OUT/prefill_mma_own.json" --benchmark_out_format=json
step prefill_scalar 50 CONTEXTCACHE_CUDA_ATTENTION=scalar "$D/bin/bench_prefill" --backend cuda \
  --benchmark_out="$OUT/prefill_scalar.json" --benchmark_out_format=json
# the self-test's failing rows, if any, then the summary (the tool's reply carries the end)
python3 - "$OUT/selftest.out" <<'PY' 2>/dev/null | tee -a "$OUT/summary.txt"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d.get("checks", [])
bad = [r for r in rows if not r.get("pass")]
print(f"selftest: {d.get('status')}, {len(rows) - len(bad)} of {len(rows)} rows pass")
for r in bad[:15]: print(f"  FAIL {r['check']} [{r['shape']}] {r['max_error']} > {r['bound']} {r.get('note', '')}")
for r in [r for r in rows if "measured, not a check" in r["check"]][:8]: print(f"  {r['check']} [{r['shape']}]: {r.get('note', '')}")
PY
echo "total $(( $(date +%s) - t_start ))s" | tee -a "$OUT/summary.txt"
