#include "beanstalk/stats.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "beanstalk/tubes.h"

#ifndef KVQ_VERSION
#define KVQ_VERSION "unknown"
#endif

namespace kvq::beanstalk {
namespace {

uint64_t seconds_until(int64_t at_ms, int64_t now_ms) {
  return at_ms > now_ms ? static_cast<uint64_t>((at_ms - now_ms) / 1000) : 0;
}

std::string cpu_seconds(const timeval& time) {
  char text[32];
  std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(time.tv_sec),
                static_cast<long>(time.tv_usec));
  return text;
}

// beanstalkd's urgent jobs: ready ones of a priority under 1024.
constexpr int64_t kMaxUrgentPriority = 1023;

Result<uint64_t> urgent_count(jobs::Jobs& jobs, const std::string& type) {
  return jobs.pending_count(type, {.max_priority = kMaxUrgentPriority});
}

uint64_t command_count(const ProcessCounts& counts, Verb verb) {
  return counts.commands[static_cast<size_t>(verb)];
}

}  // namespace

std::string_view job_state_name(JobState state) {
  switch (state) {
    case JobState::kReady: return "ready";
    case JobState::kDelayed: return "delayed";
    case JobState::kReserved: return "reserved";
    case JobState::kBuried: return "buried";
  }
  return "?";
}

std::optional<JobState> beanstalk_state(const jobs::JobInfo& job, int64_t now_ms) {
  switch (job.state) {
    case jobs::State::kPending:
      return job.scheduled_time_ms > now_ms ? JobState::kDelayed : JobState::kReady;
    case jobs::State::kRunning: return JobState::kReserved;
    case jobs::State::kFinished:
      if (job.outcome == jobs::Outcome::kDead) return JobState::kBuried;
      return std::nullopt;
    case jobs::State::kWaiting: return std::nullopt;
  }
  return std::nullopt;
}

Result<std::vector<std::string>> list_tubes(jobs::Jobs& jobs) {
  KVQ_ASSIGN_OR_RETURN(auto types, jobs.types());
  std::vector<std::string> tubes;
  for (const auto& type : types) {
    if (auto tube = tube_of_type(type)) tubes.push_back(std::move(*tube));
  }
  std::sort(tubes.begin(), tubes.end());
  return tubes;
}

Result<std::string> server_stats_yaml(jobs::Jobs& jobs, const Counters& counters,
                                      size_t max_job_size) {
  KVQ_ASSIGN_OR_RETURN(auto types, jobs.types());
  jobs::Jobs::StateCounts total;
  uint64_t tubes = 0, urgent = 0;
  for (const auto& type : types) {
    if (!tube_of_type(type)) continue;
    auto counts = jobs.count(type);
    if (counts.code() == Code::kNotFound) continue;  // removed since types() read it
    if (!counts.ok()) return counts.status();
    auto urgent_here = urgent_count(jobs, type);
    if (urgent_here.ok()) {
      urgent += *urgent_here;
    } else if (urgent_here.code() != Code::kNotFound) {
      return urgent_here.status();
    }
    ++tubes;
    total.pending += counts->pending;
    total.scheduled += counts->scheduled;
    total.running += counts->running;
    total.dead += counts->dead;
  }
  uint64_t timeouts = 0;
  for (const auto& [type, stats] : jobs.type_stats()) {
    if (tube_of_type(type)) timeouts += stats.lost;
  }
  const ProcessCounts p = counters.process();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  utsname names{};
  uname(&names);
  const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::steady_clock::now() - counters.started);
  YamlMap yaml;
  yaml.add("current-jobs-urgent", urgent)
      .add("current-jobs-ready", total.pending - total.scheduled)
      .add("current-jobs-reserved", total.running)
      .add("current-jobs-delayed", total.scheduled)
      .add("current-jobs-buried", total.dead)
      .add("cmd-put", command_count(p, Verb::kPut))
      .add("cmd-peek", command_count(p, Verb::kPeek))
      .add("cmd-peek-ready", command_count(p, Verb::kPeekReady))
      .add("cmd-peek-delayed", command_count(p, Verb::kPeekDelayed))
      .add("cmd-peek-buried", command_count(p, Verb::kPeekBuried))
      .add("cmd-reserve", command_count(p, Verb::kReserve) + command_count(p, Verb::kReserveJob))
      .add("cmd-reserve-with-timeout", command_count(p, Verb::kReserveWithTimeout))
      .add("cmd-delete", command_count(p, Verb::kDelete))
      .add("cmd-release", command_count(p, Verb::kRelease))
      .add("cmd-use", command_count(p, Verb::kUse))
      .add("cmd-watch", command_count(p, Verb::kWatch))
      .add("cmd-ignore", command_count(p, Verb::kIgnore))
      .add("cmd-bury", command_count(p, Verb::kBury))
      .add("cmd-kick", command_count(p, Verb::kKick) + command_count(p, Verb::kKickJob))
      .add("cmd-touch", command_count(p, Verb::kTouch))
      .add("cmd-stats", command_count(p, Verb::kStats))
      .add("cmd-stats-job", command_count(p, Verb::kStatsJob))
      .add("cmd-stats-tube", command_count(p, Verb::kStatsTube))
      .add("cmd-list-tubes", command_count(p, Verb::kListTubes))
      .add("cmd-list-tube-used", command_count(p, Verb::kListTubeUsed))
      .add("cmd-list-tubes-watched", command_count(p, Verb::kListTubesWatched))
      .add("cmd-pause-tube", command_count(p, Verb::kPauseTube))
      .add("job-timeouts", timeouts)
      .add("total-jobs", p.puts)
      .add("max-job-size", max_job_size)
      .add("current-tubes", tubes)
      .add("current-connections", p.connections)
      .add("current-producers", p.producers)
      .add("current-workers", p.workers)
      .add("current-waiting", p.waiting)
      .add("total-connections", p.total_connections)
      .add("pid", static_cast<uint64_t>(getpid()))
      .add_quoted("version", "kvq " KVQ_VERSION)
      .add("rusage-utime", cpu_seconds(usage.ru_utime))
      .add("rusage-stime", cpu_seconds(usage.ru_stime))
      .add("uptime", static_cast<uint64_t>(uptime.count()))
      .add("binlog-oldest-index", 0)
      .add("binlog-current-index", 0)
      .add("binlog-records-migrated", 0)
      .add("binlog-records-written", 0)
      .add("binlog-max-size", 0)
      .add("draining", "false")
      .add("id", counters.id)
      .add("hostname", names.nodename)
      .add("os", names.version)
      .add("platform", names.machine);
  return yaml.text();
}

Result<std::string> tube_stats_yaml(jobs::Jobs& jobs, const Counters& counters,
                                    const std::string& tube, const std::string& type,
                                    int64_t now_ms) {
  KVQ_ASSIGN_OR_RETURN(auto settings, jobs.get_type(type));
  KVQ_ASSIGN_OR_RETURN(auto counts, jobs.count(type));
  KVQ_ASSIGN_OR_RETURN(uint64_t urgent, urgent_count(jobs, type));
  const TubeCounts here = counters.tube(tube);
  const bool paused =
      settings.paused && (!settings.paused_until_ms || *settings.paused_until_ms > now_ms);
  uint64_t pause_left = 0;
  if (paused && settings.paused_until_ms)
    pause_left = seconds_until(*settings.paused_until_ms, now_ms);
  YamlMap yaml;
  yaml.add("name", tube)
      .add("current-jobs-urgent", urgent)
      .add("current-jobs-ready", counts.pending - counts.scheduled)
      .add("current-jobs-reserved", counts.running)
      .add("current-jobs-delayed", counts.scheduled)
      .add("current-jobs-buried", counts.dead)
      .add("total-jobs", here.puts)
      .add("current-using", static_cast<uint64_t>(std::max<int64_t>(0, here.using_)))
      .add("current-waiting", static_cast<uint64_t>(std::max<int64_t>(0, here.waiting)))
      .add("current-watching", static_cast<uint64_t>(std::max<int64_t>(0, here.watching)))
      .add("pause", paused ? here.last_pause_seconds : 0)
      .add("cmd-delete", here.deletes)
      .add("cmd-pause-tube", here.pauses)
      .add("pause-time-left", pause_left);
  return yaml.text();
}

std::optional<std::string> job_stats_yaml(const jobs::JobInfo& job, int64_t now_ms,
                                          std::optional<std::chrono::milliseconds> time_left) {
  const auto state = beanstalk_state(job, now_ms);
  if (!state) return std::nullopt;
  const auto tube = tube_of_type(job.type);
  const int64_t ttr_ms = job.timeout ? job.timeout->count() : 0;
  uint64_t left = 0;
  if (*state == JobState::kReserved) {
    left = time_left ? static_cast<uint64_t>(std::max<int64_t>(0, time_left->count() / 1000))
                     : seconds_until(job.updated_at_ms + ttr_ms, now_ms);
  } else if (*state == JobState::kDelayed) {
    left = seconds_until(job.scheduled_time_ms, now_ms);
  }
  uint64_t timeouts = 0, buries = 0;
  for (const auto& error : job.errors) {
    if (error.kind == "timeout" || error.kind == "worker_lost") ++timeouts;
    if (error.kind == "buried") ++buries;
  }
  YamlMap yaml;
  yaml.add("id", job.id)
      .add("tube", tube ? *tube : job.type)
      .add("state", job_state_name(*state))
      .add("pri", static_cast<uint64_t>(std::max<int64_t>(0, job.priority)))
      .add("age", seconds_until(now_ms, job.created_at_ms))
      // Rounded: the put's clock read and its commit's are a few milliseconds apart.
      .add("delay", seconds_until(job.scheduled_time_ms + 500, job.updated_at_ms))
      .add("ttr", static_cast<uint64_t>(ttr_ms / 1000))
      .add("time-left", left)
      .add("file", 0)
      .add("reserves", uint64_t{job.attempts} + job.snoozes)
      .add("timeouts", timeouts)
      .add("releases", job.snoozes)
      .add("buries", buries)
      .add("kicks", uint64_t{job.kicks});
  return yaml.text();
}

}  // namespace kvq::beanstalk
