#!/usr/bin/env bash
# Checks that code compiled for one instruction set cannot end up running on a CPU without it.
#
# Files named *_avx2.cpp / *_avx512.cpp / *_amx.cpp are compiled with extra -m flags. An inline
# function or template instantiation (lift's own or the standard library's) emitted by such an
# object is a weak (COMDAT) definition; the linker keeps one copy of each, so if another object
# compiled with other flags defines the same symbol, baseline code may end up calling the
# AVX-512 copy and die with SIGILL on a CPU without AVX-512. Static initializers in those objects
# would run on every CPU. This script fails on any of:
#   * a weak function defined by an object with -m flags and by any object (or static library
#     member on the link lines) compiled with different -m flags;
#   * an object with -m flags that has C++ dynamic initializers (_GLOBAL__sub_I_*);
#   * a source other than *_avx2/*_avx512/*_amx.cpp compiled with -m flags (-march=native, say):
#     baseline code must run on every x86-64.
# Usage: scripts/check_isa_linkage.sh BUILD_DIR   (a configured and built CMake build dir)
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
db="$build/compile_commands.json"
[ -f "$db" ] || {
  echo "check_isa_linkage: $db not found (configure with CMAKE_EXPORT_COMPILE_COMMANDS)" >&2
  exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One line per object: its flag class (the -m flags of its command, sorted; "baseline" when
# none), its path and its source. CMake writes each entry's "directory" and "command" on lines
# of their own.
awk '
  /^ *"directory": / { dir = $0; sub(/^ *"directory": "/, "", dir); sub(/",?$/, "", dir) }
  /^ *"command": / {
    n = split($0, w, /[ "]+/); obj = ""; src = ""; cls = ""; m = 0
    for (i = 1; i <= n; ++i) {
      if (w[i] == "-o" && i < n) obj = w[i + 1]
      else if (w[i] == "-c" && i < n) src = w[i + 1]
      else if (w[i] ~ /^-m[a-z0-9]/) flags[++m] = w[i]
    }
    for (i = 2; i <= m; ++i) {  # insertion sort: the class must not depend on flag order
      x = flags[i]
      for (j = i - 1; j >= 1 && flags[j] > x; --j) flags[j + 1] = flags[j]
      flags[j + 1] = x
    }
    for (i = 1; i <= m; ++i) cls = cls (i > 1 ? "," : "") flags[i]
    if (cls == "") cls = "baseline"
    if (obj !~ /^\//) obj = dir "/" obj
    # Precompiled headers (cmake_pch.hxx.gch / .pch) are compiler state, never linked.
    if (obj != "" && obj !~ /\.(gch|pch)$/) print cls "\t" obj "\t" src
  }' "$db" >"$tmp/objects"
# Static libraries on the link lines that are not built here (e.g. libgtest.a): baseline code
# whose weak definitions compete with ours.
grep -o '/[^ $]*\.a\b' "$build/build.ninja" 2>/dev/null | grep -v "^$build/" | sort -u |
  while read -r lib; do [ -f "$lib" ] && printf 'baseline\t%s\t%s\n' "$lib" "$lib"; done >>"$tmp/objects" || true

n_isa=0 n_missing=0 bad_init=0 bad_flags=0
: >"$tmp/weak"
while IFS=$'\t' read -r cls obj src; do
  case "$src" in
    *_avx2.cpp | *_avx512.cpp | *_amx.cpp) ;;
    *)
      if [ "$cls" != baseline ]; then
        echo "FAIL: $src is baseline code but compiled with $cls"
        bad_flags=$((bad_flags + 1))
      fi
      ;;
  esac
  if [ ! -f "$obj" ]; then
    n_missing=$((n_missing + 1))
    continue
  fi
  [ "$cls" != baseline ] && n_isa=$((n_isa + 1))
  # Defined (Ndx not UND) weak FUNC symbols; for an archive, readelf lists every member.
  readelf -sW "$obj" 2>/dev/null |
    awk -v cls="$cls" -v obj="$obj" '$4 == "FUNC" && $5 == "WEAK" && $7 != "UND" && NF >= 8 {
      print $8 "\t" cls "\t" obj }' >>"$tmp/weak"
  if [ "$cls" != baseline ] && readelf -sW "$obj" | grep -q ' _GLOBAL__sub_I_'; then
    echo "FAIL: $obj ($cls) has dynamic initializers, which run on every CPU"
    bad_init=$((bad_init + 1))
  fi
done <"$tmp/objects"
if [ "$n_isa" -eq 0 ]; then
  echo "check_isa_linkage: no objects with -m flags found under $build (not built?)" >&2
  exit 2
fi

# Symbols defined under more than one flag class, at least one of them not baseline.
sort -u "$tmp/weak" | awk -F'\t' '
  { key = $1 "\t" $2; if (!(key in seen)) { seen[key] = 1; n[$1]++ } objs[$1] = objs[$1] "\n    " $2 ": " $3
    if ($2 != "baseline") isa[$1] = 1 }
  END { for (s in n) if (n[s] > 1 && (s in isa)) print s objs[s] }' >"$tmp/shared"
n_shared=$(grep -vc '^    ' "$tmp/shared" || true)
if [ "$n_shared" -gt 0 ]; then
  echo "FAIL: $n_shared weak function(s) defined both with and without (or with other) ISA flags:"
  # Demangle the symbol lines only (object paths stay as they are).
  while IFS= read -r line; do
    case "$line" in
      "    "*) echo "$line" ;;
      *) echo "  $(echo "$line" | c++filt)  [$line]" ;;
    esac
  done <"$tmp/shared"
fi
if [ "$n_shared" -gt 0 ] || [ "$bad_init" -gt 0 ] || [ "$bad_flags" -gt 0 ]; then exit 1; fi
echo "check_isa_linkage: OK: $n_isa objects with ISA flags share no weak function with other" \
  "flag sets and have no dynamic initializers; all other sources are baseline ($(wc -l <"$tmp/objects") objects and libraries," \
  "$n_missing not built)"
