#!/usr/bin/env bash
# A small ContextCache cluster on this machine (docs/deploy.md): Redis (the shared remote group
# tier), three `contextcache-cli serve` replicas, and HAProxy routing on the group-key header, all
# on loopback, with the configuration files in deploy/.
#
#   scripts/cluster.sh up       start everything (waits until every replica answers /health)
#   scripts/cluster.sh status   what runs, and each replica's health
#   scripts/cluster.sh down     stop what `up` started (by the pids it recorded, nothing else)
#
# Environment (defaults in brackets):
#   CC_CLI            contextcache-cli [build/app/contextcache-cli]
#   CC_MODEL          --model for the replicas [builtin:toolcaller]
#   CC_CLUSTER_DIR    state: pids, logs, each replica's cache directory, Redis's dir [/tmp/contextcache-cluster-$USER]
#   CC_LB_PORT        HAProxy's port [8080]; CC_STATS_PORT its stats page [8404]
#   CC_REPLICA_PORT   the first replica's port; the others follow [8081]
#   CC_REDIS_PORT     [6390]
#   CC_REDIS_MALLOC_CONF  Redis's jemalloc options [dirty_decay_ms:-1,muzzy_decay_ms:-1: keep freed pages]
#   CC_API_KEY        when set, the replicas require "Authorization: Bearer $CC_API_KEY"
#   CC_THREADS        --threads per replica [1]
#   CC_SERVE_ARGS     more arguments for `serve` (e.g. "--parallel 4")
# Nothing listens beyond 127.0.0.1.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cli="${CC_CLI:-$root/build/app/contextcache-cli}"
model="${CC_MODEL:-builtin:toolcaller}"
dir="${CC_CLUSTER_DIR:-/tmp/contextcache-cluster-${USER:-$(id -u)}}"
lb_port="${CC_LB_PORT:-8080}"
stats_port="${CC_STATS_PORT:-8404}"
replica_port="${CC_REPLICA_PORT:-8081}"
redis_port="${CC_REDIS_PORT:-6390}"
threads="${CC_THREADS:-1}"
n_replicas=3
host=127.0.0.1

die() { echo "cluster: $*" >&2; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits up to $2 tenths of a second for "$1" (a command) to succeed.
wait_for() {
  local i
  for ((i = 0; i < $2; i++)); do
    if eval "$1" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

up() {
  command -v redis-server >/dev/null || die "redis-server is not installed (scripts/deps.sh)"
  command -v haproxy >/dev/null || die "haproxy is not installed (scripts/deps.sh)"
  [ -x "$cli" ] || die "$cli not found: build it first (README) or set CC_CLI"
  mkdir -p "$dir"
  chmod 700 "$dir"

  if ! alive "$dir/redis.pid"; then
    mkdir -p "$dir/redis"
    # Debian's redis-server allocates with the system jemalloc, which hands freed pages back to the
    # kernel after 10 s; then the next fetch's reply buffers are page-faulted afresh (92-150 ms
    # instead of 9-30 ms for a 7.6 MB group after 25 s idle, docs/deploy.md). Keep them.
    MALLOC_CONF="${CC_REDIS_MALLOC_CONF-dirty_decay_ms:-1,muzzy_decay_ms:-1}" redis-server "$root/deploy/redis.conf" --port "$redis_port" --bind "$host" --dir "$dir/redis" \
      >"$dir/redis.log" 2>&1 &
    echo $! >"$dir/redis.pid"
    wait_for "redis-cli -h $host -p $redis_port ping | grep -q PONG" 100 || die "Redis did not start; see $dir/redis.log"
  fi
  echo "redis     redis://$host:$redis_port (pid $(cat "$dir/redis.pid"))"

  local auth=()
  [ -n "${CC_API_KEY:-}" ] && auth=(--api-key "$CC_API_KEY")
  local i port
  for ((i = 1; i <= n_replicas; i++)); do
    port=$((replica_port + i - 1))
    if ! alive "$dir/replica$i.pid"; then
      mkdir -p "$dir/replica$i"
      # shellcheck disable=SC2086 # CC_SERVE_ARGS is split on purpose
      "$cli" --model "$model" --threads "$threads" --cache-dir "$dir/replica$i" \
        --remote "redis://$host:$redis_port" --json \
        serve --host "$host" --port "$port" "${auth[@]}" ${CC_SERVE_ARGS:-} \
        >"$dir/replica$i.json" 2>"$dir/replica$i.log" &
      echo $! >"$dir/replica$i.pid"
    fi
  done
  for ((i = 1; i <= n_replicas; i++)); do
    port=$((replica_port + i - 1))
    wait_for "curl -sf http://$host:$port/health" 1200 || die "replica $i did not answer /health; see $dir/replica$i.log"
    echo "replica$i  http://$host:$port (pid $(cat "$dir/replica$i.pid"))"
  done

  if ! alive "$dir/haproxy.pid"; then
    CC_LB_BIND="$host:$lb_port" CC_STATS_BIND="$host:$stats_port" \
      CC_REPLICA1="$host:$replica_port" CC_REPLICA2="$host:$((replica_port + 1))" CC_REPLICA3="$host:$((replica_port + 2))" \
      haproxy -db -f "$root/deploy/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
    echo $! >"$dir/haproxy.pid"
    wait_for "curl -sf http://$host:$lb_port/health" 100 || die "HAProxy did not answer; see $dir/haproxy.log"
  fi
  echo "haproxy   http://$host:$lb_port/v1 (stats http://$host:$stats_port/, pid $(cat "$dir/haproxy.pid"))"
}

down() {
  local name
  # The balancer first (no new requests), then the replicas, then Redis.
  for name in haproxy replica1 replica2 replica3 redis; do
    if alive "$dir/$name.pid"; then
      local pid
      pid=$(cat "$dir/$name.pid")
      kill -TERM "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
      echo "stopped $name (pid $pid)"
    fi
    rm -f "$dir/$name.pid"
  done
}

status() {
  local name i port rc=0
  for name in redis replica1 replica2 replica3 haproxy; do
    if alive "$dir/$name.pid"; then echo "$name: running (pid $(cat "$dir/$name.pid"))"; else echo "$name: stopped"; rc=3; fi
  done
  for ((i = 1; i <= n_replicas; i++)); do
    port=$((replica_port + i - 1))
    if curl -sf "http://$host:$port/health" >/dev/null 2>&1; then echo "replica$i /health: ok"; else echo "replica$i /health: down"; fi
  done
  if alive "$dir/redis.pid"; then
    echo "redis: $(redis-cli -h $host -p "$redis_port" info memory | grep -E '^used_memory_human' | tr -d '\r'), $(redis-cli -h $host -p "$redis_port" --scan --pattern 'cc:group:*' | wc -l) groups"
  fi
  return $rc
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
