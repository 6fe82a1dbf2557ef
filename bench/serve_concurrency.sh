#!/usr/bin/env bash
# ContextCache `serve --parallel N` vs `llama-server --parallel N` under concurrent clients: same
# weights, same prompt, same machine, one sitting (issue 36, item 6). Not part of ctest. See
# docs/benchmarks.md, "Side by side with llama.cpp", and the docstring of bench/serve_concurrency.py.
#
#   bench/serve_concurrency.sh --llama-bin DIR --gguf-py DIR [options]
#
# What it needs (it builds nothing):
#   --llama-bin DIR      a CPU Release build of llama.cpp holding llama-server (its --version must
#                        report --llama-commit); not needed when --sides has no llama
#   --gguf-py DIR        that checkout's gguf-py folder (tools/export_gguf.py uses it as a library);
#                        not needed when --sides has no llama
#   ContextCache binaries: --cc-bin DIR holding contextcache-cli with `serve --parallel` (default build/app)
#   python3 with numpy (Debian: python3-numpy), lscpu
#
# Options (defaults in brackets):
#   --cc-bin DIR         ContextCache binaries [build/app]
#   --cc-commit SHA      the commit those binaries were built from [what `contextcache-cli version` says]
#   --llama-commit SHA   llama.cpp commit to check the binaries against [3f545bec]
#   --model SPEC         built-in model, exported to safetensors then GGUF [builtin:qwen3-0.6b]
#   --threads N          threads on both sides [2]
#   --clients LIST       concurrent clients, one sweep point each [1,2,4,8,16]
#   --requests-per-client N  streamed requests each client sends, one after another [4]
#   --max-tokens N       tokens per reply (ignore_eos: every reply has exactly N) [64]
#   --tools N            the tool list resources/toolsets/tools_N.json and its sample queries [20]
#   --sides LIST         cc (serve --parallel = clients), cc-default (serve without --parallel),
#                        llama (llama-server -np = clients) [cc,cc-default,llama]
#   --llama-server-fa L  one llama-server per value: on,off [on,off]
#   --llama-extra ARGS   more llama-server arguments, one string [none]
#   --cc-extra ARGS      more `contextcache-cli serve` arguments, one string (e.g. "--first-token-rows 0") [none]
#   --slot-ctx N         llama-server context per slot; -c is N x clients [0: longest prompt + reply + 64]
#   --kv-dtype D         ContextCache --kv-dtype [serve's default]
#   --cc-weights W       ContextCache --weights [serve's default]
#   --timeout S          seconds per request [900]
#   --stagger-ms MS      client i starts i x MS after the barrier, so the connects do not overflow
#                        a server's accept queue (recorded: listen_overflows_during_load); a few hundred
#                        ms or more spreads the arrivals over the others' decoding [2]
#   --burst              rounds: a client's next request waits until every client has its reply, so
#                        each round's requests arrive together (the stagger applies inside a round)
#   --fresh-queries 0|1  1: every request's query starts with a lead-in no earlier request had
#                        ("Request N. "), so each is a group hit that prefills its whole query; 0: the
#                        sample queries as they are (a repeat can hit a stored conversation) [1]
#   --work DIR           scratch: exported weights, GGUF, cache dirs, server logs [/tmp/cc-serve-concurrency]
#   --out FILE           the JSON written (also after every server, so a cut-off sitting keeps its part)
#                        [serve_concurrency.json]
#   --python PATH        a python3 with numpy [python3 that imports numpy]
#
# Servers listen on 127.0.0.1 only, on free ports (ContextCache: --port 0, the port read from its
# --json line); every loop has a fixed count and every request a timeout; every process it starts
# is stopped by its pid. Exit 1 if any request failed. A full run at the defaults takes about
# 30 minutes on an idle 2-core machine.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cc_bin="$repo/build/app"
cc_commit=""
llama_bin=""
gguf_py=""
llama_commit="3f545bec"
model="builtin:qwen3-0.6b"
threads=2
clients="1,2,4,8,16"
requests_per_client=4
max_tokens=64
tools=20
sides="cc,cc-default,llama"
llama_server_fa="on,off"
llama_extra=""
cc_extra=""
slot_ctx=0
kv_dtype=""
cc_weights=""
timeout=900
stagger_ms=2
burst=()
fresh_queries=1
work="/tmp/cc-serve-concurrency"
out="serve_concurrency.json"
python=""

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
        --clients) clients="$2"; shift 2 ;;
        --requests-per-client) requests_per_client="$2"; shift 2 ;;
        --max-tokens) max_tokens="$2"; shift 2 ;;
        --tools) tools="$2"; shift 2 ;;
        --sides) sides="$2"; shift 2 ;;
        --llama-server-fa) llama_server_fa="$2"; shift 2 ;;
        --llama-extra) llama_extra="$2"; shift 2 ;;
        --cc-extra) cc_extra="$2"; shift 2 ;;
        --slot-ctx) slot_ctx="$2"; shift 2 ;;
        --kv-dtype) kv_dtype="$2"; shift 2 ;;
        --cc-weights) cc_weights="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --stagger-ms) stagger_ms="$2"; shift 2 ;;
        --burst) burst=(--burst); shift ;;
        --fresh-queries) fresh_queries="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --python) python="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "serve_concurrency.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
done

die() { echo "serve_concurrency.sh: $*" >&2; exit 1; }
if [[ ",$sides," == *,llama,* ]]; then
    [[ -n "$llama_bin" ]] || die "--llama-bin DIR is required (llama-server; or --sides without llama)"
    [[ -n "$gguf_py" ]] || die "--gguf-py DIR is required (the llama.cpp checkout's gguf-py)"
    [[ -x "$llama_bin/llama-server" ]] || die "$llama_bin/llama-server not found"
    [[ -d "$gguf_py/gguf" ]] || die "$gguf_py has no gguf package (--gguf-py)"
fi
[[ -x "$cc_bin/contextcache-cli" ]] || die "$cc_bin/contextcache-cli not found (--cc-bin)"
if [[ -z "$python" ]]; then
    for p in python3 /usr/bin/python3; do
        if "$p" -c 'import numpy' 2>/dev/null; then python="$(command -v "$p")"; break; fi
    done
    [[ -n "$python" ]] || die "no python3 with numpy (Debian: apt-get install python3-numpy)"
fi
if [[ -z "$cc_commit" ]]; then  # what the binaries say they were built from
    cc_commit="$("$cc_bin/contextcache-cli" version)" || die "$cc_bin/contextcache-cli version failed"
fi

exec "$python" "$repo/bench/serve_concurrency.py" \
    --repo "$repo" --cc-bin "$cc_bin" --cc-commit "$cc_commit" \
    --llama-bin "$llama_bin" --llama-commit "$llama_commit" --gguf-py "$gguf_py" --python "$python" \
    --work "$work" --model "$model" --threads "$threads" --clients "$clients" \
    --requests-per-client "$requests_per_client" --max-tokens "$max_tokens" --tools "$tools" --sides "$sides" \
    --llama-server-fa "$llama_server_fa" "--llama-extra=$llama_extra" "--cc-extra=$cc_extra" --slot-ctx "$slot_ctx" \
    --kv-dtype "$kv_dtype" --cc-weights "$cc_weights" --timeout "$timeout" --stagger-ms "$stagger_ms" "${burst[@]}" --fresh-queries "$fresh_queries" --out "$out"
