// kv_bench — small read-modify-write transactions per second, two ways, in one process:
//
//   BM_KvRmw/<mode>      kv::run(store, fn) on the LMDB backend, where fn reads "c/<thread>" and
//                        writes it back incremented: the cost of the kv interface + its commit
//                        (versioned values, commit counter, validation, group commit).
//   BM_RawLmdbRmw/<mode> the same work as bare LMDB calls: mdb_txn_begin (write), mdb_get,
//                        mdb_put, mdb_txn_commit. LMDB serializes the writers; in sync mode every
//                        commit does its own fsync.
//
// <mode> is sync (Durability::kSync / no MDB_NOSYNC) or nosync (Durability::kNoSync /
// MDB_NOSYNC). Each runs with 1, 4 and 16 threads; every thread uses its own key, so there are
// no logical conflicts. items_per_second is committed transactions per second of wall time,
// summed over the threads.
//
// Every run (each of Google Benchmark's iteration-count trials, too) gets a fresh database in a
// new directory made by mkdtemp under $KVQ_BENCH_DIR, else $TMPDIR, else /tmp, removed when the
// run ends. Put that on the disk you care about: on tmpfs fsync is free and sync means nothing.
// After its loop each thread checks that its counter equals its iteration count.
//
// Default minimum time per benchmark is 1 s (override with --benchmark_min_time=<s>); the whole
// binary takes well under two minutes.
#include <benchmark/benchmark.h>
#include <lmdb.h>
#include <stdlib.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "bench_common.h"
#include "kvq/kv.h"
#include "kvq/lmdb_store.h"

namespace {

using kvq::Durability;

constexpr uint64_t kMapSize = uint64_t{1} << 30;

using kvq::bench::bench_base_dir;
using kvq::bench::remove_dir;

std::string make_temp_dir(std::string& error) {
  return kvq::bench::make_temp_dir("kv_bench", error);
}

std::string thread_key(const benchmark::State& state) {
  return "c/" + std::to_string(state.thread_index());
}

// The counter encoding both variants use: decimal ASCII. Absent or unparsable reads as 0.
uint64_t parse_counter(std::string_view s) {
  uint64_t n = 0;
  std::from_chars(s.data(), s.data() + s.size(), n);
  return n;
}

struct CounterText {
  char buf[24];
  size_t size;
  std::string_view view() const { return {buf, size}; }
};

CounterText format_counter(uint64_t n) {
  CounterText out{};
  out.size =
      static_cast<size_t>(std::to_chars(out.buf, out.buf + sizeof(out.buf), n).ptr - out.buf);
  return out;
}

// ---- (a) through the kv interface -------------------------------------------------------------

// Set up by Setup (thread 0, before the benchmark threads start) and torn down after they join,
// so the benchmark threads only read these.
std::shared_ptr<kvq::kv::Store> g_store;
std::string g_store_dir;
std::string g_store_error;

template <Durability kMode>
void KvSetup(const benchmark::State&) {
  g_store_error.clear();
  g_store_dir = make_temp_dir(g_store_error);
  if (g_store_dir.empty()) return;
  kvq::LmdbOptions options;
  options.path = g_store_dir + "/db";
  options.durability = kMode;
  options.initial_map_size = kMapSize;
  auto store = kvq::open_lmdb_store(options);
  if (!store.ok()) {
    g_store_error = "open_lmdb_store: " + store.status().to_string();
    return;
  }
  g_store = std::move(*store);
}

void KvTeardown(const benchmark::State&) {
  g_store.reset();  // closes the LMDB environment before its files go
  remove_dir(g_store_dir);
}

kvq::Status kv_increment(kvq::kv::Store& store, const std::string& key, uint64_t* seen = nullptr) {
  return kvq::kv::run(store, [&](kvq::kv::Transaction& t) -> kvq::Status {
    auto value = t.get(key);
    if (!value.ok()) return value.status();
    const uint64_t n = *value ? parse_counter(**value) : 0;
    if (seen != nullptr) {  // read-only check: no write
      *seen = n;
      return kvq::Status::OK();
    }
    const CounterText next = format_counter(n + 1);
    t.set(key, next.view());
    return kvq::Status::OK();
  });
}

void BM_KvRmw(benchmark::State& state) {
  if (!g_store) {
    state.SkipWithError(g_store_error.empty() ? "no store" : g_store_error.c_str());
    return;
  }
  kvq::kv::Store& store = *g_store;
  const std::string key = thread_key(state);
  for (auto _ : state) {
    if (kvq::Status s = kv_increment(store, key); !s.ok()) {
      state.SkipWithError(("kv::run: " + s.to_string()).c_str());
      break;
    }
  }
  if (state.error_occurred()) return;
  uint64_t final_count = 0;
  if (kvq::Status s = kv_increment(store, key, &final_count); !s.ok()) {
    state.SkipWithError(("final read: " + s.to_string()).c_str());
    return;
  }
  if (final_count != static_cast<uint64_t>(state.iterations())) {
    state.SkipWithError("counter does not match the number of committed increments");
    return;
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- (b) raw LMDB -------------------------------------------------------------------------------

MDB_env* g_raw_env = nullptr;
MDB_dbi g_raw_dbi = 0;
std::string g_raw_dir;
std::string g_raw_error;

std::string lmdb_error(const char* what, int rc) {
  return std::string(what) + ": " + mdb_strerror(rc);
}

void close_raw_env() {
  if (g_raw_env != nullptr) mdb_env_close(g_raw_env);
  g_raw_env = nullptr;
}

template <Durability kMode>
void RawSetup(const benchmark::State&) {
  g_raw_error.clear();
  g_raw_dir = make_temp_dir(g_raw_error);
  if (g_raw_dir.empty()) return;
  auto fail = [](std::string message) {
    g_raw_error = std::move(message);
    close_raw_env();
  };
  if (int rc = mdb_env_create(&g_raw_env); rc) return fail(lmdb_error("mdb_env_create", rc));
  mdb_env_set_maxdbs(g_raw_env, 2);
  if (int rc = mdb_env_set_mapsize(g_raw_env, kMapSize); rc) {
    return fail(lmdb_error("mdb_env_set_mapsize", rc));
  }
  unsigned flags = MDB_NOTLS;
  if (kMode == Durability::kNoSync) flags |= MDB_NOSYNC;
  if (int rc = mdb_env_open(g_raw_env, g_raw_dir.c_str(), flags, 0644); rc) {
    return fail(lmdb_error("mdb_env_open", rc));
  }
  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(g_raw_env, nullptr, 0, &txn); rc)
    return fail(lmdb_error("mdb_txn_begin", rc));
  // A named database, like the kv backend's "data".
  if (int rc = mdb_dbi_open(txn, "data", MDB_CREATE, &g_raw_dbi); rc) {
    mdb_txn_abort(txn);
    return fail(lmdb_error("mdb_dbi_open", rc));
  }
  if (int rc = mdb_txn_commit(txn); rc) return fail(lmdb_error("mdb_txn_commit", rc));
}

void RawTeardown(const benchmark::State&) {
  close_raw_env();
  remove_dir(g_raw_dir);
}

// One read-modify-write write transaction. Returns an LMDB error message, or "" on success.
std::string raw_increment(MDB_env* env, MDB_dbi dbi, const std::string& key) {
  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(env, nullptr, 0, &txn); rc) return lmdb_error("mdb_txn_begin", rc);
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{};
  uint64_t n = 0;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == MDB_SUCCESS) {
    n = parse_counter({static_cast<const char*>(v.mv_data), v.mv_size});
  } else if (rc != MDB_NOTFOUND) {
    mdb_txn_abort(txn);
    return lmdb_error("mdb_get", rc);
  }
  CounterText next = format_counter(n + 1);
  MDB_val nv{next.size, next.buf};
  if (rc = mdb_put(txn, dbi, &k, &nv, 0); rc) {
    mdb_txn_abort(txn);
    return lmdb_error("mdb_put", rc);
  }
  if (rc = mdb_txn_commit(txn); rc) return lmdb_error("mdb_txn_commit", rc);
  return {};
}

std::optional<uint64_t> raw_read(MDB_env* env, MDB_dbi dbi, const std::string& key) {
  MDB_txn* txn = nullptr;
  if (mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) != MDB_SUCCESS) return std::nullopt;
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{};
  std::optional<uint64_t> out;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == MDB_SUCCESS) out = parse_counter({static_cast<const char*>(v.mv_data), v.mv_size});
  if (rc == MDB_NOTFOUND) out = 0;
  mdb_txn_abort(txn);
  return out;
}

void BM_RawLmdbRmw(benchmark::State& state) {
  if (g_raw_env == nullptr) {
    state.SkipWithError(g_raw_error.empty() ? "no LMDB environment" : g_raw_error.c_str());
    return;
  }
  MDB_env* env = g_raw_env;
  const MDB_dbi dbi = g_raw_dbi;
  const std::string key = thread_key(state);
  for (auto _ : state) {
    if (std::string err = raw_increment(env, dbi, key); !err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
  }
  if (state.error_occurred()) return;
  if (raw_read(env, dbi, key) != static_cast<uint64_t>(state.iterations())) {
    state.SkipWithError("counter does not match the number of committed increments");
    return;
  }
  state.SetItemsProcessed(state.iterations());
}

void register_all() {
  struct Variant {
    const char* name;
    void (*fn)(benchmark::State&);
    void (*setup)(const benchmark::State&);
    void (*teardown)(const benchmark::State&);
  };
  const Variant variants[] = {
      {"BM_KvRmw/sync", BM_KvRmw, KvSetup<Durability::kSync>, KvTeardown},
      {"BM_KvRmw/nosync", BM_KvRmw, KvSetup<Durability::kNoSync>, KvTeardown},
      {"BM_RawLmdbRmw/sync", BM_RawLmdbRmw, RawSetup<Durability::kSync>, RawTeardown},
      {"BM_RawLmdbRmw/nosync", BM_RawLmdbRmw, RawSetup<Durability::kNoSync>, RawTeardown},
  };
  for (const Variant& v : variants) {
    benchmark::RegisterBenchmark(v.name, v.fn)
        ->Setup(v.setup)
        ->Teardown(v.teardown)
        ->Threads(1)
        ->Threads(4)
        ->Threads(16)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!kvq::bench::init_benchmarks(argc, argv, "--benchmark_min_time=1")) return 1;
  benchmark::AddCustomContext("kv_bench_dir", bench_base_dir());
  benchmark::AddCustomContext("lmdb_version", mdb_version(nullptr, nullptr, nullptr));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
