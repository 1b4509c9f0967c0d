#!/usr/bin/env bash
# Writes a seed corpus for the fuzz_gguf libFuzzer target into OUTDIR (files of at most 64 KiB):
# the headers of the shared GGUF models, shrunken valid copies of them, and tiny files from
# lift's own writer. Builds the small generator fuzz/make_fuzz_seeds.cpp with $CXX (default c++).
# Usage: scripts/make_fuzz_seeds.sh OUTDIR [MODELS_DIR]   (MODELS_DIR defaults to ../shared/models)
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUTDIR [MODELS_DIR]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$1"
models="${2:-$root/../shared/models}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"${CXX:-c++}" -std=c++20 -O1 -I"$root/src" "$root/fuzz/make_fuzz_seeds.cpp" \
  "$root/src/gguf/gguf_file.cpp" "$root/src/gguf/gguf_writer.cpp" "$root/src/gguf/ggml_type.cpp" \
  -o "$tmp/make_fuzz_seeds"
"$tmp/make_fuzz_seeds" "$out" "$models"
