#!/usr/bin/env bash
# Builds lift and runs every test, in timed stages:
#   1. g++ Release build, warnings as errors, every test under ctest -j2; then its tests on
#      every kernel path (LIFT_ISA) and on emulated CPUs without AVX-512 / AVX (qemu-user)
#   2. black-box HTTP tests of `lift serve` (stage 1's binary) with the OpenAI Node SDK; two
#      replicas behind nginx (deploy/nginx): session affinity, failover, drain on SIGTERM;
#      tensor parallelism (mpirun, --tp 2 and 4) bitwise against one rank
#   3. clang-14 build with AddressSanitizer + UndefinedBehaviorSanitizer, library unit tests
#   4. libFuzzer, two targets at a time, 6-18 s each (the list below): the GGUF reader, the
#      HTTP request parser, the completion, chat and tokenize body parsers, the chat-template
#      interpreter, the tokenizer (differential against a reference encoder), the detokenizer
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
# Stage 1 ran the best path this CPU has (amx where it has AMX tiles); the paths below it must
# pass the same checks (one above it would only run as the best again).
best_isa=$(build/ci-gcc/lift --version | sed -n 's/.*best kernel path on this CPU: \([a-z0-9]*\).*/\1/p')
echo "best kernel path: ${best_isa:?lift --version names no kernel path}"
# Two shards at once, one per core (the tests run one thread each).
for isa in scalar avx2 avx512; do
  [ "$isa" = "$best_isa" ] && break
  echo "LIFT_ISA=$isa"
  isa_pids=()
  for shard in 0 1; do
    LIFT_ISA=$isa GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$shard build/ci-gcc/lift_tests \
      --gtest_brief=1 \
      --gtest_filter='Kernel*:KvTypes/Attention*:Models/ForwardExactness*:LlamaCppReference*:E2EGolden*:PagedKv*:E2EEngineKinds*' \
      >"build/ci-gcc/isa-$isa-$shard.log" 2>&1 &
    isa_pids+=($!)
  done
  isa_failed=0
  for i in 0 1; do
    wait "${isa_pids[$i]}" || isa_failed=1
    tail -n 2 "build/ci-gcc/isa-$isa-$i.log"
  done
  if [ "$isa_failed" != 0 ]; then
    cat "build/ci-gcc/isa-$isa-0.log" "build/ci-gcc/isa-$isa-1.log"
    exit 1
  fi
done

stage "one binary on every x86-64: linkage check, qemu without AVX-512 and without AVX"
# Stage 1's binaries under qemu-user: -cpu Haswell (AVX2, no AVX-512) must pick the avx2
# kernels, -cpu Nehalem (SSE4.2 only) the scalar ones, and neither may hit an illegal
# instruction; first a check that no object built with -m flags shares a weak function with
# other code (scripts/check_isa_linkage.sh).
bash scripts/qemu_tests.sh build/ci-gcc

stage "HTTP tests (OpenAI Node SDK)"
# Starts `lift serve` instances on loopback ports and runs tests/http/*.test.mjs under node --test.
LIFT_BIN=build/ci-gcc/lift bash scripts/http_tests.sh

stage "replicas behind nginx: affinity, failover, drain"
# Two `lift serve` replicas and nginx with deploy/nginx/lift-replicas.conf.in, all on loopback.
python3 tests/deploy/replicas_test.py build/ci-gcc/lift

stage "tensor parallelism over MPI: 2 and 4 ranks bitwise one rank"
# `mpirun -np N lift serve --tp N` against one rank on every archs and quantized model.
python3 tests/parallel/tp_test.py build/ci-gcc/lift

stage "clang-14 asan+ubsan build + library unit tests"
# The sanitizer build leaves out the files named *_e2e_test.cpp (CMakeLists.txt), so every E2E*
# suite must live in such a file, and such files hold nothing else.
misplaced=$({
  grep -rlE '^(TEST|TEST_F|TEST_P)\(E2E' tests --include='*_test.cpp' | grep -v '_e2e_test\.cpp$'
  grep -rLE '^(TEST|TEST_F|TEST_P)\(E2E' tests --include='*_e2e_test.cpp'
  grep -rlE '^(TEST|TEST_F|TEST_P)\([^E]' tests --include='*_e2e_test.cpp'
} || true)
if [ -n "$misplaced" ]; then
  echo "E2E suites and *_e2e_test.cpp files must match; check:" $misplaced
  exit 1
fi
# One clang build serves both the sanitizer tests and the fuzzer (the library carries the
# fuzzer's coverage instrumentation; the sanitizer runtimes stub it out in the tests).
# Line tables are all the sanitizers' stack traces need; full debug info only costs build time.
# -O1, the sanitizers' usual level, compiles the kernels' unrolled templates a third faster than
# -O2 (the request glue goes at -O0: CMakeLists.txt).
cmake -S . -B build/ci-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-14 -DLIFT_SANITIZE=ON -DLIFT_FUZZ=ON -DLIFT_WERROR=ON \
  -DLIFT_BENCH=OFF >/dev/null
# `lift` itself is built too (the tests here do not run it): it is clang's only build of src/cli.
ninja -C build/ci-asan -j "$jobs" lift_tests fuzz_gguf lift
# The sanitizer build holds the library's unit tests; slow end-to-end model runs (suites E2E*,
# files *_e2e_test.cpp) are not built here and run in stage 1.
# Two shards at once, one per core. Left out besides: exhaustive bitwise-invariance sweeps that
# stage 1 and the forced-ISA stage run on every kernel path (they repeat, under ASan, code
# the smaller tests of the same kernels already cover).
asan_filter='-KvTypes/Attention.AnyTileAnyIsaSameBits/*'
asan_filter+=':SamplerTopK.NeverEmitsTokensOutsideTopK:SamplerTopP.LargeNucleusOverPermutedVocab'
# Brute force over the 128k-token Llama 3 vocabulary; the small-vocabulary brute-force walks
# cover the same matcher code under the sanitizers.
asan_filter+=':StructuredMatcher.Llama3VocabMasksEqualBruteForce'
# Statistical tests (many thousands of sampled steps; their engine paths are covered by the
# bitwise spec-decode tests here) and sweeps whose code smaller tests of it cover: the
# tokenizer's random-text differential (fuzz_tokenizer runs the same comparison), softmax's
# exp over every float range, the long-context prompt-tile attention runs.
asan_filter+=':SpecEngine/NextTokenDistribution.*:SpecEngine.MeanAcceptedLengthFollowsTheAcceptanceRate'
asan_filter+=':TokenizerBpe.MatchesTextPairReference:SoftmaxExp.WithinOneUlpOfExp'
asan_filter+=':KvTypes/Attention.LargeMovingScoresTile/*:KvTypes/Attention.LargeMovingScoresDecode/*'
# Sweeps of speculative decoding over every K and proposer: one case of each family stays
# (preemption, aborts, sliding windows, parallel samples), the sweep runs in stage 1.
asan_filter+=':SpecEdge.SampledNgramIsBitwisePlainForEveryKAloneBatchedAndPreempted'
asan_filter+=':DraftEngine.GreedyEqualsPlainForEveryKAloneAndBatched'
asan_filter+=':SpecEngine.GreedyEqualsPlainForEveryProposerAndK'
asan_pids=()
for shard in 0 1; do
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 GTEST_TOTAL_SHARDS=2 \
    GTEST_SHARD_INDEX=$shard build/ci-asan/lift_tests --gtest_filter="$asan_filter" \
    --gtest_brief=1 >"build/ci-asan/shard$shard.log" 2>&1 &
  asan_pids+=($!)
done
asan_failed=0
for i in 0 1; do
  wait "${asan_pids[$i]}" || asan_failed=1
  tail -n 3 "build/ci-asan/shard$i.log"
done
if [ "$asan_failed" != 0 ]; then
  cat build/ci-asan/shard0.log build/ci-asan/shard1.log
  exit 1
fi

stage "libFuzzer: GGUF, HTTP and API request parsers, chat templates, tokenizer, detokenizer"
# Every parser a client or a model file reaches, each for a fixed time, $jobs at a time (a
# fuzzer is one thread). The text targets read the shared vocabularies (../shared/models).
# A crash's input is kept in build/ci-asan/fuzz-artifacts/.
fuzzers=(  # target seconds max_len
  "gguf 18 65536"
  "http_request 6 8192"
  "completion_request 8 16384"
  "chat_request 12 16384"
  "tokenize_request 6 16384"
  "chat_template 14 8192"
  "tokenizer 14 1024"
  "stream_decoder 6 4096"
)
targets=()
for f in "${fuzzers[@]}"; do targets+=("fuzz_${f%% *}"); done
ninja -C build/ci-asan -j "$jobs" "${targets[@]}"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
bash scripts/make_fuzz_seeds.sh "$corpus"
artifacts="$root/build/ci-asan/fuzz-artifacts"
mkdir -p "$artifacts"
for f in "${fuzzers[@]}"; do
  read -r name secs max_len <<<"$f"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  (
    if build/ci-asan/fuzz_"$name" -max_total_time="$secs" -max_len="$max_len" -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$name-" "$corpus/$name" \
      >"$corpus/$name.log" 2>&1; then
      echo 0 >"$corpus/$name.rc"
    else
      echo $? >"$corpus/$name.rc"
    fi
  ) &
done
wait
fuzz_failed=0
for f in "${fuzzers[@]}"; do
  read -r name secs max_len <<<"$f"
  rc=$(cat "$corpus/$name.rc")
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$corpus/$name.log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$corpus/$name.log" | tail -n 1 || true)
  printf 'fuzz_%-20s %3ss  %9s runs  %-10s exit %s\n' "$name" "$secs" "${runs:-?}" "$cov" "$rc"
  if [ "$rc" != 0 ]; then
    fuzz_failed=1
    tail -n 60 "$corpus/$name.log"
  fi
done
[ "$fuzz_failed" = 0 ]

stage ""
total=$(( $(date +%s) - t_start ))
echo "== all stages passed in ${total}s"
if [ "$total" -gt "$budget_s" ]; then
  echo "FAIL: the test run took ${total}s, over the ${budget_s}s budget"
  exit 1
fi
