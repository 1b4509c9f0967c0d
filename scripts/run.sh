#!/usr/bin/env bash
# Sets up, builds lift (Release) and runs its main job: the OpenAI-compatible server on the
# default model (../shared/models/stories260K), on http://127.0.0.1:8080. Extra arguments go
# to `lift serve` (e.g. --port 9000, -m MODEL).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIFT_TESTS=OFF \
  -DLIFT_BENCH=OFF >/dev/null
ninja -C build/release lift
exec build/release/lift serve -m ../shared/models/stories260K/stories260K.gguf "$@"
