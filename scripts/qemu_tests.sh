#!/usr/bin/env bash
# Proves that one lift binary runs on every x86-64 it claims: runs a built lift and lift_tests
# under qemu-user on emulated CPUs that lack what the build machine has. qemu 7.2's CPU
# emulation knows no AVX-512 at all, so any AVX-512 instruction outside the kernels that
# dispatch checked for is an illegal instruction there (SIGILL), which fails this script:
#   * Haswell (AVX2, FMA, F16C, BMI2; no AVX-512): the runtime must pick the avx2 kernels;
#   * Nehalem (SSE4.2; no AVX at all): the runtime must pick the scalar kernels.
# For each: `lift generate` (stories260K, F32 and Q8_0 weights) reports the Isa it picked and
# must give the same tokens as a native run forced onto that Isa (LIFT_ISA), then kernel,
# golden-model and engine tests run emulated.
# First scripts/check_isa_linkage.sh checks the objects for weak functions shared across flag
# sets (what would let baseline code call an AVX-512 copy of an inline function).
# Usage: scripts/qemu_tests.sh [BUILD_DIR]   (default build/ci-gcc; needs lift and lift_tests)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/ci-gcc}
models=(../shared/models/stories260K/stories260K.gguf
  ../shared/models/quantized/stories260K-ffn192-Q8_0.gguf)
command -v qemu-x86_64 >/dev/null || {
  echo "qemu_tests: qemu-x86_64 not found (Debian package qemu-user, see scripts/bootstrap.sh)" >&2
  exit 1
}
for f in "$build/lift" "$build/lift_tests"; do
  [ -x "$f" ] || {
    echo "qemu_tests: $f not built" >&2
    exit 1
  }
done

bash scripts/check_isa_linkage.sh "$build"

# Tests that exercise every kernel family and the model/engine on top of them, cheap enough
# for emulation (qemu runs the AVX2 kernels some 1000x slower than the hardware, the scalar
# ones some 100x): the unit tests of the kernels (each iterates over every Isa up to the
# emulated CPU's best), the exactness of stories260K against the reference backend (F32, Q8_0
# and Q4_0 weights), its seeded sampling, engine tests with stop strings and parallel samples;
# on the faster scalar path also the golden greedy record (with and without KV cache).
filter='KernelIsa.*:KernelFp16.*:KernelDequant.*:KernelQuantize.*:KernelActQuant.*'
filter+=':KernelMatmul.RejectsUnsupportedPairs:KernelMatmul.WritesOnlyItsRange'
filter+=':KernelMatmul.MatchesReferencePrefillShape:KernelPanel.*:KernelAmx.*'
filter+=':SoftmaxExp.SpecialValues:SoftmaxExp.EveryIsaGivesTheSameBits:Swiglu.*:RmsNorm.*'
filter+=':KvTypes/Attention.TileOfQueriesEqualsEachAloneBitwise/*'
filter+=':KvTypes/Attention.BlockPlacementDoesNotChangeBits/*'
filter+=':Models/ForwardExactness.OptimizedMatchesReference/0'
filter+=':Models/ForwardExactness.OptimizedMatchesReference/2'
filter+=':Models/ForwardExactness.OptimizedMatchesReference/4'
filter+=':E2EGolden.SeededSamplingRepeatsExactly:E2EEngine.StopStringsSplitAcrossTokens'
filter+=':E2EEngine.ParallelSamplesShareThePromptAndDiffer'
scalar_extra=':E2EGolden.PromptedGreedyMatchesRecord'

# "model:features:isa:extra tests". Features TCG cannot emulate are switched off, which keeps
# qemu quiet.
cpus=(
  "Haswell-v4:-pcid,-x2apic,-tsc-deadline,-invpcid,-spec-ctrl:avx2:"
  "Nehalem-v1::scalar:$scalar_extra"
)

# Runs a command under qemu with the given -cpu; a guest SIGILL kills qemu with SIGILL too.
emulate() {
  local cpu=$1
  shift
  local rc=0
  qemu-x86_64 -cpu "$cpu" "$@" || rc=$?
  if [ "$rc" -eq 132 ]; then
    echo "FAIL: illegal instruction (SIGILL) under qemu -cpu $cpu: $*" >&2
  fi
  return "$rc"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen_args=(generate -p "Once upon a time" -n 24 --temp 0 --ids)
for entry in "${cpus[@]}"; do
  IFS=: read -r name features want extra <<<"$entry"
  cpu=$name${features:+,$features}
  t0=$(date +%s)
  echo "-- qemu -cpu $name: expecting the $want kernels"
  for model in "${models[@]}"; do
    emulate "$cpu" "$build/lift" "${gen_args[@]}" -m "$model" >"$tmp/emulated" 2>"$tmp/stderr" || {
      cat "$tmp/stderr" >&2
      exit 1
    }
    grep '^lift: backend' "$tmp/stderr" | sed "s|^|   $(basename "$model"): |"
    if ! grep -q "^lift: backend .*, isa $want," "$tmp/stderr"; then
      echo "FAIL: under -cpu $name lift did not pick isa $want" >&2
      exit 1
    fi
    LIFT_ISA=$want "$build/lift" "${gen_args[@]}" -m "$model" >"$tmp/native" 2>/dev/null
    if ! cmp -s "$tmp/native" "$tmp/emulated"; then
      echo "FAIL: under -cpu $name lift generated other tokens than natively with LIFT_ISA=$want" >&2
      diff "$tmp/native" "$tmp/emulated" >&2 || true
      exit 1
    fi
    echo "   $(basename "$model"): the same $(wc -w <"$tmp/emulated") token ids as natively" \
      "with LIFT_ISA=$want"
  done
  rc=0
  emulate "$cpu" "$build/lift_tests" --gtest_brief=1 \
    --gtest_filter="${LIFT_QEMU_FILTER:-$filter$extra}" >"$tmp/tests" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    sed 's/^/   /' "$tmp/tests"
    exit 1
  fi
  grep -E '^\[ *(=+|PASSED|SKIPPED) *\]' "$tmp/tests" | sed 's/^/   /'
  echo "   -cpu $name: $(($(date +%s) - t0))s"
done
echo "qemu_tests: OK: no illegal instruction; avx2 without AVX-512, scalar without AVX"
