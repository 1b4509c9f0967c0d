#!/usr/bin/env bash
# Builds lift and runs every test, in timed stages:
#   1. g++ Release build, warnings as errors, every test under ctest -j2
#   2. black-box HTTP tests of `lift serve` (stage 1's binary) with the OpenAI Node SDK
#   3. clang-14 build with AddressSanitizer + UndefinedBehaviorSanitizer, library unit tests
#   4. libFuzzer on the GGUF reader for 60 s
# Fails if any stage fails or the whole run passes 20 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${LIFT_JOBS:-2}
budget_s=1200
t_start=$(date +%s)
stage_start=$t_start
stage() {
  local now; now=$(date +%s)
  [ -n "${stage_name:-}" ] && printf '== stage "%s" took %ds\n' "$stage_name" $((now - stage_start))
  stage_name=$1; stage_start=$now
  [ -n "$stage_name" ] && printf '\n== stage "%s"\n' "$stage_name"
  return 0
}

stage "bootstrap"
bash scripts/bootstrap.sh

stage "g++ release build + all tests"
cmake -S . -B build/ci-gcc -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ \
  -DLIFT_WERROR=ON >/dev/null
ninja -C build/ci-gcc -j "$jobs"
ctest --test-dir build/ci-gcc -j "$jobs" --output-on-failure --timeout 900

stage "forced kernel paths: scalar, avx2 and avx512"
# Stage 1 ran the best path this CPU has (amx where it has AMX tiles); the other paths must pass
# the same checks. A path above the CPU's best runs as its best.
for isa in scalar avx2 avx512; do
  echo "LIFT_ISA=$isa"
  LIFT_ISA=$isa build/ci-gcc/lift_tests --gtest_brief=1 \
    --gtest_filter='Kernel*:KvTypes/Attention*:Models/ForwardExactness*:LlamaCppReference*:E2EGolden*:PagedKv*:E2EEngineKinds*'
done

stage "HTTP tests (OpenAI Node SDK)"
# Starts `lift serve` instances on loopback ports and runs tests/http/*.test.mjs under node --test.
LIFT_BIN=build/ci-gcc/lift bash scripts/http_tests.sh

stage "clang-14 asan+ubsan build + library unit tests"
# One clang build serves both the sanitizer tests and the fuzzer (the library carries the
# fuzzer's coverage instrumentation; the sanitizer runtimes stub it out in the tests).
cmake -S . -B build/ci-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DLIFT_SANITIZE=ON -DLIFT_FUZZ=ON -DLIFT_WERROR=ON \
  -DLIFT_BENCH=OFF >/dev/null
ninja -C build/ci-asan -j "$jobs" lift_tests fuzz_gguf
# The sanitizer run covers the library's unit tests; slow end-to-end model runs are left to
# stage 1 (their names start with E2E).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build/ci-asan/lift_tests --gtest_filter='-E2E*:*/E2E*' --gtest_brief=1

stage "libFuzzer: GGUF reader, 60 s"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
bash scripts/make_fuzz_seeds.sh "$corpus"
build/ci-asan/fuzz_gguf -max_total_time=60 -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1 "$corpus" 2>&1 | tail -n 15

stage ""
total=$(( $(date +%s) - t_start ))
echo "== all stages passed in ${total}s"
if [ "$total" -gt "$budget_s" ]; then
  echo "FAIL: the test run took ${total}s, over the ${budget_s}s budget"
  exit 1
fi
