#!/usr/bin/env bash
# Sets up, builds lift (Release) and runs its main job on the default model
# (../shared/models/stories260K). Extra arguments go to `lift generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIFT_TESTS=OFF >/dev/null
ninja -C build/release lift
model=../shared/models/stories260K/stories260K.gguf
if [ $# -eq 0 ]; then
  set -- -p "Once upon a time" -n 128
fi
exec build/release/lift generate -m "$model" "$@"
