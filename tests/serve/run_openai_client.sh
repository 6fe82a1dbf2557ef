#!/usr/bin/env bash
# ctest wrapper for tests/serve/openai_client: installs the official `openai` npm package (the
# version package-lock.json pins) into the build directory, starts `contextcache-cli serve` on an
# ephemeral loopback port, and runs openai_client_test.mjs against it.
# Exit 77 (ctest SKIP) with a reason when node/npm are missing or the npm registry cannot be reached.
# usage: run_openai_client.sh CLI WORK_DIR SOURCE_DIR
set -uo pipefail
cli=$1 work=$2 src=$3
here="$src/tests/serve/openai_client"
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed (apt-get install nodejs npm)"; exit 77; }
command -v npm >/dev/null 2>&1 || { echo "SKIP: npm is not installed (apt-get install npm)"; exit 77; }
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/openai_client_test.mjs" "$work/"
cd "$work" || exit 1
if [ ! -f node_modules/openai/package.json ]; then
  if ! timeout 180 npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1; then
    echo "SKIP: npm could not install the openai package (registry unreachable?); see $work/npm.log"
    tail -5 npm.log
    exit 77
  fi
fi

rm -rf cache && mkdir -p cache
key="sk-contextcache-test"
# The trained toolcaller model: real Qwen3 tokens and the tool-call frame; greedy, so repeatable.
"$cli" --model "$src/resources/models/toolcaller" --threads 2 --cache-dir "$work/cache" --json \
  serve --port 0 --api-key "$key" --max-queue 4 --request-timeout-s 120 >server.json 2>server.log &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' EXIT
port=""
for _ in $(seq 1 600); do  # up to 60 s for the model to load
  port=$(node -e 'try{console.log(JSON.parse(require("fs").readFileSync("server.json","utf8")).port)}catch(e){}' 2>/dev/null)
  [ -n "$port" ] && break
  kill -0 $server 2>/dev/null || { echo "FAIL: the server exited"; cat server.log; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: the server did not report its port"; cat server.log; exit 1; }
timeout 300 node openai_client_test.mjs "http://127.0.0.1:$port/v1" "$key" "$src/resources/toolsets/tools_5.json"
rc=$?
[ $rc -eq 0 ] || { echo "--- server log"; cat server.log; }
exit $rc
