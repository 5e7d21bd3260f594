#!/usr/bin/env bash
# Interleaved pairs: kvq as built in two build directories, side by side in one run, with the
# lifecycle workload of `make bench` (bench/peers/queue_bench.cc) — how a change is measured
# against the build before it. Each round runs every (class, system) once with build A, once
# with build B and once for each peer, in that order, each on a fresh server and data
# directory; the report gives, per (class, system), the median over rounds of jobs/s, CPU and
# context switches per job (the server's, and the client process's: in-process, that is kvq's
# too) and each round's ratio B ÷ A, so a noisy minute hits both sides of a pair alike.
#
#   scripts/bench-pairs.sh BUILD_A BUILD_B     e.g. ../base/build/release build/release
#
# Environment (defaults in brackets):
#   KVQ_PAIRS_ROUNDS [5]    rounds
#   KVQ_PAIRS_SECONDS [4]   measured seconds per point, after 1 s of warm-up
#   KVQ_PAIRS_WORKERS [16]  worker connections (4 producers)
#   KVQ_PAIRS_SYSTEMS ["kvq-lib kvq-beanstalk"]  kvq systems (kvq-http too)
#   KVQ_PAIRS_PEERS [""]    peers run beside them each round ("redis beanstalkd")
#   KVQ_PAIRS_CLASSES ["relaxed durable"]
# Each side runs its own build's queue_bench (in-process, it links that build's jobs layer);
# the peers run B's. Both need queue_bench's --server-pid (the CPU and context switch counts).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/processes.sh
source "$root/scripts/lib/processes.sh"

[ $# -eq 2 ] || { echo "usage: $0 BUILD_A BUILD_B" >&2; exit 2; }
build_a="$(cd "$1" && pwd)"
build_b="$(cd "$2" && pwd)"
for b in "$build_a" "$build_b"; do
  [ -x "$b/bench/peers/queue_bench" ] && [ -x "$b/src/cli/kvq" ] ||
    { echo "$b: build the targets queue_bench and kvq first" >&2; exit 2; }
done
rounds="${KVQ_PAIRS_ROUNDS:-5}"
seconds="${KVQ_PAIRS_SECONDS:-4}"
workers="${KVQ_PAIRS_WORKERS:-16}"
systems="${KVQ_PAIRS_SYSTEMS:-kvq-lib kvq-beanstalk}"
peers="${KVQ_PAIRS_PEERS:-}"
classes="${KVQ_PAIRS_CLASSES:-relaxed durable}"

work="$(mktemp -d "${TMPDIR:-/tmp}/kvq-pairs.XXXXXX")"
results="$work/results.jsonl"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && stop_process "$server_pid" 100
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One point: `side` (A, B or peer) of `system` in `class`.
run_point() {  # side build system class round
  local side="$1" build="$2" system="$3" class="$4" round="$5"
  local data address port pid_flag=()
  data="$(mktemp -d "$work/$system-$class.XXXXXX")"
  server_pid=""
  case "$system" in
    kvq-lib) address="$data" ;;
    kvq-http | kvq-beanstalk)
      port=$((17800 + RANDOM % 2000))
      local extra=()
      [ "$system" = kvq-beanstalk ] && extra=(--beanstalk-listen "127.0.0.1:$port")
      start_kvq_serve "$build/src/cli/kvq" "$data.out" "$data.err" --data "$data" \
        --durability "$class" "${extra[@]}"
      if [ "$system" = kvq-beanstalk ]; then
        wait_for_port "$port"
        address="127.0.0.1:$port"
      else
        address="${server_url#http://}"
      fi
      ;;
    redis)
      port=$((17800 + RANDOM % 2000))
      local fsync=always
      [ "$class" = relaxed ] && fsync=everysec
      setsid redis-server --port "$port" --bind 127.0.0.1 --dir "$data" --appendonly yes \
        --appendfsync "$fsync" --save "" --daemonize no >"$data.log" 2>&1 &
      server_pid=$!
      wait_for_port "$port"
      address="127.0.0.1:$port"
      ;;
    beanstalkd)
      port=$((17800 + RANDOM % 2000))
      local sync_flag=(-f 0)
      [ "$class" = relaxed ] && sync_flag=(-F)
      setsid beanstalkd -l 127.0.0.1 -p "$port" -b "$data" "${sync_flag[@]}" >"$data.log" 2>&1 &
      server_pid=$!
      wait_for_port "$port"
      address="127.0.0.1:$port"
      ;;
  esac
  [ -n "$server_pid" ] && pid_flag=(--server-pid "$server_pid")
  "$build/bench/peers/queue_bench" lifecycle --system "$system" --address "$address" \
    --durability "$class" --workers "$workers" --producers 4 --seconds "$seconds" --warmup 1 \
    --payload 200 --data-dir "$data" "${pid_flag[@]}" --tag "side=$side" --tag "class=$class" \
    --tag "round=$round" >>"$results" || echo "  failed: $(tail -1 "$results")" >&2
  [ -n "$server_pid" ] && stop_process "$server_pid" 100
  server_pid=""
  rm -rf "$data"
  tail -1 "$results" | sed -E 's/.*"jobs_per_s":([0-9]+).*/  \1 jobs\/s/' >&2
}

for round in $(seq "$rounds"); do
  for class in $classes; do
    for system in $systems; do
      echo "pairs: round $round/$rounds $class $system A" >&2
      run_point A "$build_a" "$system" "$class" "$round"
      echo "pairs: round $round/$rounds $class $system B" >&2
      run_point B "$build_b" "$system" "$class" "$round"
    done
    for peer in $peers; do
      echo "pairs: round $round/$rounds $class $peer" >&2
      run_point peer "$build_b" "$peer" "$class" "$round"
    done
  done
done

A="$build_a" B="$build_b" python3 - "$results" <<'EOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [r for r in rows if "error" in r]
for r in bad:
    print(f"FAILED {r.get('side')} {r.get('class')} {r.get('system')}: {r['error']}")
print(f"A = {os.environ['A']}\nB = {os.environ['B']}\n")
print("| class | system | side | jobs/s | server CPU µs/job | client CPU µs/job | server cs/job | client cs/job | p99 ms | B÷A per round |")
print("|---|---|---|---|---|---|---|---|---|---|")
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def fmt(x, d=1):
    return "–" if x is None else f"{x:,.{d}f}"
ok = [r for r in rows if "error" not in r]
for cls in dict.fromkeys(r["class"] for r in ok):
    for system in dict.fromkeys(r["system"] for r in ok if r["class"] == cls):
        for side in ("A", "B", "peer"):
            sel = [r for r in ok if r["class"] == cls and r["system"] == system and r["side"] == side]
            if not sel:
                continue
            use = lambda r, who, k: r.get("use", {}).get(who, {}).get(k)
            ratios = ""
            if side == "B":
                a = {r["round"]: r["jobs_per_s"] for r in ok if r["class"] == cls and r["system"] == system and r["side"] == "A"}
                ratios = " ".join(f"{r['jobs_per_s'] / a[r['round']]:.2f}" for r in sel if r["round"] in a)
            print(f"| {cls} | {system} | {side} | {fmt(med(r['jobs_per_s'] for r in sel), 0)} | "
                  f"{fmt(med(use(r, 'server', 'cpu_us') for r in sel))} | {fmt(med(use(r, 'client', 'cpu_us') for r in sel))} | "
                  f"{fmt(med(use(r, 'server', 'context_switches') for r in sel), 2)} | {fmt(med(use(r, 'client', 'context_switches') for r in sel), 2)} | "
                  f"{fmt(med(r['latency_ms']['p99'] for r in sel), 2)} | {ratios} |")
sys.exit(1 if bad else 0)
EOF
