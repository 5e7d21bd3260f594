// jobs/scheduler.h — the loop that enqueues schedules' due occurrences (Jobs::put_schedule).
//
// One thread per Jobs that runs the scheduler (JobsOptions::run_scheduler). It reads every
// schedule's next_run_ms, sleeps until the earliest of them comes (by this machine's wall
// clock), then runs Jobs::run_due_schedules, which enqueues each due schedule's occurrences in
// transactions that also advance its next_run_ms — so any number of processes may run the loop
// at once and each occurrence is still enqueued exactly once: the processes that lose the race
// conflict, retry, and find the schedule already advanced. A put or remove rewrites the
// schedules token, which the loop watches, so a new schedule is seen at once in every process.
// With no schedules the loop only waits on that watch. A sleep is cut to kMaxSleep, so that a
// step of the wall clock is noticed; errors (the store down) are retried after kErrorPause.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "util/mutex.h"

namespace kvq::jobs {

// Every schedule stored, by name, read in `txn` with snapshot (schedules.cc).
Result<std::vector<ScheduleInfo>> read_schedules(kv::Transaction& txn, const Keys& keys);

class Scheduler {
 public:
  static constexpr std::chrono::seconds kMaxSleep{60};
  static constexpr std::chrono::seconds kErrorPause{1};

  // Starts the thread. REQUIRES: `jobs` outlives the Scheduler; `keys` are its keys.
  Scheduler(Jobs& jobs, const Keys& keys);
  // Stops the thread, waiting for a tick under way to end.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

 private:
  void run() KVQ_EXCLUDES(mu_);
  // One turn: reads the schedules and watches the schedules token (unless the last watch still
  // waits) in one transaction it never commits, so a turn that finds nothing due commits
  // nothing; then runs the due ones. Returns when to look again (steady clock), or max() for
  // "when the token changes".
  Result<kv::Clock::time_point> turn();
  // Makes a change of the schedules token wake the loop.
  void watch_token(kv::Watch watch) KVQ_EXCLUDES(mu_);

  Jobs& jobs_;
  const Keys& keys_;
  util::Mutex mu_;
  util::CondVar cv_;
  bool changed_ KVQ_GUARDED_BY(mu_) = false;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  kv::Watch watch_;  // only the loop's thread sets it; cancelled after it is joined
  std::thread thread_;
};

}  // namespace kvq::jobs
