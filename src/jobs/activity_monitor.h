// jobs/activity_monitor.h — re-enqueues running jobs whose worker went quiet, and removes
// finished jobs whose type's retention has passed (retention.h).
//
// One thread per Jobs (kv::TypeMonitor's loop). It keeps the set of types (from their timeouts,
// re-read whenever the types token changes) and checks each type about
// monitor_checks_per_timeout times per timeout, jittered. A check records the store's read
// version, dated when the store answered (kv::CheckHistory). A running job whose activity seq is
// below the version of a check at least one timeout old has not been updated since that check:
// it has been idle for at least one timeout, and is re-enqueued.
//
// The promise: a run is lost only when its worker has not reported for the timeout — no call
// on the job whose transaction began within the timeout has committed. It holds when the
// monitor's reads stall (a check is dated by the answer, so what committed during a stall never
// looks old), when the monitor's process is paused or its store stalls (between two checks at
// most 1.5 periods count, so such time counts toward nobody's idleness), and when the
// re-enqueue transaction stalls (it re-reads the job and commits only if it is unchanged). A
// job whose worker really stopped is re-enqueued at most about 1 + 2.4/checks_per_timeout
// timeouts of that counted time after its last update (the first check after the update may
// come one jittered period late, the deciding one a period after the timeout) — later by about
// the length of any stall. Only the store's commit order and this process's own monotonic clock
// are compared, never clocks of different machines. Any number of processes may run monitors at
// once: re-enqueueing re-reads each job row, so two monitors conflict and the loser finds
// nothing left to do.
//
// Jobs with a timeout of their own (own_timeouts.h) are judged the same way, each timeout
// against the same check history: a type whose jobs were added with own timeouts is checked
// about monitor_checks_per_timeout times per its shortest timeout, and its history kept for
// its longest (checks are never more frequent than kMaxChecksPerLongest per longest timeout,
// which bounds the history a type with both a 1 s and a 7-day timeout keeps).
//
// A type with a finished retention is also swept every retention/4 (clamped to 0.25–60 s,
// jittered) for jobs that finished more than one retention ago by this machine's wall clock;
// retention is meant in minutes to days, where clock skew between machines does not matter. A
// sweep works at most about 200 ms at a time and then yields to the other types' checks, so a
// large backlog (a retention newly set on a type with many finished jobs) is removed over
// several turns instead of holding up re-enqueueing.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "jobs/own_timeouts.h"
#include "jobs/schema.h"
#include "jobs/type_stats.h"
#include "kv/check_history.h"
#include "kv/type_monitor.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

struct ActivityTypeState {
  Millis timeout{0};
  std::optional<Millis> retention;
  std::optional<OwnTimeoutSpan> own;  // of jobs added with their own timeout, if any ever was
  kv::CheckHistory checks;
  kv::Clock::time_point next_check{};  // the earlier of the two below
  kv::Clock::time_point next_activity_check{};
  kv::Clock::time_point next_sweep{};
  size_t batch = 16;
  size_t sweep_batch = 16;
};

class ActivityMonitor final : private kv::TypeMonitor<ActivityTypeState> {
 public:
  // Lost runs are recorded in `type_stats`, which outlives the monitor.
  ActivityMonitor(kv::Store& store, const Keys& keys, const JobsOptions& options,
                  TypeStatsRecorder& type_stats);
  ~ActivityMonitor() override;

  uint64_t reenqueued() const { return reenqueued_.load(); }
  uint64_t gave_up() const { return gave_up_.load(); }
  uint64_t checks() const { return checks_.load(); }
  uint64_t expired() const { return expired_.load(); }

 private:
  using TypeState = ActivityTypeState;

  Status refresh_types() override;
  void check(const std::string& type, TypeState& state) override;
  void check_activity(const std::string& type, TypeState& state, kv::Clock::time_point now);
  void sweep_finished(const std::string& type, TypeState& state, kv::Clock::time_point now);
  // Re-enqueues running jobs of `type` whose activity entries in [begin, end) it finds, from
  // (18) when `own` else from (3); returns how many.
  Result<size_t> reenqueue_batch(const std::string& type,
                                 const std::pair<std::string, std::string>& stale, bool own,
                                 size_t batch);
  // Re-enqueues the runs with an own timeout that have been idle that long.
  void check_own_timeouts(const std::string& type, TypeState& state, kv::Clock::time_point now);

  kv::Store& store_;
  const Keys& keys_;
  const JobsOptions& options_;
  TypeStatsRecorder& type_stats_;
  std::atomic<uint64_t> reenqueued_{0};
  std::atomic<uint64_t> gave_up_{0};
  std::atomic<uint64_t> checks_{0};
  std::atomic<uint64_t> expired_{0};
};

}  // namespace kvq::jobs
