#!/usr/bin/env bash
# Runs kv_bench (bench/kv_bench.cc): small read-modify-write transactions per second through the
# kv interface and through raw LMDB, sync and nosync, 1/4/16 threads. Prints Google Benchmark's
# console table, keeps the JSON, then prints the ratios docs/benchmarks-layers.md talks about:
#   * kv interface / raw LMDB for each mode and thread count (target: >= 1/1.5 for one writer);
#   * kv interface, sync: 16 threads / 1 thread, the group-commit gain (target: >= 5).
#
# Usage: scripts/run-benchmarks.sh [kv_bench flags...]   e.g. --benchmark_filter=nosync
# Environment:
#   KVQ_BENCH_BIN   use this kv_bench binary instead of building the release preset
#   KVQ_BENCH_OUT   where to write the JSON results (default: build/release/kv_bench.json)
#   KVQ_BENCH_DIR   where the benchmark makes its temporary databases (default: $TMPDIR or /tmp;
#                   must be a real disk, not tmpfs, for sync numbers to mean anything)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bin="${KVQ_BENCH_BIN:-}"
if [ -z "$bin" ]; then
  if [ ! -f build/release/CMakeCache.txt ]; then
    cmake --preset release >/dev/null
  fi
  cmake --build --preset release -j "$(nproc)" --target kv_bench
  bin="build/release/bench/kv_bench"
fi
[ -x "$bin" ] || { echo "run-benchmarks: no executable at $bin" >&2; exit 1; }

out="${KVQ_BENCH_OUT:-$(dirname "$(dirname "$bin")")/kv_bench.json}"
mkdir -p "$(dirname "$out")"

"$bin" --benchmark_format=console --benchmark_out="$out" --benchmark_out_format=json "$@"
echo
echo "JSON results: $out"
echo

python3 - "$out" <<'PY'
import json
import re
import statistics
import sys

with open(sys.argv[1]) as f:
    data = json.load(f)

NAME = re.compile(r"^(BM_KvRmw|BM_RawLmdbRmw)/(sync|nosync)/.*threads:(\d+)$")
samples = {}   # (impl, mode, threads) -> [items_per_second, ...] from plain runs
medians = {}   # same key -> items_per_second of a "median" aggregate, when repetitions were used
for b in data.get("benchmarks", []):
    m = NAME.match(b.get("run_name", b["name"]))
    if not m or b.get("error_occurred") or "items_per_second" not in b:
        continue
    key = (m.group(1), m.group(2), int(m.group(3)))
    if b.get("run_type") == "aggregate":
        if b.get("aggregate_name") == "median":
            medians[key] = b["items_per_second"]
    else:
        samples.setdefault(key, []).append(b["items_per_second"])

def rate(impl, mode, threads):
    key = (impl, mode, threads)
    if key in medians:
        return medians[key]
    if key in samples:
        return statistics.median(samples[key])
    return None

def fmt(x):
    return "n/a" if x is None else f"{x:,.0f}"

print("Transactions per second (median over repetitions, if any)")
print(f"{'mode':<7} {'threads':>7} {'kv interface':>14} {'raw LMDB':>14} {'kv/raw':>8} {'raw/kv':>8}")
threads_seen = sorted({k[2] for k in list(samples) + list(medians)})
for mode in ("sync", "nosync"):
    for t in threads_seen:
        kv, raw = rate("BM_KvRmw", mode, t), rate("BM_RawLmdbRmw", mode, t)
        ratio = f"{kv / raw:.2f}" if kv and raw else "n/a"
        inverse = f"{raw / kv:.2f}" if kv and raw else "n/a"
        print(f"{mode:<7} {t:>7} {fmt(kv):>14} {fmt(raw):>14} {ratio:>8} {inverse:>8}")

print()
print("Targets")
for mode in ("sync", "nosync"):
    kv, raw = rate("BM_KvRmw", mode, 1), rate("BM_RawLmdbRmw", mode, 1)
    if kv and raw:
        verdict = "met" if kv * 1.5 >= raw else "MISSED"
        print(f"  one writer, {mode:<6}: raw/kv = {raw / kv:.2f} (target <= 1.50) -> {verdict}")
    else:
        print(f"  one writer, {mode:<6}: n/a (benchmark not run)")
one, sixteen = rate("BM_KvRmw", "sync", 1), rate("BM_KvRmw", "sync", 16)
if one and sixteen:
    gain = sixteen / one
    verdict = "met" if gain >= 5 else "MISSED"
    print(f"  group commit, kv sync 16 threads / 1 thread = {gain:.2f} (target >= 5.00) -> {verdict}")
else:
    print("  group commit: n/a (benchmark not run)")
raw1, raw16 = rate("BM_RawLmdbRmw", "sync", 1), rate("BM_RawLmdbRmw", "sync", 16)
if raw1 and raw16:
    print(f"  (for comparison, raw LMDB sync 16 threads / 1 thread = {raw16 / raw1:.2f})")
PY
