// jobs/type_stats.h — what this process's calls saw happen to the jobs of each type
// (Jobs::type_stats): counters and wall-clock histograms, recorded once a call's commit has
// succeeded. Calls that join the caller's transaction are not recorded: the jobs layer never
// learns whether that transaction commits.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kvq/jobs.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::jobs {

// The run time of a run accepted at `started_ms` (the row's `started`) and ending now; nullopt
// for a run of a row written before runs had a start.
std::optional<Millis> run_time_since(int64_t started_ms);

class TypeStatsRecorder {
 public:
  // A job accepted `queue_latency` after it was due (negative: counted as 0).
  void record_accepted(std::string_view type, Millis queue_latency);
  // A finish: succeeded unless the job was resubmitted (then it only ends the run).
  void record_finished(std::string_view type, bool succeeded, std::optional<Millis> run_time);
  // A fail: retried (pending again) or dead.
  void record_failed(std::string_view type, bool dead, std::optional<Millis> run_time);
  // A lost run (activity timeout or worker departure): retried or dead.
  void record_lost(std::string_view type, bool dead, std::optional<Millis> run_time);
  void record_snoozed(std::string_view type, std::optional<Millis> run_time);
  // A cancel; `run_time` only when it ended a run (the job was running).
  void record_cancelled(std::string_view type, std::optional<Millis> run_time);
  // A run its worker ended by removing the job (remove(Job&)).
  void record_removed(std::string_view type, std::optional<Millis> run_time);

  std::map<std::string, Jobs::TypeStats> snapshot() const;

 private:
  Jobs::TypeStats& of(std::string_view type) KVQ_REQUIRES(mu_);
  void record_run(Jobs::TypeStats& stats, std::optional<Millis> run_time) KVQ_REQUIRES(mu_);
  // A failed or lost attempt's ending: the job went dead or back for a retry, and its run.
  void record_failed_attempt(Jobs::TypeStats& stats, bool dead, std::optional<Millis> run_time)
      KVQ_REQUIRES(mu_);

  mutable util::Mutex mu_;
  std::map<std::string, Jobs::TypeStats, std::less<>> stats_ KVQ_GUARDED_BY(mu_);
};

// For Jobs::cancel (jobs.cc), once its commit succeeded: the run it ended, if the job was
// running (run_time_since(row.started)), or nullopt for a pending job.
void record_cancelled(Jobs::Impl& impl, std::string_view type, std::optional<Millis> run_time);

}  // namespace kvq::jobs
