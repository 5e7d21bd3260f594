// workers_bench — what worker health costs, and how fast a dead worker's jobs come back, for the
// workers layer (kvq/workers.h) joined to the jobs layer (kvq/jobs.h) on the LMDB backend.
//
// Not a throughput microbenchmark: a plain program that prints two tables per durability mode
// (nosync, then sync), each on a fresh database in a new mkdtemp directory under $KVQ_BENCH_DIR,
// else $TMPDIR, else /tmp (removed at the end).
//
//   1. Heartbeat cost. One Workers (the health monitor) registers kWorkers workers of type "w"
//      with a 3 s health timeout; they heartbeat in the background (about every 1 s each). After
//      a warm-up of kWarmup, a window of kWindow is measured:
//        heartbeats/s        Workers::stats().heartbeats delta / window
//        commits/s           store commit-counter delta / window (on LMDB a transaction's
//                            read_version() is the number of commits that wrote something), i.e.
//                            every store write transaction of the process, all of it for health
//        monitor checks/s    Workers::stats().monitor_checks delta / window
//        cpu                 process user+system CPU (getrusage) / window, and per heartbeat
//      Nothing else runs in the process during the window (the Jobs object is opened but has no
//      type yet, so its background work has not started).
//
//   2. Rescue time (death -> job pending again). The first Workers gets
//      on_departure = jobs.release_worker. For each health timeout T in {500 ms, 2 s}, kRepeats
//      times: a SECOND Workers (no health monitor) registers one more worker of type "w" (so the
//      monitor's check scans kWorkers + 1 rows) with timeout T; the worker accepts a job of type
//      "work" under its id (type activity timeout 10 min, so the jobs activity monitor never
//      re-enqueues it); after max(1 s, T) of normal heartbeating, the second Workers is destroyed
//      (its heartbeat thread stops; the Registration handle is kept, so it does not unregister),
//      one last heartbeat is sent by hand through the handle, and the time from that heartbeat's
//      return to the job's subscription reporting `pending` is measured. The job is then removed.
//      kvq/workers.h promises death between T and T + one check period (T/4, jittered by 20%)
//      after the last heartbeat. As the monitor is written (a worker is dead once its last
//      heartbeat precedes a check made at least T ago), the first check after the last heartbeat
//      can come up to one period later, and the deciding check up to one period after T beyond
//      that, so up to T + 2 periods (T + T/2, +20% jitter) is possible; both bounds are printed.
//      The measured time also includes the jobs notifier's delivery to the subscription.
//
// Run: ./workers_bench   (about 1-2 minutes; no flags)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "kvq/jobs.h"
#include "kvq/kv.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"

namespace {

using kvq::Durability;
using kvq::Status;
namespace kv = kvq::kv;
namespace jobs = kvq::jobs;
namespace workers = kvq::workers;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kWorkers = 1000;
constexpr milliseconds kHealthTimeout{3000};
constexpr milliseconds kWarmup{3000};
constexpr milliseconds kWindow{10000};
constexpr int kRepeats = 5;
constexpr const char* kWorkerType = "w";
constexpr const char* kJobType = "work";

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

// The store's commit counter (LMDB: the read version of a fresh transaction).
bool commit_counter(kv::Store& store, uint64_t& out) {
  auto txn = store.begin();
  if (!txn.ok()) return false;
  auto v = (*txn)->read_version();
  if (!v.ok()) return false;
  out = *v;
  return true;
}

bool fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "workers_bench: %s: %s\n", what.c_str(), s.to_string().c_str());
  return false;
}

struct Latencies {
  milliseconds timeout{0};
  std::vector<double> ms;
  uint64_t declared_dead = 0;
};

bool run_mode(Durability mode) {
  const char* name = mode == Durability::kSync ? "sync" : "nosync";
  std::string error;
  std::string dir = kvq::bench::make_temp_dir("workers_bench", error);
  if (dir.empty()) {
    std::fprintf(stderr, "workers_bench: %s\n", error.c_str());
    return false;
  }
  struct DirGuard {
    std::string& d;
    ~DirGuard() { kvq::bench::remove_dir(d); }
  } guard{dir};

  kvq::LmdbOptions lo;
  lo.path = dir + "/db";
  lo.durability = mode;
  auto opened = kvq::open_lmdb_store(lo);
  if (!opened.ok()) return fail("open_lmdb_store", opened.status());
  std::shared_ptr<kv::Store> store = std::move(*opened);

  auto j = jobs::Jobs::open(store);
  if (!j.ok()) return fail("Jobs::open", j.status());
  std::shared_ptr<jobs::Jobs> jobs_layer = std::move(*j);

  auto on_departure = [jobs_layer](kv::Transaction& txn, const std::string& type,
                                   const std::string& id) -> Status {
    auto released = jobs_layer->release_worker(txn, type, id);
    return released.ok() ? Status::OK() : released.status();
  };

  workers::WorkersOptions monitor_options;
  monitor_options.on_departure = on_departure;
  auto w = workers::Workers::open(store, monitor_options);
  if (!w.ok()) return fail("Workers::open", w.status());
  std::unique_ptr<workers::Workers> monitor = std::move(*w);

  // ---- 1. Heartbeat cost ----
  std::vector<std::shared_ptr<workers::Registration>> regs;
  regs.reserve(kWorkers);
  const auto reg_start = Clock::now();
  for (int i = 0; i < kWorkers; ++i) {
    workers::RegisterOptions ro;
    ro.health_timeout = kHealthTimeout;
    auto r = monitor->register_worker(kWorkerType, "worker-" + std::to_string(i), ro);
    if (!r.ok()) return fail("register_worker", r.status());
    regs.push_back(std::move(*r));
  }
  const double reg_seconds = seconds_since(reg_start);

  std::this_thread::sleep_for(kWarmup);
  uint64_t v0 = 0, v1 = 0;
  if (!commit_counter(*store, v0)) return fail("read_version", Status::OK());
  const auto s0 = monitor->stats();
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(kWindow);
  const double window = seconds_since(t0);
  const double cpu1 = cpu_seconds();
  const auto s1 = monitor->stats();
  if (!commit_counter(*store, v1)) return fail("read_version", Status::OK());

  auto members = monitor->workers(kWorkerType);
  if (!members.ok()) return fail("workers", members.status());
  const size_t live = members->workers.size();

  const double hb_rate = static_cast<double>(s1.heartbeats - s0.heartbeats) / window;
  const double commit_rate = static_cast<double>(v1 - v0) / window;
  const double check_rate = static_cast<double>(s1.monitor_checks - s0.monitor_checks) / window;
  const double cpu_frac = (cpu1 - cpu0) / window;
  const double cpu_per_hb_us =
      (s1.heartbeats > s0.heartbeats)
          ? (cpu1 - cpu0) * 1e6 / static_cast<double>(s1.heartbeats - s0.heartbeats)
          : 0;

  std::printf("\n=== LMDB %s: %d workers of type \"%s\", health timeout %lld ms ===\n", name,
              kWorkers, kWorkerType, static_cast<long long>(kHealthTimeout.count()));
  std::printf(
      "registration of %d workers (serial): %.2f s; live after window: %zu; declared dead in "
      "window: %llu\n",
      kWorkers, reg_seconds, live,
      static_cast<unsigned long long>(s1.declared_dead - s0.declared_dead));
  std::printf(
      "| mode | window s | heartbeats/s | store commits/s | monitor checks/s | CPU (cores) | CPU "
      "µs/heartbeat |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|\n");
  std::printf("| %s | %.1f | %.1f | %.1f | %.2f | %.3f | %.0f |\n", name, window, hb_rate,
              commit_rate, check_rate, cpu_frac, cpu_per_hb_us);
  std::fflush(stdout);

  // ---- 2. Rescue time ----
  if (Status s = jobs_layer->set_type_timeout(kJobType, std::chrono::minutes(10)); !s.ok()) {
    return fail("set_type_timeout", s);
  }
  std::vector<Latencies> results;
  for (milliseconds timeout : {milliseconds(500), milliseconds(2000)}) {
    Latencies lat;
    lat.timeout = timeout;
    const uint64_t dead0 = monitor->stats().declared_dead;
    for (int rep = 0; rep < kRepeats; ++rep) {
      const std::string id = "dying-" + std::to_string(timeout.count()) + "-" + std::to_string(rep);
      workers::WorkersOptions wo;
      wo.run_health_monitor = false;
      wo.on_departure = on_departure;
      auto w2r = workers::Workers::open(store, wo);
      if (!w2r.ok()) return fail("Workers::open (second)", w2r.status());
      std::unique_ptr<workers::Workers> w2 = std::move(*w2r);
      workers::RegisterOptions ro;
      ro.health_timeout = timeout;
      auto reg = w2->register_worker(kWorkerType, id, ro);
      if (!reg.ok()) return fail("register_worker (dying)", reg.status());

      if (Status s = jobs_layer->add(kJobType, id, "{}").status(); !s.ok()) return fail("add", s);
      jobs::AcceptOptions ao;
      ao.worker = id;
      ao.worker_type = kWorkerType;
      ao.timeout = milliseconds(5000);
      auto job = jobs_layer->accept(kJobType, ao);
      if (!job.ok()) return fail("accept", job.status());
      if (job->id != id) return fail("accept returned an unexpected job " + job->id, Status::OK());
      auto sub = jobs_layer->subscribe(kJobType, id);
      if (!sub.ok()) return fail("subscribe", sub.status());
      if ((*sub)->initial().state != jobs::State::kRunning)
        return fail("job not running after accept", Status::OK());

      // Live normally for a while, so the monitor's check period has adapted to this timeout.
      std::this_thread::sleep_for(std::max(milliseconds(1000), timeout));

      w2.reset();  // heartbeat thread stops (joined); the Registration handle stays alive
      Status hb = (*reg)->heartbeat();
      const auto last_beat = Clock::now();
      if (!hb.ok()) return fail("last heartbeat", hb);
      auto ev =
          (*sub)->wait(jobs::State::kPending, last_beat + timeout * 3 + std::chrono::seconds(5));
      const auto pending_at = Clock::now();
      if (!ev.ok()) return fail("wait for pending (" + id + ")", ev.status());
      if (!ev->found || ev->state != jobs::State::kPending)
        return fail("job " + id + " gone", Status::OK());
      lat.ms.push_back(std::chrono::duration<double, std::milli>(pending_at - last_beat).count());
      // The monitor bumps its counter after the commit the subscription already saw: wait for it,
      // so each death is counted under its own T (and to confirm the monitor did the rescue).
      const uint64_t want = dead0 + static_cast<uint64_t>(rep) + 1;
      for (int i = 0; i < 200 && monitor->stats().declared_dead < want; ++i) {
        std::this_thread::sleep_for(milliseconds(5));
      }

      sub->reset();
      if (Status s = jobs_layer->remove(kJobType, id); !s.ok()) return fail("remove", s);
      reg->reset();  // already removed as dead: its unregister finds nothing to do
    }
    lat.declared_dead = monitor->stats().declared_dead - dead0;
    results.push_back(std::move(lat));
  }

  std::printf(
      "\nrescue: last heartbeat -> job pending again (%d repeats; monitor check period ~T/4 "
      "+-20%%)\n",
      kRepeats);
  std::printf(
      "| mode | T ms | min ms | median ms | max ms | T + T/4 ms | T + T/2 ms | declared dead | all "
      "samples ms |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|--:|---|\n");
  for (auto& lat : results) {
    std::vector<double> sorted = lat.ms;
    std::sort(sorted.begin(), sorted.end());
    std::string all;
    for (double x : lat.ms) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.0f", all.empty() ? "" : ", ", x);
      all += buf;
    }
    const double t = static_cast<double>(lat.timeout.count());
    std::printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %llu/%d | %s |\n", name, t,
                sorted.front(), sorted[sorted.size() / 2], sorted.back(), t * 1.25, t * 1.5,
                static_cast<unsigned long long>(lat.declared_dead), kRepeats, all.c_str());
  }
  std::fflush(stdout);

  // Teardown: the 1,000 registrations unregister (one transaction each) before the Workers and
  // the Jobs they call back into go away.
  const auto teardown = Clock::now();
  regs.clear();
  monitor.reset();
  std::printf("teardown (1,000 unregisters): %.2f s\n", seconds_since(teardown));
  return true;
}

}  // namespace

int main() {
  bool ok = run_mode(Durability::kNoSync);
  ok = run_mode(Durability::kSync) && ok;
  return ok ? 0 : 1;
}
