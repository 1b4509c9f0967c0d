#!/usr/bin/env bash
# Writes the seed corpora of the libFuzzer targets into OUTDIR, one folder per target (named
# after it, without "fuzz_"):
#   gguf                 files of at most 64 KiB: the headers of the shared GGUF models,
#                        shrunken valid copies of them, tiny files from lift's writer
#                        (fuzz/make_fuzz_seeds.cpp);
#   completion_request, chat_request, tokenize_request
#                        request bodies as the HTTP tests send them, their error cases and
#                        hostile bodies (fuzz/make_text_seeds.cpp, as the three below);
#   chat_template, tokenizer, stream_decoder, http_request
#                        conversations in every chat format, llama.cpp's tokenizer test texts
#                        and ids, the stories260K reference runs, HTTP/1.1 requests.
# Builds the two small generators with $CXX (default c++).
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
cxx="${CXX:-c++}"
"$cxx" -std=c++20 -O1 -I"$root/src" "$root/fuzz/make_fuzz_seeds.cpp" \
  "$root/src/gguf/gguf_file.cpp" "$root/src/gguf/gguf_writer.cpp" "$root/src/gguf/ggml_type.cpp" \
  -o "$tmp/make_fuzz_seeds" &
gguf_build=$!
"$cxx" -std=c++20 -O1 -I"$root/fuzz" "$root/fuzz/make_text_seeds.cpp" -o "$tmp/make_text_seeds"
wait "$gguf_build"
"$tmp/make_fuzz_seeds" "$out/gguf" "$models"
"$tmp/make_text_seeds" "$out" "$models"
# fuzz_chat_template's template-source inputs (first byte 0x80): every test template.
mkdir -p "$out/chat_template"
for t in "$root"/tests/template/templates/*.jinja; do
  { printf '\x80'; cat "$t"; } >"$out/chat_template/source-$(basename "$t")"
done
