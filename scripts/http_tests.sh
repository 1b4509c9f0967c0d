#!/usr/bin/env bash
# Black-box HTTP tests of `lift serve` with the OpenAI Node SDK, Vercel's AI SDK and LangChain (tests/http).
#
#   LIFT_BIN=build/ci-gcc/lift bash scripts/http_tests.sh [test files...]
#
# 1. installs the pinned node packages into tests/http/node_modules with `npm ci` (skipped when
#    they are already installed from the same package-lock.json);
# 2. smoke test: starts `lift serve` on stories260K on a free loopback port, waits for
#    GET /health, then sends SIGTERM and checks that it exits 0;
# 3. runs `node --test` on tests/http/*.test.mjs. Each test file starts the servers it needs
#    (stories260K, --api-key, --max-seqs 2 --max-waiting 2, llama-2-tiny-random) on free
#    127.0.0.1 ports and stops them; every server is in this script's process group for the
#    test run, and the trap kills that group whatever happens.
# Environment: LIFT_BIN (default build/ci-gcc/lift), LIFT_MODELS_DIR (default ../shared/models),
# LIFT_HTTP_TIMEOUT (seconds for the whole node run, default 300).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export LIFT_BIN=$(realpath -m "${LIFT_BIN:-build/ci-gcc/lift}")
export LIFT_MODELS_DIR=$(realpath -m "${LIFT_MODELS_DIR:-$root/../shared/models}")
timeout_s=${LIFT_HTTP_TIMEOUT:-300}
stories="$LIFT_MODELS_DIR/stories260K/stories260K.gguf"

die() { echo "http_tests: $*" >&2; exit 1; }
[ -x "$LIFT_BIN" ] || die "no lift binary at $LIFT_BIN (build it, or set LIFT_BIN)"
[ -f "$stories" ] || die "no model at $stories (set LIFT_MODELS_DIR)"
command -v node >/dev/null || die "node is missing (scripts/bootstrap.sh installs nodejs)"
command -v npm >/dev/null || die "npm is missing (scripts/bootstrap.sh installs npm)"
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>18||(a===18&&b>=19)?0:1)' \
  || die "node $(node --version) is too old: the tests need node >= 18.19"
"$LIFT_BIN" serve --help >/dev/null 2>&1 || die "$LIFT_BIN has no working 'serve' subcommand"

# --- node packages -------------------------------------------------------------------------
stamp=tests/http/node_modules/.lift-installed
want=$(cat tests/http/package.json tests/http/package-lock.json | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f tests/http/node_modules/openai/package.json ]; then
  echo "http_tests: node packages up to date (openai $(node -p 'require("./tests/http/node_modules/openai/package.json").version'))"
else
  echo "http_tests: npm ci in tests/http"
  (cd tests/http && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi

# --- cleanup: every server started below is killed on exit -----------------------------------
smoke_pid=""
run_pid=""
log_dir=$(mktemp -d)
cleanup() {
  local rc=$?
  [ -n "$smoke_pid" ] && kill -KILL "$smoke_pid" 2>/dev/null || true
  # `timeout` leads its own process group: node, its per-file test processes and their servers.
  [ -n "$run_pid" ] && kill -KILL -- "-$run_pid" 2>/dev/null || true
  rm -rf "$log_dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- smoke: start, /health, SIGTERM -> exit 0 ------------------------------------------------
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
"$LIFT_BIN" serve -m "$stories" --host 127.0.0.1 --port "$port" -t 2 >"$log_dir/smoke.log" 2>&1 &
smoke_pid=$!
ready=0
for _ in $(seq 1 300); do  # ≤ 30 s
  if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/health" 2>/dev/null \
     || node -e 'fetch(process.argv[1],{signal:AbortSignal.timeout(2000)}).then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))' \
          "http://127.0.0.1:$port/health" 2>/dev/null; then
    ready=1; break
  fi
  kill -0 "$smoke_pid" 2>/dev/null || break
  sleep 0.1
done
if [ "$ready" != 1 ]; then
  tail -n 30 "$log_dir/smoke.log" >&2
  die "lift serve did not answer GET /health on 127.0.0.1:$port within 30 s"
fi
echo "http_tests: lift serve up on 127.0.0.1:$port; sending SIGTERM"
kill -TERM "$smoke_pid"
smoke_rc=""
for _ in $(seq 1 100); do  # ≤ 10 s
  if ! kill -0 "$smoke_pid" 2>/dev/null; then
    set +e; wait "$smoke_pid"; smoke_rc=$?; set -e
    break
  fi
  sleep 0.1
done
smoke_pid_was=$smoke_pid
smoke_pid=""
if [ -z "$smoke_rc" ]; then
  kill -KILL "$smoke_pid_was" 2>/dev/null || true
  tail -n 30 "$log_dir/smoke.log" >&2
  die "lift serve still running 10 s after SIGTERM"
fi
[ "$smoke_rc" = 0 ] || { tail -n 30 "$log_dir/smoke.log" >&2; die "lift serve exited $smoke_rc after SIGTERM (want 0)"; }
echo "http_tests: SIGTERM -> exit 0"

# --- the tests -------------------------------------------------------------------------------
if [ $# -gt 0 ]; then files=("$@"); else files=(tests/http/*.test.mjs); fi
node_args=(--test --test-reporter=spec)
# One test file at a time where node supports it (>= 20.10): timing checks (503 at once,
# aborts within ~1 s) should not compete with another file's servers for 2 cores.
node --test-concurrency=1 -e 0 >/dev/null 2>&1 && node_args+=(--test-concurrency=1)
echo "http_tests: node $(node --version) ${node_args[*]} ${files[*]}"
set +e
timeout -k 5 "$timeout_s" node "${node_args[@]}" "${files[@]}" &
run_pid=$!
wait "$run_pid"
rc=$?
set -e
[ "$rc" = 124 ] && echo "http_tests: FAIL: the node test run passed ${timeout_s} s" >&2
exit "$rc"
