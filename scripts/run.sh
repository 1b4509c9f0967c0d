#!/usr/bin/env bash
# Sets up, builds lift (Release) and runs its main job: the OpenAI-compatible server on the
# default model (../shared/models/stories260K), on http://127.0.0.1:8080. Extra arguments go
# to `lift serve` (e.g. --port 9000); -m/--model MODEL serves MODEL instead of the default.
set -euo pipefail
cd "$(dirname "$0")/.."
model_given=0
for arg in "$@"; do
  case "$arg" in
    -m | --model | -m?* | --model=*) model_given=1 ;;
  esac
done
default_model=()
[ "$model_given" -eq 1 ] || default_model=(-m ../shared/models/stories260K/stories260K.gguf)
bash scripts/bootstrap.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIFT_TESTS=OFF \
  -DLIFT_BENCH=OFF >/dev/null
ninja -C build/release lift
exec build/release/lift serve "${default_model[@]}" "$@"
