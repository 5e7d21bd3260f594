// jobs_bench — throughput of the jobs layer (kvq/jobs.h) in one process, on the LMDB backend (and
// the lifecycle on etcd, see BM_JobLifecycle/etcd).
//
//   BM_JobLifecycle/<mode>   one iteration = one job through add -> accept -> finish, each in its
//                            own transaction (3 store transactions per job). Every thread adds its
//                            own job ids ("t<thread>-<n>") to one shared type, then accepts (any
//                            due job of that type) and finishes it. 1, 4 and 16 threads.
//   BM_JobLifecycle/nosync/max_running, /nosync/rate
//                            the same on a type whose limit never binds (max_running 1000; a
//                            rate of 1000 per 100 ms): the cost of the limit itself. 1 and 16.
//   BM_JobLifecycle/nosync/groups, /nosync/groups_limited
//                            the same with every job in one of kGroups groups (AddOptions::group,
//                            job n of thread t in group (t * 7919 + n) % kGroups), so accepts
//                            take turns through the queue of groups; _limited adds
//                            max_running_per_group 1000, which never binds. 1 and 16.
//                            Every lifecycle reports aborted_per_job: transactions retried after
//                            a conflict (kv::retry_counts, the whole process) per job.
//   BM_JobLifecycle/etcd     the same on the etcd backend, registered only when KVQ_BENCH_ETCD
//                            names the members' client endpoints ("host:port,host:port"). Each run
//                            uses a fresh key_prefix ("kvq-jobs-bench/<pid>-<time>-<n>/") and
//                            leaves its keys behind (run it against a throwaway etcd).
//   BM_AcceptContention/<mode>
//                            4 and 64 threads accepting + finishing from one type that Setup
//                            pre-filled with kContentionPrefill pending jobs. So that the backlog
//                            never runs dry, each thread tops it up with kTopUpBatch jobs in one
//                            transaction every kTopUpBatch iterations (1/64 of a transaction per
//                            job, included in the timing).
//   BM_AcceptScale/<n>       nosync only: n (1,000 or 1,000,000) pending jobs, prefilled in
//                            transactions of kPrefillBatch adds; each iteration accepts, finishes
//                            and adds one new job, so the backlog stays at n. Reports the mean and
//                            p99 accept latency and the resident set size after prefilling
//                            (rss_mb = VmRSS, rss_anon_mb = RssAnon, i.e. without the mapped LMDB
//                            file pages) and at the end of the run (*_end).
//
// <mode> is sync (Durability::kSync) or nosync (Durability::kNoSync). items_per_second is jobs
// completed (accepted + finished) per second of wall time, summed over the threads. Every job
// carries a 200-byte JSON object {"payload":"xxx..."}. The type timeout is 10 minutes, so the
// activity monitor (which runs, as in production) never re-enqueues anything.
//
// Every run gets a fresh database in a new mkdtemp directory under $KVQ_BENCH_DIR, else $TMPDIR,
// else /tmp, removed when the run ends. BM_AcceptScale runs a fixed number of iterations
// (kScaleIterations) so that its expensive prefill happens once. Failed accepts or finishes are
// counted (accept_failures, finish_failures), not fatal; they should be 0.
//
// Default minimum time per benchmark is 0.5 s (override with --benchmark_min_time=<s>).
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "bench_common.h"
#include "kvq/etcd_store.h"
#include "kvq/jobs.h"
#include "kvq/kv.h"
#include "kvq/lmdb_store.h"

namespace {

using kvq::Durability;
using kvq::Status;
namespace kv = kvq::kv;
namespace jobs = kvq::jobs;

constexpr std::string_view kType = "bench";
constexpr auto kTypeTimeout = std::chrono::minutes(10);
constexpr auto kAcceptTimeout = std::chrono::milliseconds(1000);
constexpr size_t kContentionPrefill = 20'000;
constexpr int kTopUpBatch = 64;
constexpr size_t kPrefillBatch = 1000;
constexpr int64_t kScaleIterations = 20'000;
constexpr int kGroups = 100;

const std::string& payload() {
  static const std::string p = [] {
    std::string s = "{\"payload\":\"";
    s.append(200 - s.size() - 2, 'x');
    s += "\"}";
    return s;
  }();
  return p;
}

using kvq::bench::bench_base_dir;
using kvq::bench::remove_dir;

std::string make_temp_dir(std::string& error) {
  return kvq::bench::make_temp_dir("jobs_bench", error);
}

// A field of /proc/self/status ("VmRSS", "RssAnon", "RssFile") in MiB, or -1 if unreadable.
// RssFile includes the pages of LMDB's memory-mapped data file that this process touched.
double status_mb(std::string_view field = "VmRSS") {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) {
      return static_cast<double>(std::strtoull(line.c_str() + prefix.size(), nullptr, 10)) / 1024.0;
    }
  }
  return -1;
}

// ---- The store + Jobs under test, set up by Setup before the benchmark threads start -----------

struct Fixture {
  std::string dir;
  std::shared_ptr<kv::Store> store;
  std::unique_ptr<jobs::Jobs> jobs;
  std::string error;
  double rss_after_prefill_mb = 0;
  double rss_anon_after_prefill_mb = 0;
  double prefill_seconds = 0;

  void open(Durability mode, uint64_t map_size) {
    error.clear();
    dir = make_temp_dir(error);
    if (dir.empty()) return;
    kvq::LmdbOptions options;
    options.path = dir + "/db";
    options.durability = mode;
    options.initial_map_size = map_size;
    auto s = kvq::open_lmdb_store(options);
    if (!s.ok()) {
      error = "open_lmdb_store: " + s.status().to_string();
      return;
    }
    store = std::move(*s);
    open_jobs();
  }

  // The etcd backend: a fresh key prefix on the members in `endpoints`; nothing on disk here.
  void open_etcd(const std::vector<std::string>& endpoints) {
    error.clear();
    static int runs = 0;
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const std::string prefix =
        "kvq-jobs-bench/" + std::to_string(getpid()) + "-" +
        std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) + "-" +
        std::to_string(runs++) + "/";
    // KVQ_BENCH_ETCD_GROUP_COMMIT=off: each commit its own Txn (EtcdOptions::group_commit).
    const char* group_commit = std::getenv("KVQ_BENCH_ETCD_GROUP_COMMIT");
    // KVQ_BENCH_ETCD_SERIALIZABLE_FIRST_READS=off: EtcdOptions::serializable_first_reads.
    const char* serializable = std::getenv("KVQ_BENCH_ETCD_SERIALIZABLE_FIRST_READS");
    auto s = kvq::open_etcd_store(
        {.endpoints = endpoints,
         .key_prefix = prefix,
         .group_commit = group_commit == nullptr || std::string_view(group_commit) != "off",
         .serializable_first_reads =
             serializable == nullptr || std::string_view(serializable) != "off"});
    if (!s.ok()) {
      error = "open_etcd_store: " + s.status().to_string();
      return;
    }
    store = std::move(*s);
    open_jobs();
  }

  void open_jobs() {
    auto j = jobs::Jobs::open(store);
    if (!j.ok()) {
      error = "Jobs::open: " + j.status().to_string();
      return;
    }
    jobs = std::move(*j);
    if (Status st = jobs->set_type_timeout(kType, kTypeTimeout); !st.ok()) {
      error = "set_type_timeout: " + st.to_string();
      jobs.reset();
    }
  }

  // Adds `n` pending jobs "<prefix><i>" in transactions of kPrefillBatch adds.
  void prefill(size_t n, const std::string& prefix) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t base = 0; base < n && error.empty(); base += kPrefillBatch) {
      const size_t end = std::min(n, base + kPrefillBatch);
      Status st = kv::run(*store, [&](kv::Transaction& txn) -> Status {
        for (size_t i = base; i < end; ++i) {
          KVQ_RETURN_IF_ERROR(jobs->add(txn, kType, prefix + std::to_string(i), payload()));
        }
        return Status::OK();
      });
      if (!st.ok()) error = "prefill: " + st.to_string();
    }
    prefill_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rss_after_prefill_mb = status_mb("VmRSS");
    rss_anon_after_prefill_mb = status_mb("RssAnon");
  }

  void close() {
    jobs.reset();   // stops the background work before the store goes
    store.reset();  // closes the LMDB environment before its files go
    remove_dir(dir);
  }
};

Fixture g_fx;

template <Durability kMode>
void PlainSetup(const benchmark::State&) {
  g_fx.open(kMode, uint64_t{1} << 30);
}

// The lifecycle on a type with a flow-control limit that never binds here, so that what it
// measures is the limit's own cost in the accept: max_running 1000 (16 threads hold at most
// 16), or a rate of 1000 per 100 ms (10k accepts/s, above what one machine's lifecycle
// reaches, so its window holds hundreds of stamps that every accept reads and writes back).
void MaxRunningSetup(const benchmark::State&) {
  g_fx.open(Durability::kNoSync, uint64_t{1} << 30);
  if (g_fx.error.empty()) {
    if (Status st = g_fx.jobs->set_max_running(kType, 1000); !st.ok()) g_fx.error = st.to_string();
  }
}
// Jobs in kGroups groups (g_groups), without a limit or with max_running_per_group 1000.
int g_groups = 0;
void GroupsSetup(const benchmark::State&) {
  g_fx.open(Durability::kNoSync, uint64_t{1} << 30);
  g_groups = kGroups;
}
void GroupsLimitedSetup(const benchmark::State& state) {
  GroupsSetup(state);
  if (g_fx.error.empty()) {
    Status st = g_fx.jobs->set_max_running_per_group(kType, 1000);
    if (!st.ok()) g_fx.error = st.to_string();
  }
}
void RateSetup(const benchmark::State&) {
  g_fx.open(Durability::kNoSync, uint64_t{1} << 30);
  if (g_fx.error.empty()) {
    Status st =
        g_fx.jobs->set_rate_limit(kType, jobs::RateLimit{1000, std::chrono::milliseconds(100)});
    if (!st.ok()) g_fx.error = st.to_string();
  }
}

template <Durability kMode>
void ContentionSetup(const benchmark::State&) {
  g_fx.open(kMode, uint64_t{1} << 30);
  if (g_fx.error.empty()) g_fx.prefill(kContentionPrefill, "pre-");
}

template <size_t kBacklog>
void ScaleSetup(const benchmark::State&) {
  g_fx.open(Durability::kNoSync, uint64_t{4} << 30);
  if (g_fx.error.empty()) g_fx.prefill(kBacklog, "pre-");
}

// Comma-separated "host:port" list from KVQ_BENCH_ETCD; empty when unset.
std::vector<std::string> etcd_endpoints() {
  std::vector<std::string> out;
  const char* v = std::getenv("KVQ_BENCH_ETCD");
  if (v == nullptr) return out;
  std::string_view rest = v;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

void EtcdSetup(const benchmark::State&) { g_fx.open_etcd(etcd_endpoints()); }

void Teardown(const benchmark::State&) {
  g_fx.close();
  g_groups = 0;
}

bool skip_if_broken(benchmark::State& state) {
  if (g_fx.jobs != nullptr && g_fx.error.empty()) return false;
  state.SkipWithError(g_fx.error.empty() ? "no store" : g_fx.error.c_str());
  return true;
}

std::string job_id(const benchmark::State& state, int64_t n) {
  return "t" + std::to_string(state.thread_index()) + "-" + std::to_string(n);
}

// Accepts one job and finishes it, counting failures. Returns whether both succeeded.
bool accept_and_finish(jobs::Jobs& j, int64_t& accept_failures, int64_t& finish_failures) {
  auto job = j.accept(kType, {.timeout = kAcceptTimeout});
  if (!job.ok()) {
    ++accept_failures;
    return false;
  }
  if (!j.finish(*job).ok()) {
    ++finish_failures;
    return false;
  }
  return true;
}

void report_failures(benchmark::State& state, int64_t add_failures, int64_t accept_failures,
                     int64_t finish_failures) {
  state.counters["add_failures"] = static_cast<double>(add_failures);
  state.counters["accept_failures"] = static_cast<double>(accept_failures);
  state.counters["finish_failures"] = static_cast<double>(finish_failures);
}

// ---- 1. Lifecycle
// --------------------------------------------------------------------------------

void BM_JobLifecycle(benchmark::State& state) {
  if (skip_if_broken(state)) return;
  jobs::Jobs& j = *g_fx.jobs;
  int64_t n = 0, add_failures = 0, accept_failures = 0, finish_failures = 0;
  jobs::AddOptions options;
  const kv::RetryCounts retries_before = kv::retry_counts();
  for (auto _ : state) {
    if (g_groups > 0)
      options.group = "g" + std::to_string((state.thread_index() * 7919 + n) % g_groups);
    if (!j.add(kType, job_id(state, n++), payload(), options).ok()) {
      ++add_failures;
      continue;
    }
    accept_and_finish(j, accept_failures, finish_failures);
  }
  state.SetItemsProcessed(state.iterations());
  // Transactions of the whole process retried after a conflict while thread 0 ran, over about
  // as many jobs as all threads did meanwhile (counters are summed over threads: one reports).
  if (state.thread_index() == 0) {
    const auto aborted = kv::retry_counts().aborted - retries_before.aborted;
    const auto jobs_done = std::max<int64_t>(1, state.iterations() * state.threads());
    state.counters["aborted_per_job"] =
        static_cast<double>(aborted) / static_cast<double>(jobs_done);
  }
  // add + accept + finish: three store transactions per job.
  state.counters["txns_per_s"] = benchmark::Counter(3.0 * static_cast<double>(state.iterations()),
                                                    benchmark::Counter::kIsRate);
  report_failures(state, add_failures, accept_failures, finish_failures);
}

// ---- 2. Accept contention -----------------------------------------------------------------------

Status add_batch(jobs::Jobs& j, const benchmark::State& state, int64_t first, int count) {
  return kv::run(j.store(), [&](kv::Transaction& txn) -> Status {
    for (int i = 0; i < count; ++i)
      KVQ_RETURN_IF_ERROR(j.add(txn, kType, job_id(state, first + i), payload()));
    return Status::OK();
  });
}

void BM_AcceptContention(benchmark::State& state) {
  if (skip_if_broken(state)) return;
  jobs::Jobs& j = *g_fx.jobs;
  int64_t n = 0, add_failures = 0, accept_failures = 0, finish_failures = 0;
  for (auto _ : state) {
    if (n % kTopUpBatch == 0 && !add_batch(j, state, n, kTopUpBatch).ok()) ++add_failures;
    ++n;
    accept_and_finish(j, accept_failures, finish_failures);
  }
  state.SetItemsProcessed(state.iterations());
  report_failures(state, add_failures, accept_failures, finish_failures);
}

// ---- 3. Scale -----------------------------------------------------------------------------------

void BM_AcceptScale(benchmark::State& state) {
  if (skip_if_broken(state)) return;
  jobs::Jobs& j = *g_fx.jobs;
  int64_t n = 0, add_failures = 0, accept_failures = 0, finish_failures = 0;
  std::vector<double> accept_us;
  accept_us.reserve(static_cast<size_t>(kScaleIterations));
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto job = j.accept(kType, {.timeout = kAcceptTimeout});
    accept_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!job.ok()) {
      ++accept_failures;
    } else if (!j.finish(*job).ok()) {
      ++finish_failures;
    }
    if (!j.add(kType, job_id(state, n++), payload()).ok()) ++add_failures;
  }
  state.SetItemsProcessed(state.iterations());
  if (!accept_us.empty()) {
    double sum = 0;
    for (double us : accept_us) sum += us;
    std::sort(accept_us.begin(), accept_us.end());
    state.counters["accept_us_mean"] = sum / static_cast<double>(accept_us.size());
    state.counters["accept_us_p50"] = accept_us[accept_us.size() / 2];
    state.counters["accept_us_p99"] = accept_us[accept_us.size() * 99 / 100];
  }
  state.counters["rss_mb"] = g_fx.rss_after_prefill_mb;
  state.counters["rss_anon_mb"] = g_fx.rss_anon_after_prefill_mb;
  state.counters["rss_mb_end"] = status_mb("VmRSS");
  state.counters["rss_anon_mb_end"] = status_mb("RssAnon");
  state.counters["prefill_s"] = g_fx.prefill_seconds;
  auto pending = j.pending_count(kType, {.limit = 2'000'000});
  state.counters["pending_end"] = pending.ok() ? static_cast<double>(*pending) : -1.0;
  report_failures(state, add_failures, accept_failures, finish_failures);
}

void register_all() {
  struct Variant {
    const char* name;
    void (*fn)(benchmark::State&);
    void (*setup)(const benchmark::State&);
    std::vector<int> threads;
  };
  const Variant variants[] = {
      {"BM_JobLifecycle/nosync", BM_JobLifecycle, PlainSetup<Durability::kNoSync>, {1, 4, 16}},
      {"BM_JobLifecycle/sync", BM_JobLifecycle, PlainSetup<Durability::kSync>, {1, 4, 16}},
      {"BM_JobLifecycle/nosync/max_running", BM_JobLifecycle, MaxRunningSetup, {1, 16}},
      {"BM_JobLifecycle/nosync/rate", BM_JobLifecycle, RateSetup, {1, 16}},
      {"BM_JobLifecycle/nosync/groups", BM_JobLifecycle, GroupsSetup, {1, 16}},
      {"BM_JobLifecycle/nosync/groups_limited", BM_JobLifecycle, GroupsLimitedSetup, {1, 16}},
      {"BM_AcceptContention/nosync",
       BM_AcceptContention,
       ContentionSetup<Durability::kNoSync>,
       {4, 64}},
      {"BM_AcceptContention/sync",
       BM_AcceptContention,
       ContentionSetup<Durability::kSync>,
       {4, 64}},
  };
  for (const Variant& v : variants) {
    auto* b = benchmark::RegisterBenchmark(v.name, v.fn)
                  ->Setup(v.setup)
                  ->Teardown(Teardown)
                  ->UseRealTime();
    for (int t : v.threads) b->Threads(t);
  }
  if (const auto endpoints = etcd_endpoints(); !endpoints.empty()) {
    std::string joined;
    for (const auto& e : endpoints) joined += (joined.empty() ? "" : ",") + e;
    benchmark::AddCustomContext("jobs_bench_etcd", joined);
    auto* b = benchmark::RegisterBenchmark("BM_JobLifecycle/etcd", BM_JobLifecycle)
                  ->Setup(EtcdSetup)
                  ->Teardown(Teardown)
                  ->UseRealTime();
    for (int t : {1, 4, 16}) b->Threads(t);
  } else {
    std::fprintf(stderr,
                 "jobs_bench: KVQ_BENCH_ETCD is not set; BM_JobLifecycle/etcd is not registered\n");
  }
  benchmark::RegisterBenchmark("BM_AcceptScale/nosync/pending:1000", BM_AcceptScale)
      ->Setup(ScaleSetup<1'000>)
      ->Teardown(Teardown)
      ->Iterations(kScaleIterations)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_AcceptScale/nosync/pending:1000000", BM_AcceptScale)
      ->Setup(ScaleSetup<1'000'000>)
      ->Teardown(Teardown)
      ->Iterations(kScaleIterations)
      ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  if (!kvq::bench::init_benchmarks(argc, argv, "--benchmark_min_time=0.5")) return 1;
  benchmark::AddCustomContext("jobs_bench_dir", bench_base_dir());
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
