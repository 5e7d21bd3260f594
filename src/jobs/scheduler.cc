#include "jobs/scheduler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "jobs/job_store.h"

namespace kvq::jobs {

Scheduler::Scheduler(Jobs& jobs, const Keys& keys) : jobs_(jobs), keys_(keys) {
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    util::MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  watch_.cancel();
}

void Scheduler::watch_token(kv::Watch watch) {
  watch_ = std::move(watch);
  watch_.on_ready([this](const Status& s) {
    if (s.code() == Code::kCancelled) return;
    util::MutexLock lock(mu_);
    changed_ = true;
    cv_.notify_all();
  });
}

Result<kv::Clock::time_point> Scheduler::turn() {
  std::vector<ScheduleInfo> all;
  {
    KVQ_ASSIGN_OR_RETURN(auto txn, jobs_.store().begin());
    KVQ_ASSIGN_OR_RETURN(all, read_schedules(*txn, keys_));
    // At the read's version: a put committed after the read fires it. A watch that has not
    // fired still covers every change since it was made, so it is kept.
    if (!watch_.valid() || watch_.ready()) {
      KVQ_ASSIGN_OR_RETURN(kv::Watch watch, txn->watch(keys_.schedules_token()));
      watch_token(std::move(watch));
    }
  }
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const ScheduleInfo& info : all) {
    if (info.next_run_ms != 0 && !info.paused) earliest = std::min(earliest, info.next_run_ms);
  }
  if (earliest == std::numeric_limits<int64_t>::max()) return kv::Clock::time_point::max();
  const int64_t wait_ms = earliest - now_ms();
  if (wait_ms <= 0) {
    KVQ_RETURN_IF_ERROR(jobs_.run_due_schedules());
    return kv::Clock::now();  // read again: the next occurrences, and anything put meanwhile
  }
  return kv::Clock::now() +
         std::min<kv::Clock::duration>(std::chrono::milliseconds(wait_ms), kMaxSleep);
}

void Scheduler::run() {
  util::MutexLock lock(mu_);
  while (!stopping_) {
    changed_ = false;
    lock.unlock();
    Result<kv::Clock::time_point> wake = turn();
    lock.lock();
    const kv::Clock::time_point deadline =
        wake.ok() ? *wake
                  : kv::Clock::now() + std::chrono::duration_cast<kv::Clock::duration>(kErrorPause);
    while (!stopping_ && !changed_) {
      if (deadline == kv::Clock::time_point::max()) {
        cv_.wait(mu_);
      } else if (!cv_.wait_until(mu_, deadline)) {
        break;
      }
    }
  }
}

}  // namespace kvq::jobs
