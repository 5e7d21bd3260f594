// batches_bench — the cost of a batch member's end (kvq/workflows.h), against the same end of a
// job in no batch, in one process on the LMDB backend (nosync).
//
//   BM_MemberFinish/<members>/batch   a sealed batch of <members> jobs, added in transactions of
//                                     1,000 before the timing; one iteration = one member
//                                     accepted and finished (2 store transactions), the last one
//                                     adding the callback. Exactly <members> iterations.
//   BM_MemberFinish/<members>/plain   the same jobs in no batch: the baseline.
//
// A member's end reads and writes the batch's row (and, dead, one key more), never its
// members: the time per member should not grow from 100 to 10,000 members. Reports
// us_per_member (wall time per iteration) and callbacks (1 for /batch: it fired once).
//
// Every run gets a fresh database in a new mkdtemp directory under $KVQ_BENCH_DIR, else $TMPDIR,
// else /tmp, removed when the run ends.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kvq/jobs.h"
#include "kvq/kv.h"
#include "kvq/lmdb_store.h"
#include "kvq/workflows.h"

namespace {

using kvq::Status;
namespace kv = kvq::kv;
namespace jobs = kvq::jobs;

constexpr std::string_view kType = "bench";
constexpr size_t kAddBatch = 1000;

struct Fixture {
  std::string dir;
  std::shared_ptr<kv::Store> store;
  std::unique_ptr<jobs::Jobs> jobs;
  std::string error;

  // A store with `members` pending jobs of kType, in the sealed batch "b" when `batched`.
  void open(int64_t members, bool batched) {
    dir = kvq::bench::make_temp_dir("batches_bench", error);
    if (dir.empty()) return;
    kvq::LmdbOptions options;
    options.path = dir + "/db";
    options.durability = kvq::Durability::kNoSync;
    auto s = kvq::open_lmdb_store(options);
    if (!s.ok()) return fail("open_lmdb_store: " + s.status().to_string());
    store = std::move(*s);
    auto j = jobs::Jobs::open(store, {.run_scheduler = false});
    if (!j.ok()) return fail("Jobs::open: " + j.status().to_string());
    jobs = std::move(*j);
    for (std::string_view type : {kType, std::string_view("done")}) {
      if (Status st = jobs->set_type_timeout(type, std::chrono::minutes(10)); !st.ok())
        return fail("set_type_timeout: " + st.to_string());
    }
    if (batched) {
      auto b = jobs->put_batch("b", {.callback_type = "done", .callback_id = "cb"});
      if (!b.ok()) return fail("put_batch: " + b.status().to_string());
    }
    for (int64_t first = 0; first < members; first += kAddBatch) {
      std::vector<jobs::NewJob> chunk;
      for (int64_t i = first; i < std::min<int64_t>(members, first + kAddBatch); ++i) {
        jobs::NewJob job{"m" + std::to_string(i), "{}", {}};
        if (batched) job.options.batch = "b";
        chunk.push_back(std::move(job));
      }
      auto added = jobs->add_many(kType, chunk);
      if (!added.ok()) return fail("add_many: " + added.status().to_string());
    }
    if (batched) {
      auto sealed = jobs->seal_batch("b");
      if (!sealed.ok()) return fail("seal_batch: " + sealed.status().to_string());
    }
  }
  void fail(std::string why) { error = std::move(why); }
  void close() {
    jobs.reset();
    store.reset();
    kvq::bench::remove_dir(dir);
  }
};

void BM_MemberFinish(benchmark::State& state) {
  const int64_t members = state.range(0);
  const bool batched = state.range(1) != 0;
  Fixture f;
  f.open(members, batched);
  if (!f.error.empty()) {
    state.SkipWithError(f.error.c_str());
    f.close();
    return;
  }
  int64_t n = 0, failures = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto job = f.jobs->accept_job(kType, "m" + std::to_string(n++));
    if (!job.ok()) {
      ++failures;
      continue;
    }
    if (!f.jobs->finish(*job).ok()) ++failures;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  state.counters["us_per_member"] = seconds * 1e6 / static_cast<double>(members);
  state.counters["failures"] = static_cast<double>(failures);
  if (batched) {
    auto b = f.jobs->batch("b");
    state.counters["callbacks"] = b.ok() && b->fired() ? 1 : 0;
    state.counters["counted"] = b.ok() ? static_cast<double>(b->succeeded) : -1;
  }
  state.SetItemsProcessed(state.iterations());
  f.close();
}

void register_benchmarks() {
  for (int64_t members : {100, 10'000}) {
    for (int batched : {1, 0}) {
      benchmark::RegisterBenchmark(
          ("BM_MemberFinish/" + std::to_string(members) + (batched ? "/batch" : "/plain")).c_str(),
          BM_MemberFinish)
          ->Args({members, batched})
          ->Iterations(members)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!kvq::bench::init_benchmarks(argc, argv, "--benchmark_min_time=0.5")) return 1;
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
