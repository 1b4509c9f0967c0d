#!/usr/bin/env bash
# Speculation on against off through the server, in one run: starts `lift serve` with the
# given arguments (a model and its --spec / --draft-model), then at each concurrency level runs
# `lift bench serve` with the server's speculation (spec_tokens not sent) and with it off for
# every request (spec_tokens 0), alternating which goes first, after one uncounted warm-up run,
# and prints output tokens/s on over off per repetition, and per level the geometric mean of
# those ratios.
#
#   bench/spec_on_off.sh [-c 1,4,16] [-n PROMPTS_PER_LEVEL] [-r REPS] [-o OUT_LEN] [-i IN_LEN]
#                        [--vocab V] [--dataset FILE] -- SERVE_ARGS...
# e.g. bench/spec_on_off.sh -- -m target.gguf --draft-model draft.gguf -t 2
set -euo pipefail
cd "$(dirname "$0")/.."
levels=1,4,16 per_level=0 reps=2 out_len=64 in_len=32 vocab=() dataset=()
while [ $# -gt 0 ]; do
  case "$1" in
    -c) levels=$2; shift 2 ;;
    -n) per_level=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -o) out_len=$2; shift 2 ;;
    -i) in_len=$2; shift 2 ;;
    --vocab) vocab=(--vocab "$2"); shift 2 ;;
    --dataset) dataset=(--dataset "$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "spec_on_off.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
lift=${LIFT:-build/release/lift}
[ -x "$lift" ] || { echo "spec_on_off.sh: no $lift (build it, or set LIFT)" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tmp=$(mktemp -d)
"$lift" serve --port "$port" "$@" >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { cat "$tmp/server.log"; exit 1; }
  sleep 0.2
done
run() {  # level, spec_tokens ("" = the server's), result file
  local n=$per_level
  [ "$n" -gt 0 ] || n=$(( $1 * 2 > 4 ? $1 * 2 : 4 ))
  local st=()
  [ -z "$2" ] || st=(--spec-tokens "$2")
  "$lift" bench serve --port "$port" --concurrency "$1" --num-prompts "$n" --input-len "$in_len" \
    --output-len "$out_len" "${vocab[@]}" "${dataset[@]}" "${st[@]}" --no-progress \
    --result-file "$3" >/dev/null 2>&1
}
echo "level  rep  on_tok/s  off_tok/s  on/off  acceptance  accepted_len"
IFS=, read -ra lv <<<"$levels"
for c in "${lv[@]}"; do
  # A run first that is not counted: every measured run then meets this level's prompts (the
  # same ids each run) in the prefix cache, their draft K/V included. Without it the first
  # measured run alone computed them, which cost rep 1 at 16 sequences ~25% of its throughput
  # against the run after it, whichever of on and off it was.
  run "$c" "" "$tmp/warm-up.json"
  for r in $(seq "$reps"); do
    if [ $((r % 2)) -eq 1 ]; then
      run "$c" "" "$tmp/on.json"; run "$c" 0 "$tmp/off.json"
    else
      run "$c" 0 "$tmp/off.json"; run "$c" "" "$tmp/on.json"
    fi
    python3 - "$tmp/on.json" "$tmp/off.json" "$c" "$r" "$tmp/ratios-$c" <<'PY'
import json, sys
on, off = (json.load(open(p))["runs"][0] for p in sys.argv[1:3])
s = on.get("spec") or {}
print(f"c={sys.argv[3]:<4} {sys.argv[4]:>3} {on['output_throughput']:9.1f} "
      f"{off['output_throughput']:10.1f} {on['output_throughput'] / off['output_throughput']:7.3f}x "
      f"{100 * s.get('acceptance_rate', 0):10.1f}% {s.get('mean_accepted_length', 0):13.2f}")
with open(sys.argv[5], "a") as f:
    f.write(f"{on['output_throughput'] / off['output_throughput']}\n")
PY
  done
  python3 - "$tmp/ratios-$c" "$c" <<'PY'
import math, sys
r = [float(x) for x in open(sys.argv[1])]
g = math.exp(sum(map(math.log, r)) / len(r))
print(f"c={sys.argv[2]:<4} on/off geometric mean {g:.3f}x over {len(r)} (min {min(r):.3f}x, "
      f"max {max(r):.3f}x)")
PY
done
