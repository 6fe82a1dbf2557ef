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
  libcpp-httplib-dev                             # the HTTP server (core/serve); nodejs + npm optional (tests/serve/openai_client)
  libhiredis-dev                                 # the shared remote group tier on Redis (core/store/remote_tier)
  redis-server haproxy curl                      # scripts/cluster.sh and the remote-tier / cluster tests (they skip without them)
  googletest libgtest-dev libgmock-dev           # unit tests
  libbenchmark-dev                               # bench/
  libopenblas-dev                                # bench_prefill: the machine's SGEMM throughput for comparison
  xvfb xauth                                     # screenshots of the app without a display
)

missing=()
for p in "${CC_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
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
