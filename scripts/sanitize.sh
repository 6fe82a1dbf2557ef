#!/usr/bin/env bash
# Sanitized test runs: builds the core, contextcache-cli and the GoogleTest tests (no Qt widgets,
# no CUDA, no benchmarks) with clang's sanitizers and runs ctest, stopping at the first report.
#   bash scripts/sanitize.sh asan  [--subset] [ctest args...]   # AddressSanitizer + UBSan -> build-asan/
#   bash scripts/sanitize.sh ubsan [--subset] [ctest args...]   # UBSan alone              -> build-ubsan/
#   bash scripts/sanitize.sh tsan  [--subset] [ctest args...]   # ThreadSanitizer          -> build-tsan/
# --subset builds only the target sanitize_subset and runs the tests labelled `sanitize` (what CI
# runs; the list is in tests/CMakeLists.txt). Other arguments go to ctest, e.g. `-R test_server`.
# TARGETS="t1 t2 ..." builds only those targets (e.g. TARGETS="test_remote_tier contextcache-cli"
# with `-R 'test_remote_tier|serve_cluster'`: the Redis tier and the cluster's servers sanitized).
# Every sanitized process, the servers and CLIs the tests start included, writes its reports to
# BUILD/sanitizer-reports/ (emptied first); the summary counts them and prints the first.
# Environment: CC/CXX (default clang/clang++; GCC works too), BUILD_DIR, JOBS (default nproc),
#   FUZZ=1 (asan with clang): also build the libFuzzer binaries (fuzz/) in the same tree, with
#   -DCONTEXTCACHE_FUZZ=ON, so one build serves both where CPU is short; the coverage
#   instrumentation this adds to every object makes the tests slower.
#   UI=1 (asan or ubsan): also build the Qt app and its widget tests (-DCONTEXTCACHE_UI=ON) and run
#   them offscreen with the rest. Not with tsan: Qt's own threads synchronise through futexes
#   inside the uninstrumented Qt libraries, which TSan cannot see, so every cross-thread signal
#   would be reported.
# Suppressions (scripts/sanitizers/*.supp) are only for reports inside third-party libraries, or a
# race harmless by design (tsan.supp: PeerSocket's descriptor scan); each entry says why. See
# docs/testing.md#sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  asan) flags="-fsanitize=address,undefined" ;;
  ubsan) flags="-fsanitize=undefined" ;;
  tsan) flags="-fsanitize=thread" ;;
  *) echo "usage: $0 asan|ubsan|tsan [ctest args...]" >&2; exit 2 ;;
esac
shift
target=all
if [ "${1:-}" = --subset ]; then
  target=sanitize_subset
  shift
  set -- -L sanitize "$@"
fi
[ "${CC_SKIP_DEPS:-0}" = 1 ] || bash scripts/deps.sh
export CC=${CC:-clang} CXX=${CXX:-clang++}
BUILD=${BUILD_DIR:-build-$mode}
JOBS=${JOBS:-$(nproc)}
# UBSan: every report is fatal (no recovery), so ctest sees it as a failure.
flags="$flags -fno-sanitize-recover=all -fno-omit-frame-pointer -g1"
extra=()
if [ "${FUZZ:-0}" = 1 ]; then
  [ "$mode" = asan ] || { echo "FUZZ=1 goes with asan (libFuzzer builds use ASan+UBSan)" >&2; exit 2; }
  extra+=(-DCONTEXTCACHE_FUZZ=ON)
fi
ui=OFF
if [ "${UI:-0}" = 1 ]; then
  [ "$mode" != tsan ] || { echo "UI=1 goes with asan or ubsan (Qt is not instrumented for TSan)" >&2; exit 2; }
  ui=ON
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# -O2 with assertions on (RelWithDebInfo without NDEBUG): the model tests are too slow at -O0.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DCONTEXTCACHE_UI=$ui -DCONTEXTCACHE_CUDA=OFF -DCONTEXTCACHE_BENCH=OFF "${launcher[@]}" "${extra[@]}"
[ -z "${TARGETS:-}" ] || target="$TARGETS"
# shellcheck disable=SC2086 # a list of targets
cmake --build "$BUILD" -j "$JOBS" --target $target

supp="$PWD/scripts/sanitizers"
reports_dir="$PWD/$BUILD/sanitizer-reports"
rm -rf "$reports_dir" && mkdir -p "$reports_dir"
# halt_on_error: the first report ends the process with an error (ctest counts it as failed).
# log_path: each process's reports in reports_dir/<mode>.<pid>, whichever process it was.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:suppressions=$supp/asan.supp:log_path=$reports_dir/asan"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp:log_path=$reports_dir/ubsan"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:log_path=$reports_dir/tsan"
cd "$BUILD"
log="ctest-$mode.log"
start=$(date +%s)
set +e
ctest --output-on-failure -j "$JOBS" --timeout 1800 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
end=$(date +%s)
echo "=== sanitize.sh $mode summary ($(git -C .. rev-parse --short HEAD), $(nproc) cores) ==="
grep -E "tests passed|tests failed|Total Test time" "$log" || true
reports=$(find "$reports_dir" -type f | wc -l)
echo "sanitizer reports: $reports process(es) reported (files in $BUILD/sanitizer-reports/); wall: $((end - start)) s; log: $BUILD/$log"
if [ "$reports" -gt 0 ]; then
  first=$(find "$reports_dir" -type f | sort | head -1)
  echo "--- the first: $first"
  head -60 "$first"
  [ "$rc" -ne 0 ] || rc=1  # a report in a process whose test still passed is a failure too
fi
exit "$rc"
