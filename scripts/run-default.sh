#!/usr/bin/env bash
# The main job on an embedded default: build the release binary, generate a tiny model if no model is
# given, and run it. Usage: scripts/run-default.sh [MODEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
scripts/install-deps.sh --build-only
cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS" --target dsv4
DSV4=build/release/tools/dsv4/dsv4

MODEL=${1:-}
if [ -z "$MODEL" ]; then
  MODEL=build/models/tiny
  if [ ! -f "$MODEL/config.json" ]; then
    echo "== no model given: generating a tiny one in $MODEL"
    "$DSV4" make-tiny "$MODEL" --preset tiny --seed 1
  fi
fi
echo "== dsv4 inspect $MODEL"
"$DSV4" inspect "$MODEL"
echo "== dsv4 generate (greedy, 24 tokens; a random tiny model speaks gibberish)"
"$DSV4" generate --model "$MODEL" --prompt "The capital of France is" -n 24
