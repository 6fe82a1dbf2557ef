#!/usr/bin/env bash
# libFuzzer campaign for one entry point of fuzz/ (clang, ASan+UBSan, coverage on all of core):
# runs it toward RUNS executions from its committed corpus with its dictionary, then merges what
# it found back into fuzz/corpus/TARGET, keeping only inputs that reach new edges (-use_counters=0,
# so the committed corpus stays small). Prints libFuzzer's final line (executions, cov: edges).
#   bash scripts/fuzz.sh TARGET [RUNS] [MAX_SECONDS]     e.g. bash scripts/fuzz.sh tool_set 1000000 1800
# TARGET is a file name fuzz/fuzz_TARGET.cpp. A crash leaves its input as $WORK/crash-* (printed),
# exits non-zero, and merges nothing. Environment: BUILD_DIR (default build-fuzz, configured here with
# -DCONTEXTCACHE_FUZZ=ON unless it exists), WORK (default /tmp/cc-fuzz/TARGET).
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:?usage: $0 TARGET [RUNS] [MAX_SECONDS]}
runs=${2:-1000000}
max_s=${3:-3600}
BUILD=${BUILD_DIR:-build-fuzz}
WORK=${WORK:-/tmp/cc-fuzz/$t}
[ -f "fuzz/fuzz_$t.cpp" ] || { echo "no fuzz/fuzz_$t.cpp" >&2; exit 2; }
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCONTEXTCACHE_FUZZ=ON -DCONTEXTCACHE_UI=OFF -DCONTEXTCACHE_CUDA=OFF -DCONTEXTCACHE_BENCH=OFF \
    -DCONTEXTCACHE_TESTS=OFF
fi
cmake --build "$BUILD" --target "fuzz_$t"
bin="$BUILD/fuzz/fuzz_$t"
mkdir -p "$WORK/new"
dict=()
[ -f "fuzz/dicts/$t.dict" ] && dict=(-dict="fuzz/dicts/$t.dict")
start=$(date +%s)
set +e
"$bin" "${dict[@]}" -runs="$runs" -max_total_time="$max_s" -timeout=20 -print_final_stats=1 \
  -artifact_prefix="$WORK/" "$WORK/new" "fuzz/corpus/$t" >"$WORK/run.log" 2>&1
rc=$?
set -e
echo "fuzz_$t: exit $rc after $(($(date +%s) - start)) s; log $WORK/run.log"
grep -E "^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units" "$WORK/run.log" || tail -30 "$WORK/run.log"
if [ "$rc" -ne 0 ]; then
  ls "$WORK"/crash-* "$WORK"/leak-* "$WORK"/timeout-* "$WORK"/oom-* 2>/dev/null || true
  exit "$rc"
fi
"$bin" -merge=1 -use_counters=0 "fuzz/corpus/$t" "$WORK/new" 2>&1 | grep "MERGE-OUTER: .* new files"
echo "fuzz/corpus/$t: $(ls "fuzz/corpus/$t" | wc -l) files"
