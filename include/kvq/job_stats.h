// kvq/job_stats.h — what a Jobs counts, for dashboards, metrics and tests: the jobs of a type
// by state (Jobs::count), its background work (Jobs::stats) and what its calls saw happen to
// each type (Jobs::type_stats). Plain values: a copy taken when the call was made.
#pragma once

#include <cstdint>
#include <vector>

namespace kvq::jobs {

// Pending (due or not), running and finished jobs of a type, each counted up to a limit.
struct StateCounts {
  uint64_t pending = 0;    // scheduled + due
  uint64_t scheduled = 0;  // pending, not yet due
  uint64_t running = 0;
  uint64_t finished = 0;  // of which:
  uint64_t dead = 0;
  uint64_t cancelled = 0;
  uint64_t waiting = 0;  // waiting on dependencies (kvq/workflows.h)
};

// Counters of what this process's background work did, for metrics and tests.
struct Stats {
  uint64_t reenqueued_by_monitor = 0;
  uint64_t monitor_checks = 0;
  // Finished jobs this process's monitor removed. Like reenqueued_by_monitor, it counts what
  // the monitor saw commit: a removal whose commit result was unknown (kv.h) and that did
  // apply is not counted, as its retry finds nothing left to remove.
  uint64_t removed_by_retention = 0;
  // Lost runs this process's monitor ended by giving up (max_lost_runs) rather than
  // re-enqueueing; counted as reenqueued_by_monitor is. Not included in it.
  uint64_t gave_up_by_monitor = 0;
};

// What this process's calls saw happen to the jobs of each type since open, for metrics:
// counted when the call's commit succeeded (a commit whose result was unknown and that did
// apply is counted once, by the retry that recognises it). Latencies are wall-clock.
struct Histogram {
  // Upper bounds in seconds of every bucket but the last (+Inf), shared by all histograms.
  static const std::vector<double>& bounds();
  std::vector<uint64_t> counts;  // per bucket, not cumulative: bounds().size() + 1 of them
  uint64_t count = 0;
  double sum_seconds = 0;
};
struct TypeStats {
  uint64_t succeeded = 0;  // finish, not resubmitted
  uint64_t failed = 0;     // fail calls (each a failed attempt)
  uint64_t lost = 0;       // lost runs this process re-enqueued or ended (monitor, departures)
  uint64_t retried = 0;    // failed or lost attempts that went back to pending
  uint64_t dead = 0;       // jobs that ended dead
  uint64_t cancelled = 0;
  uint64_t removed = 0;     // runs ended by their worker removing the job (remove(Job&))
  Histogram queue_latency;  // due (scheduled time) -> accepted, per accept
  Histogram run_time;  // accepted -> ended (finish, fail, snooze, lost, cancel, remove), per run
};

}  // namespace kvq::jobs
