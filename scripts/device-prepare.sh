#!/bin/bash
# Prepares one call on a lent GPU (the `device` tool of this workplace; docs/cuda.md, "Running on a
# lent GPU"). Here, on the development machine (nvcc, no GPU): builds the CUDA programs in
# build-device/ (Release, no UI, for sm_90 only: the lent GPUs are H100s and H200s) and packs what
# the device needs into build-device/carry/programs.tar.xz: contextcache-cli with its CUDA plugin, bench_ttft, bench_step and
# bench_prefill, and the Debian libraries they link that a device image may lack (not glibc, not
# the CUDA libraries, which the image has). Compressed, so that the working tree and the carry
# stay under the tool's 64 MiB. Then, with the device tool:
#   run(command="bash scripts/device-check.sh", carry=["build-device/carry"], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-device}
C="$B/carry"
mkdir -p "$B"
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONTEXTCACHE_UI=OFF -DCONTEXTCACHE_TESTS=OFF \
  -DCONTEXTCACHE_BENCH=ON -DCONTEXTCACHE_CUDA=ON -DCONTEXTCACHE_CUDA_ARCHS=90 > "$B/configure.log" 2>&1 ||
  { tail -20 "$B/configure.log"; exit 1; }
cmake --build "$B" --target contextcache-cli contextcache_cuda bench_ttft bench_prefill bench_step
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/bin" "$S/lib"
cp "$B/app/contextcache-cli" "$B/app/libcontextcache-cuda.so" "$B/bench/bench_ttft" "$B/bench/bench_prefill" \
  "$B/bench/bench_step" "$S/bin/"
# the libraries the programs link, less glibc's and CUDA's
for f in "$S"/bin/*; do ldd "$f"; done | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcudart*|libcublas*) ;;
    *) cp -L "$lib" "$S/lib/" ;;
  esac
done
git log -1 --format='%H %s' > "$S/commit.txt"
git status --short >> "$S/commit.txt"
mkdir -p "$C"
# -9: a 64 MiB dictionary spans the five programs, which share most of their bytes (the core and
# the embedded model in each): 17 MB instead of 27 with -6
tar -C "$S" -cf - . | xz -T0 -9 > "$C/programs.tar.xz"
echo "carry: $C/programs.tar.xz"
bash scripts/device-budget.sh "$C"
