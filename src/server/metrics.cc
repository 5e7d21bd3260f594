#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "kvq/kv.h"

namespace kvq::server {

std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

namespace {

const std::string kNoRoute = "none";  // requests refused before a route matched

// The methods the method label names; any other is "other", and a request refused before its
// method was read is "none", so a client cannot make new series.
constexpr std::string_view kMethods[] = {"GET",    "HEAD",  "POST",   "PUT",
                                         "DELETE", "PATCH", "OPTIONS"};

std::string_view method_label(std::string_view method) {
  if (method.empty()) return "none";
  for (std::string_view m : kMethods) {
    if (m == method) return m;
  }
  return "other";
}

// One per-type counter of Jobs::TypeStats.
struct TypeCounter {
  const char* name;
  const char* help;
  uint64_t jobs::Jobs::TypeStats::*field;
};

constexpr TypeCounter kTypeCounters[] = {
    {"kvq_jobs_succeeded_total", "Jobs that ended succeeded (finish, not resubmitted).",
     &jobs::Jobs::TypeStats::succeeded},
    {"kvq_jobs_failed_total", "Attempts a worker reported failed (fail).",
     &jobs::Jobs::TypeStats::failed},
    {"kvq_jobs_lost_total",
     "Runs lost (no update within the type's timeout, or the worker left) that this process "
     "ended.",
     &jobs::Jobs::TypeStats::lost},
    {"kvq_jobs_retried_total", "Failed or lost attempts that went back to pending for a retry.",
     &jobs::Jobs::TypeStats::retried},
    {"kvq_jobs_dead_total",
     "Jobs that ended dead (attempts used up, retry refused, or max_lost_runs reached).",
     &jobs::Jobs::TypeStats::dead},
    {"kvq_jobs_cancelled_total", "Jobs cancelled.", &jobs::Jobs::TypeStats::cancelled},
    {"kvq_jobs_removed_total",
     "Runs their worker ended by removing the job (the beanstalkd protocol's delete of a "
     "reserved job).",
     &jobs::Jobs::TypeStats::removed},
};

// One per-type histogram of Jobs::TypeStats.
struct TypeHistogram {
  const char* name;
  const char* help;
  jobs::Jobs::Histogram jobs::Jobs::TypeStats::*field;
};

constexpr TypeHistogram kTypeHistograms[] = {
    {"kvq_job_queue_latency_seconds",
     "How long a job waited from its scheduled time (when it became due) until a worker "
     "accepted it.",
     &jobs::Jobs::TypeStats::queue_latency},
    {"kvq_job_run_time_seconds",
     "How long a run took from accept to its end (finish, fail, snooze, lost run, cancel or "
     "removal by its worker).",
     &jobs::Jobs::TypeStats::run_time},
};

// The histogram's lines in the text format: the buckets cumulative (Jobs keeps them per
// bucket), the last one +Inf, then _sum and _count.
void write_histogram(std::ostream& out, const char* name, const std::string& type_label,
                     const jobs::Jobs::Histogram& histogram) {
  const auto& bounds = jobs::Jobs::Histogram::bounds();
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (i < histogram.counts.size()) cumulative += histogram.counts[i];
    out << name << "_bucket{type=\"" << type_label << "\",le=\"" << number(bounds[i]) << "\"} "
        << cumulative << "\n";
  }
  out << name << "_bucket{type=\"" << type_label << "\",le=\"+Inf\"} " << histogram.count << "\n"
      << name << "_sum{type=\"" << type_label << "\"} " << number(histogram.sum_seconds) << "\n"
      << name << "_count{type=\"" << type_label << "\"} " << histogram.count << "\n";
}

void write_type_stats(std::ostream& out, const std::map<std::string, jobs::Jobs::TypeStats>& all) {
  for (const auto& counter : kTypeCounters) {
    out << "# HELP " << counter.name << " " << counter.help
        << " Counted by this process since it started.\n"
        << "# TYPE " << counter.name << " counter\n";
    for (const auto& [type, stats] : all)
      out << counter.name << "{type=\"" << label(type) << "\"} " << stats.*counter.field << "\n";
  }
  for (const auto& histogram : kTypeHistograms) {
    out << "# HELP " << histogram.name << " " << histogram.help
        << " Counted by this process since it started.\n"
        << "# TYPE " << histogram.name << " histogram\n";
    for (const auto& [type, stats] : all)
      write_histogram(out, histogram.name, label(type), stats.*histogram.field);
  }
}

// Each type's flow control as the store has it at scrape time: read by every server alike, so
// these are the cluster's, not this process's.
void write_flow_control(std::ostream& out, jobs::Jobs& jobs) {
  auto types = jobs.types();
  if (!types.ok()) return;
  std::vector<std::pair<std::string, jobs::TypeSettings>> settings;
  for (const auto& type : *types) {
    if (auto s = jobs.get_type(type); s.ok()) settings.emplace_back(type, *s);
  }
  out << "# HELP kvq_type_paused Whether the type is paused (1) or not (0), read from the store.\n"
      << "# TYPE kvq_type_paused gauge\n";
  for (const auto& [type, s] : settings)
    out << "kvq_type_paused{type=\"" << label(type) << "\"} " << (s.paused ? 1 : 0) << "\n";
  out << "# HELP kvq_type_max_running The most jobs of the type that may run at once across the "
         "cluster, for types that set one.\n"
      << "# TYPE kvq_type_max_running gauge\n";
  for (const auto& [type, s] : settings) {
    if (s.max_running)
      out << "kvq_type_max_running{type=\"" << label(type) << "\"} " << *s.max_running << "\n";
  }
  out << "# HELP kvq_type_max_running_per_group The most jobs of any one group of the type that "
         "may run at once across the cluster, for types that set one.\n"
      << "# TYPE kvq_type_max_running_per_group gauge\n";
  for (const auto& [type, s] : settings) {
    if (s.max_running_per_group)
      out << "kvq_type_max_running_per_group{type=\"" << label(type) << "\"} "
          << *s.max_running_per_group << "\n";
  }
}

// Each schedule's counts from the store (ScheduleInfo): occurrences enqueued and skipped by
// every server's scheduler together.
void write_schedules(std::ostream& out, jobs::Jobs& jobs) {
  auto schedules = jobs.schedules();
  if (!schedules.ok()) return;
  out << "# HELP kvq_schedule_enqueued_total Occurrences the schedule enqueued since it was "
         "created, by every server.\n"
      << "# TYPE kvq_schedule_enqueued_total counter\n";
  for (const auto& s : *schedules) {
    out << "kvq_schedule_enqueued_total{schedule=\"" << label(s.name) << "\",type=\""
        << label(s.spec.type) << "\"} " << s.enqueued << "\n";
  }
  out << "# HELP kvq_schedule_skipped_total Occurrences the schedule's catch_up left out after "
         "downtime, or whose add failed.\n"
      << "# TYPE kvq_schedule_skipped_total counter\n";
  for (const auto& s : *schedules) {
    out << "kvq_schedule_skipped_total{schedule=\"" << label(s.name) << "\",type=\""
        << label(s.spec.type) << "\"} " << s.skipped << "\n";
  }
}

}  // namespace

Result<std::vector<TypeCounts>> count_jobs(jobs::Jobs& jobs) {
  KVQ_ASSIGN_OR_RETURN(auto types, jobs.types());
  std::vector<TypeCounts> out;
  for (auto& type : types) {
    auto counts = jobs.count(type, kCountLimit);
    if (counts.ok()) out.push_back({std::move(type), *counts});
  }
  return out;
}

void Metrics::request(const std::string& method, const std::string& route, unsigned status,
                      double seconds) {
  const std::string& name = route.empty() ? kNoRoute : route;
  util::MutexLock lock(mu_);
  ++requests_[{name, method_label(method), status}];
  Durations& d = durations_[name];
  const auto bucket = std::lower_bound(kRequestBuckets.begin(), kRequestBuckets.end(), seconds);
  if (bucket != kRequestBuckets.end()) ++d.buckets[bucket - kRequestBuckets.begin()];
  ++d.count;
  d.sum += seconds;
}

void Metrics::accepted(const std::string& type, double waited_seconds) {
  util::MutexLock lock(mu_);
  ++accepts_[type];
  ++wait_count_;
  wait_sum_ += waited_seconds;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (waited_seconds <= kBuckets[i]) ++wait_buckets_[i];
  }
}

void Metrics::finished(const std::string& type) {
  util::MutexLock lock(mu_);
  ++finishes_[type];
}

void Metrics::accept_error(std::string_view reason) {
  util::MutexLock lock(mu_);
  auto it = accept_errors_.find(reason);
  if (it == accept_errors_.end()) it = accept_errors_.find("other");
  ++it->second;
}

Metrics::Totals Metrics::totals() {
  util::MutexLock lock(mu_);
  return {accepts_, finishes_};
}

std::string Metrics::render(jobs::Jobs& jobs) {
  std::ostringstream out;
  out << "# HELP kvq_jobs Jobs by type and state, counted up to " << kCountLimit
      << " each at scrape time (scheduled is the part of pending not yet due; dead and cancelled "
         "are parts of finished; waiting jobs wait on dependencies).\n"
      << "# TYPE kvq_jobs gauge\n";
  if (auto counted = count_jobs(jobs); counted.ok()) {
    for (const auto& [type, counts] : *counted) {
      const std::pair<const char*, uint64_t> states[] = {
          {"pending", counts.pending}, {"scheduled", counts.scheduled},
          {"running", counts.running}, {"finished", counts.finished},
          {"dead", counts.dead},       {"cancelled", counts.cancelled},
          {"waiting", counts.waiting}};
      for (const auto& [state, n] : states)
        out << "kvq_jobs{type=\"" << label(type) << "\",state=\"" << state << "\"} " << n << "\n";
    }
  }
  write_flow_control(out, jobs);
  write_schedules(out, jobs);
  if (auto batches = jobs.batch_totals(); batches.ok()) {
    out << "# HELP kvq_batch_callbacks_total Batches settled in the store (every server's): "
           "fired, their callback added once; skipped, on success with a member that did not "
           "succeed.\n"
        << "# TYPE kvq_batch_callbacks_total counter\n"
        << "kvq_batch_callbacks_total{result=\"fired\"} " << batches->fired << "\n"
        << "kvq_batch_callbacks_total{result=\"skipped\"} " << batches->skipped << "\n";
  }
  const auto retries = kv::retry_counts();
  const auto stats = jobs.stats();
  write_type_stats(out, jobs.type_stats());
  util::MutexLock lock(mu_);
  out << "# HELP kvq_accepts_total Jobs handed to workers by this server.\n# TYPE "
         "kvq_accepts_total counter\n";
  for (const auto& [type, n] : accepts_)
    out << "kvq_accepts_total{type=\"" << label(type) << "\"} " << n << "\n";
  out << "# HELP kvq_finishes_total Jobs finished through this server.\n# TYPE kvq_finishes_total "
         "counter\n";
  for (const auto& [type, n] : finishes_)
    out << "kvq_finishes_total{type=\"" << label(type) << "\"} " << n << "\n";
  out << "# HELP kvq_monitor_reenqueues_total Running jobs this process's activity monitor "
         "re-enqueued.\n"
      << "# TYPE kvq_monitor_reenqueues_total counter\n"
      << "kvq_monitor_reenqueues_total " << stats.reenqueued_by_monitor << "\n";
  out << "# HELP kvq_retention_removals_total Finished jobs this process's monitor removed once "
         "their type's retention passed.\n"
      << "# TYPE kvq_retention_removals_total counter\n"
      << "kvq_retention_removals_total " << stats.removed_by_retention << "\n";
  out << "# HELP kvq_monitor_gave_up_total Lost runs this process's activity monitor ended dead "
         "(attempts used up, or the type's max_lost_runs reached) instead of re-enqueueing.\n"
      << "# TYPE kvq_monitor_gave_up_total counter\n"
      << "kvq_monitor_gave_up_total " << stats.gave_up_by_monitor << "\n";
  out << "# HELP kvq_accept_wait_seconds How long an accept waited before it got a job.\n"
      << "# TYPE kvq_accept_wait_seconds histogram\n";
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    out << "kvq_accept_wait_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << wait_buckets_[i]
        << "\n";
  }
  out << "kvq_accept_wait_seconds_bucket{le=\"+Inf\"} " << wait_count_ << "\n"
      << "kvq_accept_wait_seconds_sum " << wait_sum_ << "\n"
      << "kvq_accept_wait_seconds_count " << wait_count_ << "\n";
  out << "# HELP kvq_store_retries_total Store transactions retried in this process, by reason.\n"
      << "# TYPE kvq_store_retries_total counter\n"
      << "kvq_store_retries_total{reason=\"aborted\"} " << retries.aborted << "\n"
      << "kvq_store_retries_total{reason=\"unavailable\"} " << retries.unavailable << "\n"
      << "kvq_store_retries_total{reason=\"unknown_result\"} " << retries.unknown_result << "\n";
  out << "# HELP kvq_http_accept_errors_total Connections this server failed to accept, by reason "
         "(emfile, enfile: out of descriptors; nomem: out of kernel memory; other).\n"
      << "# TYPE kvq_http_accept_errors_total counter\n";
  for (const auto& [why, n] : accept_errors_)
    out << "kvq_http_accept_errors_total{reason=\"" << why << "\"} " << n << "\n";
  out << "# HELP kvq_http_requests_total HTTP requests by route, method and status.\n"
      << "# TYPE kvq_http_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out << "kvq_http_requests_total{route=\"" << label(key.route) << "\",method=\"" << key.method
        << "\",status=\"" << key.status << "\"} " << n << "\n";
  }
  out << "# HELP kvq_http_request_duration_seconds HTTP requests by route: from the request's "
         "header read until its answer was queued (a long poll's wait included).\n"
      << "# TYPE kvq_http_request_duration_seconds histogram\n";
  for (const auto& [route, d] : durations_) {
    const std::string r = label(route);
    uint64_t below = 0;
    for (size_t i = 0; i < kRequestBuckets.size(); ++i) {
      below += d.buckets[i];
      out << "kvq_http_request_duration_seconds_bucket{route=\"" << r << "\",le=\""
          << number(kRequestBuckets[i]) << "\"} " << below << "\n";
    }
    out << "kvq_http_request_duration_seconds_bucket{route=\"" << r << "\",le=\"+Inf\"} " << d.count
        << "\n"
        << "kvq_http_request_duration_seconds_sum{route=\"" << r << "\"} " << number(d.sum) << "\n"
        << "kvq_http_request_duration_seconds_count{route=\"" << r << "\"} " << d.count << "\n";
  }
  return out.str();
}

}  // namespace kvq::server
