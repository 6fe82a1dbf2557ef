#!/usr/bin/env bash
# ContextCache vs llama.cpp, side by side: same weights, same prompt, same machine, one sitting.
# Not part of ctest. See docs/benchmarks.md, "Side by side with llama.cpp".
#
#   bench/side_by_side.sh --llama-bin DIR --gguf-py DIR [options]
#
# What it needs (it builds nothing):
#   --llama-bin DIR      a CPU Release build of llama.cpp holding llama-bench, llama-server and
#                        llama-quantize (their --version must report --llama-commit)
#   --gguf-py DIR        that checkout's gguf-py folder (tools/export_gguf.py uses it as a library)
#   ContextCache binaries: --cc-bin DIR holding contextcache-cli (default build/app)
#   python3 with numpy (Debian: python3-numpy), /usr/bin/time, lscpu
#
# Options (defaults in brackets):
#   --cc-bin DIR         ContextCache binaries [build/app]
#   --cc-commit SHA      the commit those binaries were built from [what `contextcache-cli version` says]
#   --llama-commit SHA   llama.cpp commit to check the binaries against [3f545bec]
#   --model SPEC         built-in model, exported to safetensors then GGUF [builtin:qwen3-0.6b]
#   --threads N          threads on both sides [2]
#   --runs N             runs per figure, medians reported [3]
#   --kv-dtype D         ContextCache KV width, f32|bf16 [f32]
#   --cc-weights W       ContextCache --weights, stored|bf16|q8|bf16dot [stored: the bf16 checkpoint as is]
#   --decode-tokens N    tokens per decode measurement [64]
#   --decode-depth N     the "deep" decode point [3000]
#   --prefill-long N     the long prefill point [3000]
#   --llama-fa LIST      llama-bench -fa values [0,1]
#   --llama-server-fa L  one llama-server per value: on,off [on,off]
#   --work DIR           scratch: exported weights, GGUFs, slot files, logs [/tmp/cc-side-by-side]
#   --out FILE           the JSON written [side_by_side.json]
#   --python PATH        a python3 with numpy [python3 that imports numpy]
#
# Servers listen on 127.0.0.1 only, on free ports; each request loop has a fixed count (--runs);
# every process it starts is stopped by its pid. A full run at the defaults takes about 20 minutes
# on 2 cores.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cc_bin="$repo/build/app"
cc_commit=""
llama_bin=""
gguf_py=""
llama_commit="3f545bec"
model="builtin:qwen3-0.6b"
threads=2
runs=3
kv_dtype="f32"
cc_weights="stored"
decode_tokens=64
decode_depth=3000
prefill_long=3000
llama_fa="0,1"
llama_server_fa="on,off"
work="/tmp/cc-side-by-side"
out="side_by_side.json"
python=""
extra=()

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --cc-bin) cc_bin="$2"; shift 2 ;;
        --cc-commit) cc_commit="$2"; shift 2 ;;
        --llama-bin) llama_bin="$2"; shift 2 ;;
        --gguf-py) gguf_py="$2"; shift 2 ;;
        --llama-commit) llama_commit="$2"; shift 2 ;;
        --model) model="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --kv-dtype) kv_dtype="$2"; shift 2 ;;
        --cc-weights) cc_weights="$2"; shift 2 ;;
        --decode-tokens) decode_tokens="$2"; shift 2 ;;
        --decode-depth) decode_depth="$2"; shift 2 ;;
        --prefill-long) prefill_long="$2"; shift 2 ;;
        --llama-fa) llama_fa="$2"; shift 2 ;;
        --llama-server-fa) llama_server_fa="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --python) python="$2"; shift 2 ;;
        --only) extra+=(--only "$2"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "side_by_side.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
done

die() { echo "side_by_side.sh: $*" >&2; exit 1; }
[[ -n "$llama_bin" ]] || die "--llama-bin DIR is required (llama-bench, llama-server, llama-quantize)"
[[ -n "$gguf_py" ]] || die "--gguf-py DIR is required (the llama.cpp checkout's gguf-py)"
for b in llama-bench llama-server llama-quantize; do
    [[ -x "$llama_bin/$b" ]] || die "$llama_bin/$b not found"
done
[[ -x "$cc_bin/contextcache-cli" ]] || die "$cc_bin/contextcache-cli not found (--cc-bin)"
[[ -d "$gguf_py/gguf" ]] || die "$gguf_py has no gguf package (--gguf-py)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is needed for peak RSS (Debian: time)"
if [[ -z "$python" ]]; then
    for p in python3 /usr/bin/python3; do
        if "$p" -c 'import numpy' 2>/dev/null; then python="$(command -v "$p")"; break; fi
    done
    [[ -n "$python" ]] || die "no python3 with numpy (Debian: apt-get install python3-numpy)"
fi
if [[ -z "$cc_commit" ]]; then  # what the binaries say they were built from
    cc_commit="$("$cc_bin/contextcache-cli" version)" || die "$cc_bin/contextcache-cli version failed"
fi

exec "$python" "$repo/bench/side_by_side.py" \
    --repo "$repo" --cc-bin "$cc_bin" --cc-commit "$cc_commit" \
    --llama-bin "$llama_bin" --llama-commit "$llama_commit" --gguf-py "$gguf_py" --python "$python" \
    --work "$work" --model "$model" --threads "$threads" --runs "$runs" --kv-dtype "$kv_dtype" --cc-weights "$cc_weights" \
    --decode-tokens "$decode_tokens" --decode-depth "$decode_depth" --prefill-long "$prefill_long" \
    --llama-fa "$llama_fa" --llama-server-fa "$llama_server_fa" --out "$out" "${extra[@]}"
