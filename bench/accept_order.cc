// accept_order — how far from FIFO concurrent acceptors hand jobs out, and at what rate, in one
// process on the LMDB backend. A plain program (prints one line per run).
//
//   ./build/release/bench/accept_order [--jobs N] [--workers W] [--durability sync|nosync]
//
// Adds N jobs (default 4,000) of one type and one priority, job i scheduled i ms after the
// first, all due; then W threads (default 16) each accept (timeout 0) and finish until nothing
// is due. The k-th accept to return (counted across threads as each returns) got job i; its
// displacement is |k - i|: 0 for every job when jobs go out in scheduled order. Reports the
// mean, p99 and max displacement, the share of jobs out of place, and jobs/s of the
// accept + finish phase (wall time). With one worker every displacement must be 0.
//
// Each run uses a fresh database in a mkdtemp directory under $KVQ_BENCH_DIR, else $TMPDIR,
// else /tmp, removed at the end.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"

namespace {

using namespace std::chrono;
using kvq::Code;

int fail(const std::string& what, const kvq::Status& s) {
  std::fprintf(stderr, "accept_order: %s: %s\n", what.c_str(), s.to_string().c_str());
  return 1;
}

std::string job_id(size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "j%07zu", i);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n_jobs = 4000;
  size_t n_workers = 16;
  auto durability = kvq::Durability::kNoSync;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--jobs"))
      n_jobs = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--workers"))
      n_workers = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--durability")) {
      durability =
          std::strcmp(argv[i + 1], "sync") ? kvq::Durability::kNoSync : kvq::Durability::kSync;
    } else {
      std::fprintf(stderr,
                   "usage: accept_order [--jobs N] [--workers W] [--durability sync|nosync]\n");
      return 2;
    }
  }
  if (n_jobs == 0 || n_workers == 0)
    return std::fprintf(stderr, "accept_order: --jobs and --workers must be > 0\n"), 2;

  std::string error;
  std::string dir = kvq::bench::make_temp_dir("accept_order", error);
  if (dir.empty()) return std::fprintf(stderr, "accept_order: %s\n", error.c_str()), 1;
  int rc = [&]() -> int {
    auto store = kvq::open_lmdb_store({.path = dir, .durability = durability});
    if (!store.ok()) return fail("open", store.status());
    auto opened = kvq::jobs::Jobs::open(*store);
    if (!opened.ok()) return fail("Jobs::open", opened.status());
    auto& jobs = **opened;
    if (auto s = jobs.set_type_timeout("order", minutes(10)); !s.ok())
      return fail("set_type_timeout", s);
    const int64_t first =
        duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() -
        static_cast<int64_t>(n_jobs) - 1000;
    constexpr size_t kAddBatch = 500;
    for (size_t i = 0; i < n_jobs;) {
      const size_t end = std::min(n_jobs, i + kAddBatch);
      auto s = kvq::kv::run(**store, [&](kvq::kv::Transaction& txn) -> kvq::Status {
        for (size_t j = i; j < end; ++j) {
          KVQ_RETURN_IF_ERROR(jobs.add(txn, "order", job_id(j), "{}",
                                       {.scheduled_time_ms = first + static_cast<int64_t>(j)}));
        }
        return kvq::Status::OK();
      });
      if (!s.ok()) return fail("add", s);
      i = end;
    }

    std::vector<size_t> got(n_jobs, SIZE_MAX);  // got[k]: the job the k-th accept returned
    std::atomic<size_t> next{0};
    std::atomic<size_t> failures{0};
    const auto start = steady_clock::now();
    std::vector<std::thread> threads;
    for (size_t w = 0; w < n_workers; ++w) {
      threads.emplace_back([&] {
        for (;;) {
          auto job = jobs.accept("order", {.worker = "w"});
          if (!job.ok()) {
            if (job.status().code() != Code::kDeadlineExceeded) failures++;
            return;
          }
          const size_t k = next.fetch_add(1);
          if (k < got.size()) got[k] = std::strtoul(job->id.c_str() + 1, nullptr, 10);
          if (!jobs.finish(*job).ok()) failures++;
        }
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = duration<double>(steady_clock::now() - start).count();
    const size_t taken = std::min(next.load(), n_jobs);
    std::vector<size_t> displacement;
    for (size_t k = 0; k < taken; ++k) displacement.push_back(got[k] > k ? got[k] - k : k - got[k]);
    std::sort(displacement.begin(), displacement.end());
    double sum = 0;
    size_t out_of_place = 0;
    for (size_t d : displacement) sum += static_cast<double>(d), out_of_place += d != 0;
    const size_t p99 = displacement.empty() ? 0 : displacement[displacement.size() * 99 / 100];
    std::printf(
        "workers=%zu jobs=%zu taken=%zu failures=%zu  displacement mean=%.1f p99=%zu max=%zu "
        "out_of_place=%.1f%%  jobs/s=%.0f\n",
        n_workers, n_jobs, taken, failures.load(), taken ? sum / static_cast<double>(taken) : 0.0,
        p99, displacement.empty() ? 0 : displacement.back(),
        taken ? 100.0 * static_cast<double>(out_of_place) / static_cast<double>(taken) : 0.0,
        static_cast<double>(taken) / seconds);
    return taken == n_jobs && failures == 0 ? 0 : 1;
  }();
  kvq::bench::remove_dir(dir);
  return rc;
}
