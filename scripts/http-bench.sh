#!/usr/bin/env bash
# End-to-end jobs throughput over HTTP: `kvq bench` against `kvq serve`, LMDB sync and nosync,
# compared with the in-process lifecycle benchmark (jobs_bench BM_JobLifecycle) from the same run.
#
# For each durability mode it starts `kvq serve --listen 127.0.0.1:0` on a fresh data directory,
# reads the URL from the server's first stdout line, and runs `kvq bench --json` with 1, 4 and 16
# worker threads (2 producer threads), first accepting one job per call (--batch 1), then up to
# HTTP_BENCH_BATCH per call. `kvq bench` has no batch add: its producers always add one job per
# request (POST /v1/jobs/{type}), and workers finish one job per request, so --batch only
# batches the accepts. Then it stops the server (SIGTERM) and removes the directory.
#
# jobs_bench --benchmark_filter=BM_JobLifecycle/<mode>/ runs once per mode, just before that mode's
# server, so that reference and HTTP runs see the same disk. Its N-thread figure is the
# in-process reference for the N-worker HTTP rows (in-process threads each add, accept and
# finish; the HTTP run has 2 producer threads on top of the N workers). Each in-process run
# uses its own fresh database under KVQ_BENCH_DIR.
#
# Prints a markdown table (mode, workers, batch, HTTP jobs/s, add->accept p50/p99, in-process
# jobs/s, HTTP / in-process) and the verdict for the target: HTTP keeps >= 30% of the in-process
# throughput at 16 workers.
#
# Usage: scripts/http-bench.sh
# Environment:
#   KVQ_BIN              kvq binary (default: build/release/src/cli/kvq)
#   JOBS_BENCH           jobs_bench binary (default: build/release/bench/jobs_bench)
#   HTTP_BENCH_JOBS      jobs per kvq bench run (default 5000)
#   HTTP_BENCH_PRODUCERS producer threads per run (default 2)
#   HTTP_BENCH_WORKERS   worker counts (default "1 4 16")
#   HTTP_BENCH_BATCH     accept count for the batched runs (default 10)
#   HTTP_BENCH_MODES     durability modes (default "sync nosync")
#   HTTP_BENCH_OUT       if set, write all raw results there as one JSON document
#   KVQ_BENCH_DIR        where the data directories go (default: $TMPDIR or /tmp; use a real
#                        disk, not tmpfs, for sync numbers to mean anything)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/processes.sh
source "$root/scripts/lib/processes.sh"
kvq_bin="${KVQ_BIN:-$root/build/release/src/cli/kvq}"
jobs_bench="${JOBS_BENCH:-$root/build/release/bench/jobs_bench}"
n_jobs="${HTTP_BENCH_JOBS:-5000}"
producers="${HTTP_BENCH_PRODUCERS:-2}"
worker_counts="${HTTP_BENCH_WORKERS:-1 4 16}"
batch="${HTTP_BENCH_BATCH:-10}"
modes="${HTTP_BENCH_MODES:-sync nosync}"
out="${HTTP_BENCH_OUT:-}"
base_dir="${KVQ_BENCH_DIR:-${TMPDIR:-/tmp}}"
batches="1"
[ "$batch" != 1 ] && batches="1 $batch"

for b in "$kvq_bin" "$jobs_bench"; do
  [ -x "$b" ] || { echo "http-bench: no executable at $b (set KVQ_BIN / JOBS_BENCH)" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "http-bench: python3 is needed" >&2; exit 1; }

export KVQ_BENCH_DIR="$base_dir"
work="$(mktemp -d "$base_dir/kvq-http-bench.XXXXXX")"
server_pid=""
child_pid=""
data_dir=""

stop_server() {
  stop_process "$server_pid"
  server_pid=""
  if [ -n "$data_dir" ]; then
    rm -rf "$data_dir"
    data_dir=""
  fi
}

cleanup() {
  if [ -n "$child_pid" ] && kill -0 "$child_pid" 2>/dev/null; then
    kill -TERM "$child_pid" 2>/dev/null || true
    wait "$child_pid" 2>/dev/null || true
  fi
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command in the background and waits for it, so that a signal to this script runs the
# trap (which stops the command) instead of waiting for it to finish.
run_child() {
  "$@" &
  child_pid=$!
  local rc=0
  wait "$child_pid" || rc=$?
  child_pid=""
  return "$rc"
}

# ---- HTTP ----------------------------------------------------------------------------------------

: >"$work/http.jsonl"
for mode in $modes; do
  # The in-process reference for this mode, right before its HTTP runs, so that both see the
  # same disk and the same neighbours as far as possible.
  echo "== $mode: jobs_bench --benchmark_filter='BM_JobLifecycle/$mode/' (in-process reference)" >&2
  if ! run_child "$jobs_bench" --benchmark_filter="BM_JobLifecycle/$mode/" \
      --benchmark_format=json >"$work/inproc-$mode.json" 2>"$work/inproc-$mode.err"; then
    echo "http-bench: jobs_bench failed:" >&2
    cat "$work/inproc-$mode.err" >&2
    exit 1
  fi

  data_dir="$(mktemp -d "$base_dir/kvq-http-bench-data.XXXXXX")"
  start_kvq_serve "$kvq_bin" "$work/serve-$mode.out" "$work/serve-$mode.err" \
      --data "$data_dir" --durability "$mode" --log-level warn || exit 1
  url="$server_url"
  echo "== $mode: $(head -n 1 "$work/serve-$mode.out")" >&2

  for w in $worker_counts; do
    for b in $batches; do
      echo "   kvq bench --workers $w --producers $producers --jobs $n_jobs --batch $b" >&2
      # A type per run, so that nothing from an earlier run is in the way.
      if ! run_child "$kvq_bin" bench --url "$url" --json --producers "$producers" --workers "$w" \
          --jobs "$n_jobs" --batch "$b" --type "bench-w$w-b$b" \
          >"$work/run.json" 2>"$work/run.err"; then
        echo "http-bench: kvq bench failed ($mode, $w workers, batch $b):" >&2
        tr '\r' '\n' <"$work/run.err" | tail -n 5 >&2
        tail -n 20 "$work/serve-$mode.err" >&2
        exit 1
      fi
      python3 - "$mode" "$work/run.json" >>"$work/http.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
r["mode"] = sys.argv[1]
print(json.dumps(r))
PY
    done
  done
  stop_server
done

# ---- report --------------------------------------------------------------------------------------

inproc_files=()
for mode in $modes; do inproc_files+=("$work/inproc-$mode.json"); done
python3 - "$work/http.jsonl" "$out" "$n_jobs" "$producers" "${inproc_files[@]}" <<'PY'
import json
import re
import statistics
import sys

http_path, out_path, n_jobs, producers = sys.argv[1:5]
inproc_docs = [json.load(open(p)) for p in sys.argv[5:]]
http = [json.loads(line) for line in open(http_path) if line.strip()]

NAME = re.compile(r"^BM_JobLifecycle/(sync|nosync)/.*threads:(\d+)$")
samples = {}
for b in (b for doc in inproc_docs for b in doc.get("benchmarks", [])):
    m = NAME.match(b.get("run_name", b["name"]))
    if not m or b.get("error_occurred") or "items_per_second" not in b:
        continue
    if b.get("run_type") == "aggregate":
        continue
    samples.setdefault((m.group(1), int(m.group(2))), []).append(b["items_per_second"])
inproc = {k: statistics.median(v) for k, v in samples.items()}

def num(x, digits=0):
    return "n/a" if x is None else f"{x:,.{digits}f}"

print(f"HTTP: kvq bench, {n_jobs} jobs per run, {producers} producers (one add per request); "
      "in-process: jobs_bench BM_JobLifecycle, same thread count as HTTP workers")
print()
print("| mode | workers | batch | HTTP jobs/s | add→accept p50 ms | p99 ms | in-process jobs/s | HTTP / in-process |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
rows = []
for r in http:
    ref = inproc.get((r["mode"], int(r["workers"])))
    ratio = r["jobs_per_second"] / ref if ref else None
    rows.append((r, ref, ratio))
    print(f"| {r['mode']} | {r['workers']} | {r['batch']} | {num(r['jobs_per_second'])} | "
          f"{num(r['latency_ms']['p50'], 2)} | {num(r['latency_ms']['p99'], 2)} | {num(ref)} | "
          f"{'n/a' if ratio is None else f'{ratio:.2f}'} |")

extra = [r for r, _, _ in rows if r.get("halted") or r.get("retries")]
if extra:
    print()
    for r in extra:
        print(f"note: {r['mode']} {r['workers']} workers batch {r['batch']}: "
              f"halted finishes {r.get('halted', 0)}, 503 retries {r.get('retries', 0)}")

print()
print("Target: HTTP keeps >= 30% of the in-process throughput at 16 workers")
for r, ref, ratio in rows:
    if int(r["workers"]) != 16:
        continue
    if ratio is None:
        print(f"  {r['mode']:<6} batch {r['batch']:>3}: n/a (no in-process figure)")
        continue
    verdict = "met" if ratio >= 0.30 else "MISSED"
    print(f"  {r['mode']:<6} batch {r['batch']:>3}: {r['jobs_per_second']:,.0f} / {ref:,.0f} = "
          f"{ratio:.3f} -> {verdict}")

if out_path:
    with open(out_path, "w") as f:
        json.dump({"http": http, "in_process": inproc_docs}, f, indent=1)
    print()
    print(f"raw results: {out_path}")
PY
