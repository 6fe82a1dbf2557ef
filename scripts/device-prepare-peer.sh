#!/bin/bash
# Packs the peer for a lent GPU (issues 34 and 35 want llama.cpp's CUDA backend in the same device
# session as ours): llama-bench, llama-batched-bench and their libraries from a llama.cpp CUDA build
# for sm_90, plus that checkout's gguf-py (tools/export_gguf.py writes the GGUF with it), into
# build-device/peer/llama-cuda.tar.xz. The build itself is long on a 2-core machine (about 140 nvcc
# compiles), so it is made once, outside the repository, and kept:
#   cmake -S LLAMA -B LLAMA/build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF \
#     -DLLAMA_BUILD_TESTS=OFF -DGGML_CUDA_NCCL=OFF -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined
#   (the last: this machine has no libcuda.so.1, the driver's library, which libggml-cuda needs at run time)
#   cmake --build LLAMA/build-cuda --target llama-bench llama-batched-bench
# Usage: scripts/device-prepare-peer.sh LLAMA [COMMIT]   (COMMIT: what the checkout is, recorded;
#        LLAMA_BUILD=build names another build folder, e.g. a CPU build for a dry run here)
# Then, in the same device session as scripts/device-check.sh (right after it, while the machine is
# warm: its unpacked programs are reused), with the device tool:
#   run(command="bash scripts/device-peer.sh", carry=["build-device/peer"], timeout_s=420)
set -euo pipefail
cd "$(dirname "$0")/.."
L=${1:?the llama.cpp checkout with build-cuda/}
commit=${2:-$(git -C "$L" rev-parse HEAD 2>/dev/null || echo unknown)}
B="$L/${LLAMA_BUILD:-build-cuda}/bin"
for f in llama-bench llama-batched-bench; do [ -x "$B/$f" ] || { echo "$B/$f is missing: build it first (see above)" >&2; exit 1; }; done
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/bin" "$S/lib"
cp "$B/llama-bench" "$B/llama-batched-bench" "$S/bin/"
# the build's own shared libraries (libllama, libggml*), without the CUDA ones the image has
for f in "$S"/bin/*; do ldd "$f"; done | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcudart*|libcublas*|libstdc++*|libgcc_s*) ;;
    *) cp -L "$lib" "$S/lib/" ;;
  esac
done
cp -r "$L/gguf-py" "$S/gguf-py"
find "$S/gguf-py" -name '__pycache__' -prune -exec rm -rf {} +
echo "$commit" > "$S/commit.txt"
mkdir -p build-device/peer
tar -C "$S" -cf - . | xz -T0 -9 > build-device/peer/llama-cuda.tar.xz
ls -l build-device/peer/llama-cuda.tar.xz
bash scripts/device-budget.sh build-device/peer
