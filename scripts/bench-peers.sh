#!/usr/bin/env bash
# `make bench`: kvq side by side with the job queues users would pick instead — beanstalkd, a
# PostgreSQL table with SELECT ... FOR UPDATE SKIP LOCKED, and a Redis reliable queue — in one run
# on this machine. Installs the peers from Debian's packages, starts each on loopback on a
# non-default port with its data in a temporary directory, runs the same workload against each
# (bench/peers/queue_bench.cc) and against kvq (over HTTP, over the beanstalkd protocol with the
# very client that drives beanstalkd, and in-process), stops everything it started, and writes
# docs/benchmarks.md and docs/benchmarks.png (scripts/bench-report.py).
#
# Every system runs in two durability classes, matched per system:
#   durable  an acknowledged add survives power loss: kvq LMDB durable, beanstalkd binlog with an
#            fsync on every write (-f 0), PostgreSQL synchronous_commit=on, Redis appendfsync always
#   relaxed  no fsync before the acknowledgement: kvq LMDB relaxed, beanstalkd binlog without fsync
#            (-F), PostgreSQL synchronous_commit=off, Redis appendfsync everysec
# Each (run, class, system) gets a fresh server and data directory; the worker counts run one
# after another against it. Runs interleave the systems, so a noisy minute hits all of them.
#
# Environment (defaults in brackets):
#   KVQ_BENCH_RUNS [3]             repetitions of the whole matrix (median and spread reported)
#   KVQ_BENCH_SECONDS [4]          measured seconds per point, after KVQ_BENCH_WARMUP [1] seconds
#   KVQ_BENCH_WORKERS ["1 4 16 64"] worker connections (64 is the contention run)
#   KVQ_BENCH_SYSTEMS ["kvq-http kvq-beanstalk kvq-lib beanstalkd postgres redis"]
#   KVQ_BENCH_CLASSES ["durable relaxed"]
#   KVQ_BENCH_BATCHED [1]          the batched runs (kvq-http, kvq-lib, redis; relaxed, 16 workers); 0 skips them
#   KVQ_BENCH_SCALE_JOBS [1000000] pending jobs in the scale run (relaxed class, once); 0 skips it
#   KVQ_BENCH_DIR [$TMPDIR or /tmp] where the data directories go (a real disk, not tmpfs)
#   KVQ_BENCH_MD, KVQ_BENCH_PNG    outputs [docs/benchmarks.md, docs/benchmarks.png]
#   KVQ_BENCH_PORT [17500]         first of the loopback ports used
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/processes.sh
source "$root/scripts/lib/processes.sh"
cd "$root"

runs="${KVQ_BENCH_RUNS:-3}"
seconds="${KVQ_BENCH_SECONDS:-4}"
warmup="${KVQ_BENCH_WARMUP:-1}"
worker_counts="${KVQ_BENCH_WORKERS:-1 4 16 64}"
systems="${KVQ_BENCH_SYSTEMS:-kvq-http kvq-beanstalk kvq-lib beanstalkd postgres redis}"
classes="${KVQ_BENCH_CLASSES:-durable relaxed}"
batched="${KVQ_BENCH_BATCHED:-1}"
scale_jobs="${KVQ_BENCH_SCALE_JOBS:-1000000}"
base_dir="${KVQ_BENCH_DIR:-${TMPDIR:-/tmp}}"
out_md="${KVQ_BENCH_MD:-docs/benchmarks.md}"
out_png="${KVQ_BENCH_PNG:-docs/benchmarks.png}"
port="${KVQ_BENCH_PORT:-17500}"
payload=200

./scripts/install-deps.sh --bench
[ -f build/release/CMakeCache.txt ] || cmake --preset release >/dev/null
cmake --preset release >/dev/null  # re-configure: queue_bench appears once libpq/hiredis exist
cmake --build --preset release -j "$(nproc)" --target queue_bench kvq
bench="$root/build/release/bench/peers/queue_bench"
kvq="$root/build/release/src/cli/kvq"
pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"

work="$(mktemp -d "$base_dir/kvq-peers.XXXXXX")"
chmod 755 "$work"
results="$work/results.jsonl"
: >"$results"
server_pid=""
server_kind=""
server_data=""

log() { echo "bench: $*" >&2; }

stop_server() {
  case "$server_kind" in
    postgres) as_postgres "$pg_bin/pg_ctl" -D "$server_data" -m fast -w stop >/dev/null 2>&1 || true ;;
    "" | kvq-lib) ;;
    *) stop_process "$server_pid" 100 ;;
  esac
  server_pid=""
  server_kind=""
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# PostgreSQL refuses to run as root: run it as the postgres user the package creates.
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The configuration each system runs with, as written into the report.
config_of() {  # system class
  case "$1/$2" in
    kvq-http/durable) echo "kvq serve --durability durable (LMDB, group commit: the transactions of a group share its two fsyncs; add, accept and finish commit asynchronously from the 2 I/O threads, the default)" ;;
    kvq-http/relaxed) echo "kvq serve --durability relaxed (LMDB without fsync at commit; synced in order about once a second, the last synced state kept intact; store calls on the 2 I/O threads, the default)" ;;
    kvq-beanstalk/durable) echo "kvq serve --durability durable --beanstalk-listen 127.0.0.1:PORT (the beanstalkd protocol over the same jobs layer and LMDB group commit as HTTP)" ;;
    kvq-beanstalk/relaxed) echo "kvq serve --durability relaxed --beanstalk-listen 127.0.0.1:PORT" ;;
    kvq-lib/durable) echo "kvq::jobs::Jobs on open_lmdb_store(durability = kDurable), in the benchmark process" ;;
    kvq-lib/relaxed) echo "kvq::jobs::Jobs on open_lmdb_store(durability = kRelaxed), in the benchmark process" ;;
    beanstalkd/durable) echo "beanstalkd -b DIR -f 0 (binlog, fsync on every write)" ;;
    beanstalkd/relaxed) echo "beanstalkd -b DIR -F (binlog, never fsync)" ;;
    postgres/durable) echo "PostgreSQL defaults (fsync=on, wal_sync_method=fdatasync, shared_buffers=128MB), synchronous_commit=on; one table with a partial index on pending rows, prepared statements, autocommit; idle workers wait on LISTEN and each add sends a NOTIFY" ;;
    postgres/relaxed) echo "the same with synchronous_commit=off" ;;
    redis/durable) echo "redis-server --appendonly yes --appendfsync always --save ''" ;;
    redis/relaxed) echo "redis-server --appendonly yes --appendfsync everysec --save ''" ;;
    kvq-http/batched) echo "as relaxed; producers add 100 jobs a request (POST /v1/jobs/{type}/batch), workers take up to 16 (accept with count) and finish them in one request (POST /v1/finish)" ;;
    kvq-lib/batched) echo "as relaxed; producers add 100 jobs a call (add_many), workers take up to 16 (accept_many) and finish them in one call (finish_many)" ;;
    redis/batched) echo "as relaxed; producers LPUSH 100 values a command, workers send pipelines of 16 LMOVEs and finish with pipelines of LREMs" ;;
  esac
}

# Starts a fresh server for `system` in `class`; sets address, server_pid and data.
start_server() {  # system class
  local system="$1" class="$2"
  server_data="$(mktemp -d "$work/$system-$class.XXXXXX")"
  server_kind="$system"
  port=$((port + 1))
  address="127.0.0.1:$port"
  case "$system" in
    kvq-http)
      local durability=durable
      [ "$class" = relaxed ] && durability=relaxed
      start_kvq_serve "$kvq" "$server_data.out" "$server_data.log" --data "$server_data" \
        --durability "$durability"
      address="${server_url#http://}"
      ;;
    kvq-beanstalk)
      local durability=durable
      [ "$class" = relaxed ] && durability=relaxed
      port=$((port + 1))  # the HTTP listener takes a free port of its own
      start_kvq_serve "$kvq" "$server_data.out" "$server_data.log" --data "$server_data" \
        --durability "$durability" --beanstalk-listen "127.0.0.1:$port"
      wait_for_port "$port"
      address="127.0.0.1:$port"
      ;;
    kvq-lib)
      address="$server_data"  # in-process: queue_bench opens the data directory itself
      server_pid=""
      ;;
    beanstalkd)
      local sync_flag=(-f 0)
      [ "$class" = relaxed ] && sync_flag=(-F)
      setsid beanstalkd -l 127.0.0.1 -p "$port" -b "$server_data" "${sync_flag[@]}" >"$server_data.log" 2>&1 &
      server_pid=$!
      wait_for_port "$port"
      ;;
    redis)
      local fsync=always
      [ "$class" = relaxed ] && fsync=everysec
      setsid redis-server --port "$port" --bind 127.0.0.1 --dir "$server_data" --appendonly yes \
        --appendfsync "$fsync" --save "" --daemonize no >"$server_data.log" 2>&1 &
      server_pid=$!
      wait_for_port "$port"
      ;;
    postgres)
      local commit=on
      [ "$class" = relaxed ] && commit=off
      chown postgres "$server_data" 2>/dev/null || true
      as_postgres "$pg_bin/initdb" -D "$server_data/db" -A trust -U postgres >"$server_data.log" 2>&1
      as_postgres "$pg_bin/pg_ctl" -D "$server_data/db" -l "$server_data/db.log" -w \
        -o "-p $port -k $server_data -c listen_addresses=127.0.0.1 -c synchronous_commit=$commit" \
        start >>"$server_data.log" 2>&1
      server_data="$server_data/db"
      server_pid="$(head -1 "$server_data/postmaster.pid")"
      wait_for_port "$port"
      ;;
    *) log "unknown system $system"; return 1 ;;
  esac
}

# ---- the machine ----------------------------------------------------------------------------------
fsync_rate="$("$bench" fsync-probe --data-dir "$work" --seconds 2 | sed -E 's/.*"fsync_per_s":([0-9.]+).*/\1/')"
log "disk: $fsync_rate fsyncs/s in $work"

# ---- the lifecycle matrix -------------------------------------------------------------------------
for run in $(seq "$runs"); do
  for class in $classes; do
    for system in $systems; do
      start_server "$system" "$class"
      for workers in $worker_counts; do
        producers=4
        [ "$workers" -lt 4 ] && producers="$workers"
        log "run $run/$runs  $class  $system  $workers workers"
        pid_flag=()
        [ -n "$server_pid" ] && pid_flag=(--server-pid "$server_pid")
        "$bench" lifecycle --system "$system" --address "$address" --durability "$class" \
          --workers "$workers" --producers "$producers" --seconds "$seconds" --warmup "$warmup" \
          --payload "$payload" --data-dir "$server_data" "${pid_flag[@]}" --tag "class=$class" \
          --tag "run=$run" >>"$results" ||
          log "  failed: $(tail -1 "$results")"
        tail -1 "$results" | sed -E 's/.*"jobs_per_s":([0-9]+).*"p99":([0-9.]+).*/  \1 jobs\/s, p99 \2 ms/' >&2
      done
      stop_server
    done
  done
done

# ---- the batched path ----------------------------------------------------------------------------
# The systems with calls for many jobs at once, relaxed, at 16 workers: producers add 100 jobs a
# call, workers take up to 16 a call and finish them together (queue_bench --batch).
if [ "$batched" = 1 ]; then
  for run in $(seq "$runs"); do
    for system in $systems; do
      case "$system" in kvq-http | kvq-lib | redis) ;; *) continue ;; esac
      start_server "$system" relaxed
      log "run $run/$runs  batched  $system  16 workers"
      pid_flag=()
      [ -n "$server_pid" ] && pid_flag=(--server-pid "$server_pid")
      "$bench" lifecycle --system "$system" --address "$address" --durability relaxed \
        --workers 16 --producers 4 --seconds "$seconds" --warmup "$warmup" --payload "$payload" \
        --batch 100 --take 16 --data-dir "$server_data" "${pid_flag[@]}" --tag "class=batched" \
        --tag "run=$run" >>"$results" || log "  failed: $(tail -1 "$results")"
      tail -1 "$results" | sed -E 's/.*"jobs_per_s":([0-9]+).*"p99":([0-9.]+).*/  \1 jobs\/s, p99 \2 ms/' >&2
      stop_server
    done
  done
fi

# ---- the scale run --------------------------------------------------------------------------------
if [ "$scale_jobs" -gt 0 ]; then
  for system in $systems; do
    start_server "$system" relaxed
    log "scale  $system  $scale_jobs pending jobs"
    pid_flag=()
    [ -n "$server_pid" ] && pid_flag=(--server-pid "$server_pid")
    "$bench" scale --system "$system" --address "$address" --durability relaxed --jobs "$scale_jobs" \
      --workers 16 --producers 16 --payload "$payload" --data-dir "$server_data" "${pid_flag[@]}" \
      --tag class=relaxed --tag run=1 >>"$results" || log "  failed: $(tail -1 "$results")"
    tail -1 "$results" >&2
    stop_server
  done
fi

# ---- the report -----------------------------------------------------------------------------------
version_of() {
  case "$1" in
    kvq-http | kvq-beanstalk | kvq-lib) "$kvq" --version 2>&1 | head -1 ;;
    beanstalkd) beanstalkd -v 2>&1 | head -1 ;;
    postgres) "$pg_bin/postgres" --version | sed -E 's/^postgres \(PostgreSQL\) ([^ ]+).*/PostgreSQL \1/' ;;
    redis) redis-server --version | sed -E 's/^Redis server v=([^ ]+).*/Redis \1/' ;;
  esac
}
name_of() {
  case "$1" in
    kvq-http) echo "$(version_of kvq-http), over HTTP" ;;
    kvq-beanstalk) echo "$(version_of kvq-beanstalk), over the beanstalkd protocol" ;;
    kvq-lib) echo "$(version_of kvq-lib), in-process library" ;;
    beanstalkd) version_of beanstalkd ;;
    postgres) echo "$(version_of postgres), SKIP LOCKED table" ;;
    redis) echo "$(version_of redis), reliable queue (LPUSH / BLMOVE / LREM)" ;;
  esac
}
systems_json="["
for system in $systems; do
  systems_json+="{\"system\":\"$system\",\"name\":\"$(name_of "$system")\",\"config\":{\"durable\":\"$(config_of "$system" durable)\",\"relaxed\":\"$(config_of "$system" relaxed)\",\"batched\":\"$(config_of "$system" batched)\"}},"
done
systems_json="${systems_json%,}]"

SYSTEMS="$systems_json" FSYNC="$fsync_rate" DATA="$work" RUNS="$runs" SECONDS_="$seconds" \
  WARMUP="$warmup" PAYLOAD="$payload" COMMAND="${KVQ_BENCH_COMMAND:-make bench}" \
  /usr/bin/python3 - >"$work/machine.json" <<'EOF'
import json, os, platform, time
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
mem_kb = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
print(json.dumps({
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "command": os.environ["COMMAND"],
    "cores": os.cpu_count(), "cpu": cpu, "memory_gb": round(mem_kb / 1048576),
    "kernel": platform.release(),
    "fsync_per_s": float(os.environ["FSYNC"]),
    "fsync_note": "4 KiB pwrite + fdatasync in a loop for 2 s, in the data directory (queue_bench fsync-probe)",
    "data_dir": os.environ["DATA"],
    "runs": int(os.environ["RUNS"]), "seconds": int(os.environ["SECONDS_"]),
    "warmup_seconds": int(os.environ["WARMUP"]), "payload_bytes": int(os.environ["PAYLOAD"]),
    "window": "2 x workers",
    "workload": (
        "Producers (4; 1 with one worker) add jobs carrying a 200-byte JSON payload while workers "
        "reserve and finish them, every producer and worker on its own connection, all on one "
        "queue (type). A job counts once its finish (delete, acknowledgement) was acknowledged. "
        "At most 2 x workers jobs are added but not yet finished, so add->accept latency measures "
        "the hand-off, not a backlog. Jobs finished in the warm-up are not counted; after the "
        "measured seconds the producers stop and every acknowledged add must come back (a lost "
        "job fails the run). Client (bench/peers/queue_bench) and server share the machine's cores."),
    "systems": json.loads(os.environ["SYSTEMS"]),
    "notes": [
        "kvq over HTTP and the peers all speak to a server process; kvq in-process runs the jobs "
        "layer inside the benchmark process itself, as an application embedding kvq would. "
        "The benchmark process links jemalloc, as docs/api.md advises such an application to "
        "(the kvq executable and Debian's redis-server link it too); the peers' clients run "
        "on it as well.",
        "Every HTTP call of kvq is a request with a JSON body and a JSON reply, through the "
        "client `kvq bench` uses (Boost.Beast, nlohmann::json); the peers use their own binary "
        "or text protocols. The client's CPU comes out of the same 2 cores.",
        "kvq's workers (over HTTP and in process) finish with \"next\" "
        "(Jobs::finish_and_accept) without waiting: one request finishes a job and takes the "
        "next one due in the same transaction. When none is due they accept (long-poll) as "
        "usual. The peers' workers delete, then reserve. While workers wait, the jobs go to "
        "the waiting accepts first (they came first), so at this load kvq over HTTP still "
        "spends about 3 requests per job (see the cost table).",
        "Memory in the scale run is the proportional set size of the server's processes (of "
        "the benchmark process for kvq in-process). For kvq it includes the pages of the LMDB "
        "file it maps, which are most of it; the Disk column is the data directory's allocated "
        "size.",
        "PostgreSQL workers that find no row wait on LISTEN, and every add sends a NOTIFY, "
        "which wakes every waiting worker; only one of them gets the row.",
        "kvq over the beanstalkd protocol (kvq serve --beanstalk-listen) is driven by the very "
        "client that drives beanstalkd (bench/peers/beanstalkd.cc: put, reserve-with-timeout, "
        "delete, one blocking connection per thread; 3 commands per job), against the same kvq "
        "serve, jobs layer and LMDB durability classes as kvq over HTTP. A put is a job with a "
        "server-assigned id and its ttr (120 s) as the job's own timeout; a reserve accepts "
        "from the watched tube (one type); a delete finishes the job.",
        "The cost per job counts what each system spends, not only how fast it goes: the round "
        "trips the clients made and the commits the store itself counted, over the whole run. "
        "kvq's group commit applies the transactions that commit together in one LMDB write "
        "transaction (one fsync when durable), so kvq can spend fewer commits than requests.",
    ],
    "layers_doc": "benchmarks-layers.md",
}, indent=1))
EOF

cp "$results" "$root/build/release/bench-peers-results.jsonl"
cp "$work/machine.json" "$root/build/release/bench-peers-machine.json"
/usr/bin/python3 scripts/bench-report.py --results "$results" --machine "$work/machine.json" \
  --md "$out_md" --png "$out_png"
log "wrote $out_md and $out_png (raw results: build/release/bench-peers-results.jsonl)"
