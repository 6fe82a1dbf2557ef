#!/usr/bin/env bash
# ctest wrapper: the cluster of scripts/cluster.sh (Redis + 3 replicas + HAProxy, loopback, free
# ports, its own directory) checked end to end through HAProxy:
#   1. the group-key header comes back, and a request routed by it compiles the group once;
#   2. the same group asked of every replica directly: each links it (remote or memory), no one
#      compiles it again;
#   3. the replica that owns the key is killed mid-run: HAProxy's next request is answered by
#      another replica, from Redis, not recompiled;
#   (and the official openai client through HAProxy, when installed by serve_openai_client);
#   4. Redis flushed: the next new replica lookup is a miss and recompiles, answers still equal.
# Exit 77 (ctest SKIP) when redis-server, haproxy, curl or python3 are missing.
# usage: run_cluster.sh CLI SOURCE_DIR WORK_DIR
set -uo pipefail
cli=$1 src=$2 work=$3
for p in redis-server redis-cli haproxy curl python3; do
  command -v "$p" >/dev/null 2>&1 || { echo "SKIP: $p is not installed (scripts/deps.sh)"; exit 77; }
done
rm -rf "$work" && mkdir -p "$work"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
export CC_CLI="$cli" CC_MODEL=builtin:qwen3-test CC_CLUSTER_DIR="$work/cluster" CC_THREADS=1
export CC_LB_PORT=$(free_port) CC_STATS_PORT=$(free_port) CC_REDIS_PORT=$(free_port)
# three consecutive free ports for the replicas
for _ in $(seq 1 20); do
  base=$(free_port)
  if [ "$base" -lt 65000 ] && python3 - "$base" <<'EOF'
import socket, sys
b = int(sys.argv[1])
for p in (b, b + 1, b + 2):
    s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()
EOF
  then break; fi
done
export CC_REPLICA_PORT=$base
trap 'bash "$src/scripts/cluster.sh" down >/dev/null 2>&1' EXIT
fail() { echo "FAIL: $*"; for f in "$work"/cluster/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

timeout 300 bash "$src/scripts/cluster.sh" up || fail "cluster.sh up"
lb="http://127.0.0.1:$CC_LB_PORT"

tools="$src/resources/toolsets/tools_5.json"
# The key binds the replicas' numerics: their KV width and weights, as GET /status reports them
# (serve takes bf16dot weights where the CPU has AVX-512 BF16).
read -r kv weights < <(curl -sf "$lb/status" |
  python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["kv_dtype"], s["weights"])') || fail "status"
key=$("$cli" --model builtin:qwen3-test --kv-dtype "$kv" --weights "$weights" --json key --tools "$tools" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["group_key"])') || fail "key"
body=$(python3 - "$tools" <<'EOF'
import json, sys
print(json.dumps({"tools": json.load(open(sys.argv[1])), "query": "What's the weather in Paris?",
                  "max_new_tokens": 4, "ignore_eos": True}))
EOF
)
# POST /query to $1 with the routing header; prints "tier tokens group-header"
ask() {
  local out
  out=$(curl -sf -D "$work/headers" -H 'Content-Type: application/json' -H "X-ContextCache-Group: $key" \
    --max-time 120 -d "$body" "$1/query") || return 1
  local header
  header=$(grep -i '^x-contextcache-group:' "$work/headers" | tr -d '\r' | awk '{print $2}')
  echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["tier"], ",".join(map(str,r["tokens"])), sys.argv[1])' "$header"
}

# 1. through HAProxy: compiled once, header returned, then a hit on the same replica
reply=$(ask "$lb") || fail "first request"; read -r tier1 tokens1 header1 <<<"$reply"
[ "$header1" = "$key" ] || fail "X-ContextCache-Group is '$header1', expected $key"
[ "$tier1" = miss ] || fail "first request: tier $tier1, expected miss"
reply=$(ask "$lb") || fail "second request"; read -r tier2 tokens2 _ <<<"$reply"
[ "$tier2" = memory ] || fail "second request: tier $tier2 (affinity routing should reach the same replica)"
[ "$tokens2" = "$tokens1" ] || fail "answers differ: $tokens1 vs $tokens2"
echo "ok: routed by key, compiled once (miss, then memory)"

# 2. every replica directly: nobody compiles again
owner=""
for i in 1 2 3; do
  port=$((CC_REPLICA_PORT + i - 1))
  reply=$(ask "http://127.0.0.1:$port") || fail "replica $i"; read -r t tok _ <<<"$reply"
  [ "$t" = miss ] && fail "replica $i recompiled the group"
  [ "$tok" = "$tokens1" ] || fail "replica $i answered $tok, expected $tokens1"
  [ "$t" = memory ] && owner=$i
  echo "ok: replica $i tier $t"
done
[ -n "$owner" ] || fail "no replica had the group in memory"
compiles=$(redis-cli -p "$CC_REDIS_PORT" --scan --pattern 'cc:group:*' | wc -l)
[ "$compiles" -eq 1 ] || fail "$compiles manifests in Redis, expected 1"

# 2b. the official openai client (defaultHeaders) through HAProxy, when the serve_openai_client
# test has installed it (build/tests/openai_client/node_modules); otherwise said and skipped
oc="$(dirname "$work")/openai_client"
if command -v node >/dev/null 2>&1 && [ -f "$oc/node_modules/openai/package.json" ]; then
  cp "$src/tests/serve/openai_client/cluster_client_test.mjs" "$oc/"
  (cd "$oc" && timeout 300 node cluster_client_test.mjs "$lb/v1" "$key" "$tools") || fail "openai client through HAProxy"
else
  echo "skipped: the openai npm client is not installed in $oc (run the serve_openai_client test first)"
fi

# 3. kill the owner: HAProxy answers from another replica (memory or remote), no recompile
kill -KILL "$(cat "$CC_CLUSTER_DIR/replica$owner.pid")"
sleep 3  # two failed health checks (inter 1s, fall 2)
for n in 1 2 3; do
  reply=$(ask "$lb") || fail "request $n after the kill"; read -r t tok _ <<<"$reply"
  [ "$t" = miss ] && fail "request $n after the kill recompiled"
  [ "$tok" = "$tokens1" ] || fail "after the kill: $tok, expected $tokens1"
done
echo "ok: replica $owner killed, the others answered without a compile"

# 4. Redis flushed: still exact (the survivors hold it in memory; a fresh compile elsewhere republishes)
redis-cli -p "$CC_REDIS_PORT" flushall >/dev/null
reply=$(ask "$lb") || fail "request after FLUSHALL"; read -r t tok _ <<<"$reply"
[ "$tok" = "$tokens1" ] || fail "after FLUSHALL: $tok, expected $tokens1"
echo "ok: after FLUSHALL tier $t, same answer"
echo "PASS"
