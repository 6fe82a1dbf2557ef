#!/usr/bin/env bash
# Installs the Debian 12 packages ContextCache needs, only those that are missing.
# Sourced by scripts/run-app.sh and scripts/run-tests.sh; safe to run on its own.
set -euo pipefail

CC_PACKAGES=(
  build-essential cmake ninja-build pkg-config git xz-utils
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev  # Qt 6 Widgets, Charts (which needs Qt6OpenGL), Test
  nlohmann-json3-dev                             # JSON
  libssl-dev                                     # OpenSSL libcrypto: SHA-256 (EVP)
  libpcre2-dev                                   # the tokenizer's Unicode regex (the file's own pattern)
  libutf8proc-dev                                # NFC normalisation for tokenizers
  libxxhash-dev libsqlite3-dev                   # cache file checksums, cache index
  libcpp-httplib-dev                             # the HTTP server (core/serve)
  libhiredis-dev                                 # the shared remote group tier on Redis (core/store/remote_tier)
  redis-server haproxy curl                      # scripts/cluster.sh and the remote-tier / cluster tests (they skip without them)
  python3                                        # scripts/crash-consistency.py, scripts/soak.py and their ctests
  clang libclang-rt-14-dev                       # clang builds, scripts/sanitize.sh, libFuzzer (fuzz/); -rt is only recommended
  googletest libgtest-dev libgmock-dev           # unit tests
  json-schema-test-suite                         # the official JSON Schema tests, read by test_json_schema_suite
  libbenchmark-dev                               # bench/
  libopenblas-dev                                # bench_prefill: the machine's SGEMM throughput for comparison
  xvfb xauth                                     # screenshots of the app without a display
)

missing=()
for p in "${CC_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the official openai client test (tests/serve/openai_client). Debian's packages
# only when the commands are missing: a node/npm installed otherwise (nvm, NodeSource, a tarball)
# is used as it is, since Debian's npm would conflict with it.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The CUDA backend is built when nvcc exists (the CUDA toolkit is not a Debian package here).
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
  echo "deps: nvcc found, the CUDA backend will be built"
else
  echo "deps: no nvcc, building without the CUDA backend"
fi
