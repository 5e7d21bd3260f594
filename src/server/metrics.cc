#include "server/metrics.h"

#include <sstream>

#include "kvq/kv.h"

namespace kvq::server {
namespace {

// Label values escaped as the text format requires.
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

void Metrics::request(const std::string& route, unsigned status) {
  std::lock_guard lock(mu_);
  ++requests_[{route.empty() ? "none" : route, status}];
}

void Metrics::accepted(const std::string& type, double waited_seconds) {
  std::lock_guard lock(mu_);
  ++accepts_[type];
  ++wait_count_;
  wait_sum_ += waited_seconds;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (waited_seconds <= kBuckets[i]) ++wait_buckets_[i];
  }
}

void Metrics::finished(const std::string& type) {
  std::lock_guard lock(mu_);
  ++finishes_[type];
}

void Metrics::accept_error(std::string_view reason) {
  std::lock_guard lock(mu_);
  auto it = accept_errors_.find(reason);
  if (it == accept_errors_.end()) it = accept_errors_.find("other");
  ++it->second;
}

Metrics::Totals Metrics::totals() {
  std::lock_guard lock(mu_);
  return {accepts_, finishes_};
}

std::string Metrics::render(jobs::Jobs& jobs) {
  std::ostringstream out;
  out << "# HELP kvq_jobs Jobs by type and state, counted up to " << kCountLimit
      << " each at scrape time.\n"
      << "# TYPE kvq_jobs gauge\n";
  if (auto counted = count_jobs(jobs); counted.ok()) {
    for (const auto& [type, counts] : *counted) {
      out << "kvq_jobs{type=\"" << label(type) << "\",state=\"pending\"} " << counts.pending << "\n"
          << "kvq_jobs{type=\"" << label(type) << "\",state=\"running\"} " << counts.running << "\n"
          << "kvq_jobs{type=\"" << label(type) << "\",state=\"finished\"} " << counts.finished
          << "\n";
    }
  }
  const auto retries = kv::retry_counts();
  const auto stats = jobs.stats();
  std::lock_guard lock(mu_);
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
  out << "# HELP kvq_monitor_gave_up_total Running jobs this process's activity monitor gave up on "
         "(their type's max_lost_runs reached) instead of re-enqueueing.\n"
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
  out << "# HELP kvq_http_requests_total HTTP requests by route and status.\n"
      << "# TYPE kvq_http_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out << "kvq_http_requests_total{route=\"" << label(key.first) << "\",status=\"" << key.second
        << "\"} " << n << "\n";
  }
  return out.str();
}

}  // namespace kvq::server
