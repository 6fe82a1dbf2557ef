#!/usr/bin/env bash
# One command: install what is missing, build, and start the desktop app on the built-in model.
# Extra arguments are passed to the app (e.g. --screenshot out.png).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j "$(nproc)" --target contextcache contextcache-cli
exec "$BUILD/app/contextcache" "$@"
