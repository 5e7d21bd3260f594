#!/usr/bin/env bash
# The jobs lifecycle on etcd next to LMDB, in one run: the in-process benchmark
# (jobs_bench BM_JobLifecycle, 1/4/16 threads) and the HTTP one (`kvq bench` against `kvq serve`),
# on LMDB, on a 1-member etcd and on a 3-member etcd, all members on loopback.
#
# Steps:
#   1. LMDB: jobs_bench --benchmark_filter='BM_JobLifecycle/(sync|nosync)/' (KVQ_BENCH_ETCD
#      unset), then `kvq serve --data DIR --durability sync` and one `kvq bench` run.
#   2. etcd, 1 member: starts etcd (fresh data directory under KVQ_BENCH_DIR, free ports, the
#      flags tests/support/etcd_process.h uses: --max-txn-ops 10000, an 8 GiB quota, revision
#      auto-compaction), runs KVQ_BENCH_ETCD=<endpoint> jobs_bench
#      --benchmark_filter='BM_JobLifecycle/etcd/', then `kvq serve --store etcd://<endpoint>/<prefix>`
#      and one `kvq bench` run; stops the server and etcd, removes its data.
#   3. etcd, 3 members: the same against a 3-member cluster (as tests/e2e/test_etcd_cluster.py
#      starts it); jobs_bench and kvq serve get all three endpoints.
#   On each cluster, steps 2 and 3 run once per group commit mode (ETCD_BENCH_GROUP_COMMIT).
# Every `kvq bench` run: --workers ETCD_BENCH_WORKERS (16), --producers ETCD_BENCH_PRODUCERS (2),
# --jobs ETCD_BENCH_JOBS (3000), --batch 1, --json, a fresh type. Then it prints a markdown table:
# store, in-process jobs/s at 1/4/16 threads, HTTP jobs/s, add->accept p50/p99, and for each
# HTTP run what a job cost: the gRPC calls the etcd members answered (Range + Txn, from their
# grpc_server_handled_total), the Raft proposals they committed (etcd_server_proposals_committed
# _total, one member's), and the CPU of the etcd members and of kvq serve (/proc/<pid>/stat),
# each counted from just before to just after the kvq bench run. The in-process runs get no such
# count: Google Benchmark runs more iterations than it reports.
#
# Everything it starts (etcd members, kvq serve, the benchmark in flight) is stopped on exit,
# including on Ctrl-C, and its temporary directories are removed.
#
# Usage: scripts/etcd-bench.sh
# Environment:
#   KVQ_BIN              kvq binary (default: build/release/src/cli/kvq)
#   JOBS_BENCH           jobs_bench binary (default: build/release/bench/jobs_bench)
#   ETCD_BIN             etcd binary (default: etcd on PATH)
#   ETCD_BENCH_JOBS      jobs per kvq bench run (default 3000)
#   ETCD_BENCH_WORKERS   kvq bench workers (default 16)
#   ETCD_BENCH_PRODUCERS kvq bench producers (default 2)
#   ETCD_BENCH_SIZES     etcd cluster sizes (default "1 3")
#   ETCD_BENCH_GROUP_COMMIT  group commit modes to run on each cluster, side by side (default
#                        "on off": kvq serve --etcd-group-commit, KVQ_BENCH_ETCD_GROUP_COMMIT)
#   ETCD_BENCH_OUT       if set, write all raw results there as one JSON document
#   KVQ_BENCH_DIR        where LMDB and etcd data go (default: $TMPDIR or /tmp; use a real disk)
#   Extra arguments are passed on to every jobs_bench run (e.g. --benchmark_min_time=1).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/processes.sh
source "$root/scripts/lib/processes.sh"
kvq_bin="${KVQ_BIN:-$root/build/release/src/cli/kvq}"
jobs_bench="${JOBS_BENCH:-$root/build/release/bench/jobs_bench}"
etcd_bin="${ETCD_BIN:-$(command -v etcd || true)}"
n_jobs="${ETCD_BENCH_JOBS:-3000}"
workers="${ETCD_BENCH_WORKERS:-16}"
producers="${ETCD_BENCH_PRODUCERS:-2}"
sizes="${ETCD_BENCH_SIZES:-1 3}"
group_commit_modes="${ETCD_BENCH_GROUP_COMMIT:-on off}"
out="${ETCD_BENCH_OUT:-}"
base_dir="${KVQ_BENCH_DIR:-${TMPDIR:-/tmp}}"
bench_args=("$@")

for b in "$kvq_bin" "$jobs_bench" "$etcd_bin"; do
  [ -n "$b" ] && [ -x "$b" ] || { echo "etcd-bench: no executable at '$b' (set KVQ_BIN / JOBS_BENCH / ETCD_BIN)" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "etcd-bench: python3 is needed" >&2; exit 1; }

export KVQ_BENCH_DIR="$base_dir"
unset KVQ_BENCH_ETCD
work="$(mktemp -d "$base_dir/kvq-etcd-bench.XXXXXX")"
server_pid=""
child_pid=""
data_dir=""
etcd_pids=()
etcd_dir=""
endpoints=""

stop_server() {
  stop_process "$server_pid"
  server_pid=""
  if [ -n "$data_dir" ]; then
    rm -rf "$data_dir"
    data_dir=""
  fi
}

stop_etcd() {
  local pid
  for pid in "${etcd_pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  etcd_pids=()
  if [ -n "$etcd_dir" ]; then
    rm -rf "$etcd_dir"
    etcd_dir=""
  fi
  endpoints=""
}

cleanup() {
  if [ -n "$child_pid" ] && kill -0 "$child_pid" 2>/dev/null; then
    kill -TERM "$child_pid" 2>/dev/null || true
    wait "$child_pid" 2>/dev/null || true
  fi
  stop_server
  stop_etcd
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

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts an n-member etcd cluster on loopback; sets endpoints ("host:port,...") and etcd_pids.
start_etcd() {
  local n="$1" i initial="" names=() clients=() peers=()
  etcd_dir="$(mktemp -d "$base_dir/kvq-etcd-bench-etcd.XXXXXX")"
  for ((i = 0; i < n; i++)); do
    names+=("m$i")
    clients+=("$(free_port)")
    peers+=("$(free_port)")
    initial+="${initial:+,}m$i=http://127.0.0.1:${peers[$i]}"
  done
  endpoints=""
  for ((i = 0; i < n; i++)); do
    local client_url="http://127.0.0.1:${clients[$i]}" peer_url="http://127.0.0.1:${peers[$i]}"
    "$etcd_bin" --name "${names[$i]}" --data-dir "$etcd_dir/${names[$i]}" \
        --listen-client-urls "$client_url" --advertise-client-urls "$client_url" \
        --listen-peer-urls "$peer_url" --initial-advertise-peer-urls "$peer_url" \
        --initial-cluster "$initial" --initial-cluster-state new \
        --initial-cluster-token "kvq-bench-$$" --max-txn-ops 10000 \
        --quota-backend-bytes 8589934592 --auto-compaction-mode revision \
        --auto-compaction-retention 100000 --log-level error \
        </dev/null >>"$etcd_dir/${names[$i]}.log" 2>&1 &
    etcd_pids+=($!)
    endpoints+="${endpoints:+,}127.0.0.1:${clients[$i]}"
  done
  # Ready when some member reports a leader and every member answers.
  python3 - "$endpoints" <<'PY' || { echo "etcd-bench: etcd ($n members) did not come up:" >&2; cat "$etcd_dir"/*.log >&2; exit 1; }
import json, sys, time, urllib.request
eps = sys.argv[1].split(",")
deadline = time.time() + 30
while time.time() < deadline:
    ok = 0
    for ep in eps:
        try:
            req = urllib.request.Request("http://%s/v3/maintenance/status" % ep, data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=1) as r:
                s = json.loads(r.read())
            if s.get("leader") and s.get("leader") != "0":
                ok += 1
        except Exception:
            pass
    if ok == len(eps):
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
}

# jobs_bench with a filter; label names the JSON file.
run_inproc() {
  local label="$1" filter="$2"
  echo "== $label: jobs_bench --benchmark_filter='$filter'${KVQ_BENCH_ETCD:+ (KVQ_BENCH_ETCD=$KVQ_BENCH_ETCD)}" >&2
  if ! run_child "$jobs_bench" --benchmark_filter="$filter" --benchmark_format=json "${bench_args[@]}" \
      >"$work/inproc-$label.json" 2>"$work/inproc-$label.err"; then
    echo "etcd-bench: jobs_bench failed ($label):" >&2
    cat "$work/inproc-$label.err" >&2
    exit 1
  fi
}

# Prints what the etcd members (at $endpoints, pids etcd_pids) and kvq serve (server_pid) have
# done so far, as JSON: calls answered, proposals committed, CPU seconds. {} without etcd.
cost_snapshot() {
  python3 - "$endpoints" "$server_pid" "${etcd_pids[@]}" <<'PY'
import json, os, re, sys, urllib.request
endpoints, server = sys.argv[1], sys.argv[2]
if not endpoints:
    print("{}")
    sys.exit(0)
tick = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick  # utime + stime
calls = {"Range": 0.0, "Txn": 0.0}
proposals = 0.0
handled = re.compile(r'^grpc_server_handled_total\{(.*)\} (\S+)$')
for ep in endpoints.split(","):
    text = urllib.request.urlopen(f"http://{ep}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        m = handled.match(line)
        if m and 'grpc_code="OK"' in m.group(1):
            method = re.search(r'grpc_method="(\w+)"', m.group(1)).group(1)
            if method in calls:
                calls[method] += float(m.group(2))
        elif line.startswith("etcd_server_proposals_committed_total "):
            proposals = max(proposals, float(line.split()[1]))
print(json.dumps({"range": calls["Range"], "txn": calls["Txn"], "proposals": proposals,
                  "etcd_cpu_s": sum(cpu(p) for p in sys.argv[3:]),
                  "serve_cpu_s": cpu(server) if server else 0.0}))
PY
}

# kvq serve with the given store arguments, then one kvq bench run; appends to http.jsonl.
run_http() {
  local label="$1"
  shift
  start_kvq_serve "$kvq_bin" "$work/serve-$label.out" "$work/serve-$label.err" --log-level warn "$@" || exit 1
  local url="$server_url"
  echo "== $label: $(head -n 1 "$work/serve-$label.out")" >&2
  echo "   kvq bench --workers $workers --producers $producers --jobs $n_jobs" >&2
  cost_snapshot >"$work/cost-before.json"
  if ! run_child "$kvq_bin" bench --url "$url" --json --producers "$producers" --workers "$workers" \
      --jobs "$n_jobs" --batch 1 --type "bench-$label" >"$work/run.json" 2>"$work/run.err"; then
    echo "etcd-bench: kvq bench failed ($label):" >&2
    tr '\r' '\n' <"$work/run.err" | tail -n 5 >&2
    tail -n 20 "$work/serve-$label.err" >&2
    exit 1
  fi
  cost_snapshot >"$work/cost-after.json"
  python3 - "$label" "$work/run.json" "$work/cost-before.json" "$work/cost-after.json" \
      >>"$work/http.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
r["store"] = sys.argv[1]
before, after = (json.load(open(p)) for p in sys.argv[3:5])
if before and r.get("jobs"):
    per_job = lambda k, scale=1.0: (after[k] - before[k]) * scale / r["jobs"]
    r["cost_per_job"] = {"range": per_job("range"), "txn": per_job("txn"),
                         "proposals": per_job("proposals"),
                         "etcd_cpu_ms": per_job("etcd_cpu_s", 1000.0),
                         "serve_cpu_ms": per_job("serve_cpu_s", 1000.0)}
print(json.dumps(r))
PY
  stop_server
}

: >"$work/http.jsonl"
labels=()

# ---- LMDB ----------------------------------------------------------------------------------------
run_inproc lmdb 'BM_JobLifecycle/(sync|nosync)/'
labels+=(lmdb)
data_dir="$(mktemp -d "$base_dir/kvq-etcd-bench-data.XXXXXX")"
run_http lmdb-sync --data "$data_dir" --durability sync

# ---- etcd ----------------------------------------------------------------------------------------
for n in $sizes; do
  start_etcd "$n"
  echo "== etcd-$n: etcd members at $endpoints" >&2
  for mode in $group_commit_modes; do
    label="etcd-$n-$mode"
    KVQ_BENCH_ETCD="$endpoints" KVQ_BENCH_ETCD_GROUP_COMMIT="$mode" run_inproc "$label" 'BM_JobLifecycle/etcd/'
    labels+=("$label")
    run_http "$label" --store "etcd://$endpoints/kvq-http-bench-$$-$n-$mode" --etcd-group-commit "$mode"
  done
  stop_etcd
done

# ---- report --------------------------------------------------------------------------------------
inproc_files=()
for l in "${labels[@]}"; do inproc_files+=("$l=$work/inproc-$l.json"); done
python3 - "$work/http.jsonl" "$out" "$n_jobs" "$producers" "$workers" "${inproc_files[@]}" <<'PY'
import json, re, statistics, sys

http_path, out_path, n_jobs, producers, workers = sys.argv[1:6]
docs = {}
for arg in sys.argv[6:]:
    label, path = arg.split("=", 1)
    docs[label] = json.load(open(path))
http = {r["store"]: r for r in (json.loads(l) for l in open(http_path) if l.strip())}

NAME = re.compile(r"^BM_JobLifecycle/(sync|nosync|etcd)/.*threads:(\d+)$")
samples = {}
failures = {}
for label, doc in docs.items():
    for b in doc.get("benchmarks", []):
        m = NAME.match(b.get("run_name", b["name"]))
        if not m or b.get("run_type") == "aggregate":
            continue
        store = "lmdb-" + m.group(1) if m.group(1) != "etcd" else label
        if b.get("error_occurred") or "items_per_second" not in b:
            failures.setdefault(store, []).append(b.get("error_message", "no result"))
            continue
        samples.setdefault((store, int(m.group(2))), []).append(b["items_per_second"])
        bad = sum(b.get(k, 0) for k in ("add_failures", "accept_failures", "finish_failures"))
        if bad:
            failures.setdefault(store, []).append(f"{int(bad)} failed operations at {m.group(2)} threads")
inproc = {k: statistics.median(v) for k, v in samples.items()}

def num(x, digits=0):
    return "n/a" if x is None else f"{x:,.{digits}f}"

rows = [("lmdb-sync", "LMDB sync"), ("lmdb-nosync", "LMDB nosync")]
rows += [(l, f"etcd, {l.split('-')[1]} member" + ("s" if l.split('-')[1] != "1" else "") +
          f", group commit {l.split('-')[2]}") for l in docs if l.startswith("etcd-")]
print(f"in-process: jobs_bench BM_JobLifecycle (add -> accept -> finish per iteration); "
      f"HTTP: kvq bench, {workers} workers, {producers} producers, {n_jobs} jobs, batch 1")
print()
print(f"| store | in-process jobs/s, 1 thread | 4 threads | 16 threads | HTTP jobs/s ({workers} workers) "
      "| add→accept p50 ms | p99 ms | HTTP, per job: etcd Range + Txn calls | Raft proposals "
      "| etcd CPU ms | kvq serve CPU ms |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for key, name in rows:
    h = http.get(key)
    cells = [num(inproc.get((key, t))) for t in (1, 4, 16)]
    if h:
        cells += [num(h["jobs_per_second"]), num(h["latency_ms"]["p50"], 2), num(h["latency_ms"]["p99"], 2)]
    else:
        cells += ["–", "–", "–"]
    c = (h or {}).get("cost_per_job")
    if c:
        cells += [f"{c['range']:.2f} + {c['txn']:.2f}", num(c["proposals"], 2),
                  num(c["etcd_cpu_ms"], 2), num(c["serve_cpu_ms"], 2)]
    else:
        cells += ["–", "–", "–", "–"]
    print(f"| {name} | " + " | ".join(cells) + " |")
for store, msgs in failures.items():
    print(f"\nnote: {store}: " + "; ".join(msgs))
for key, h in http.items():
    if h.get("halted") or h.get("retries"):
        print(f"\nnote: HTTP {key}: halted finishes {h.get('halted', 0)}, 503 retries {h.get('retries', 0)}")

if out_path:
    with open(out_path, "w") as f:
        json.dump({"http": list(http.values()), "in_process": docs}, f, indent=1)
    print()
    print(f"raw results: {out_path}")
PY
