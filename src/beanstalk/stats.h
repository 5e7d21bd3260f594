// beanstalk/stats.h — what `stats`, `stats-tube`, `stats-job` and `list-tubes` answer, as the
// YAML protocol.txt gives, from the store's job counts and this process's Counters.
//
// Fields kvq cannot know as beanstalkd does are documented in docs/beanstalk.md ("Stats"): a
// job's "reserves", "timeouts", "releases" and "buries" are derived from what the job keeps (its
// attempts, snoozes and last kMaxErrorsKept errors), the binlog fields are 0, and the cmd-*,
// connection and total-jobs counts are this process's.
//
// Thread-safety: pure functions of their arguments and the store.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "beanstalk/counters.h"
#include "kvq/jobs.h"

namespace kvq::beanstalk {

// beanstalkd's job states as kvq's map onto them: pending and due = ready, pending not yet
// due = delayed, running = reserved, finished dead = buried.
enum class JobState { kReady, kDelayed, kReserved, kBuried };
std::string_view job_state_name(JobState state);
// nullopt for a job finished otherwise than dead (over HTTP): the protocol has no such state,
// and treats it as gone.
std::optional<JobState> beanstalk_state(const jobs::JobInfo& job, int64_t now_ms);

// Every tube: the types that are some tube's (tubes.h), in name order.
Result<std::vector<std::string>> list_tubes(jobs::Jobs& jobs);

Result<std::string> server_stats_yaml(jobs::Jobs& jobs, const Counters& counters,
                                      size_t max_job_size);
// kNotFound when the tube's type does not exist.
Result<std::string> tube_stats_yaml(jobs::Jobs& jobs, const Counters& counters,
                                    const std::string& tube, const std::string& type,
                                    int64_t now_ms);
// `time_left`: what is left of its TTR when this connection holds it. nullopt for a job in no
// beanstalkd state (beanstalk_state).
std::optional<std::string> job_stats_yaml(const jobs::JobInfo& job, int64_t now_ms,
                                          std::optional<std::chrono::milliseconds> time_left);

}  // namespace kvq::beanstalk
