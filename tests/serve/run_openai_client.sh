#!/usr/bin/env bash
# ctest wrapper for tests/serve/openai_client: installs the official `openai` npm package (the
# version package-lock.json pins) into the build directory, starts `contextcache-cli serve` on an
# ephemeral loopback port, and runs openai_client_test.mjs against it.
# It fails (never skips) when node/npm are missing or npm cannot install the pinned package: CI
# installs both (scripts/deps.sh) and reaches the npm registry, so this test always runs there.
# usage: run_openai_client.sh CLI WORK_DIR SOURCE_DIR
set -uo pipefail
cli=$1 work=$2 src=$3
here="$src/tests/serve/openai_client"
command -v node >/dev/null 2>&1 || { echo "FAIL: node is not installed (bash scripts/deps.sh installs nodejs and npm)"; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "FAIL: npm is not installed (bash scripts/deps.sh installs nodejs and npm)"; exit 1; }
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/openai_client_test.mjs" "$work/"
cd "$work" || exit 1
# npm ci installs exactly what the lockfile pins, into WORK_DIR/node_modules (the build tree, never
# the source tree); it is run again whenever the lockfile differs from the one last installed.
if [ ! -f node_modules/openai/package.json ] || ! cmp -s package-lock.json node_modules/.cc-installed-lock.json; then
  if ! timeout 300 npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1; then
    echo "FAIL: npm ci could not install the pinned openai package (registry unreachable?); $work/npm.log:"
    tail -20 npm.log
    exit 1
  fi
  cp package-lock.json node_modules/.cc-installed-lock.json
fi
echo "node $(node --version), npm $(npm --version), openai $(node -p 'require("./node_modules/openai/package.json").version')"

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
