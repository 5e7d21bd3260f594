#include "jobs/type_stats.h"

#include <algorithm>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"

namespace kvq::jobs {
namespace {

void observe(Jobs::Histogram& histogram, Millis value) {
  const double seconds = static_cast<double>(std::max<int64_t>(0, value.count())) / 1000.0;
  const auto& bounds = Jobs::Histogram::bounds();
  if (histogram.counts.empty()) histogram.counts.assign(bounds.size() + 1, 0);
  // Prometheus buckets are "less than or equal": the first bound not below the value.
  const size_t bucket = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  ++histogram.counts[bucket];
  ++histogram.count;
  histogram.sum_seconds += seconds;
}

}  // namespace

const std::vector<double>& Jobs::Histogram::bounds() {
  static const std::vector<double> bounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                          2.5,   5,    10,    30,   60,  300,  900, 3600};
  return bounds;
}

std::optional<Millis> run_time_since(int64_t started_ms) {
  if (started_ms <= 0) return std::nullopt;
  return Millis(std::max<int64_t>(0, now_ms() - started_ms));
}

Jobs::TypeStats& TypeStatsRecorder::of(std::string_view type) {
  auto it = stats_.find(type);
  if (it != stats_.end()) return it->second;
  Jobs::TypeStats fresh;
  fresh.queue_latency.counts.assign(Jobs::Histogram::bounds().size() + 1, 0);
  fresh.run_time.counts.assign(Jobs::Histogram::bounds().size() + 1, 0);
  return stats_.emplace(std::string(type), std::move(fresh)).first->second;
}

void TypeStatsRecorder::record_run(Jobs::TypeStats& stats, std::optional<Millis> run_time) {
  if (run_time) observe(stats.run_time, *run_time);
}

void TypeStatsRecorder::record_failed_attempt(Jobs::TypeStats& stats, bool dead,
                                              std::optional<Millis> run_time) {
  ++(dead ? stats.dead : stats.retried);
  record_run(stats, run_time);
}

void TypeStatsRecorder::record_accepted(std::string_view type, Millis queue_latency) {
  util::MutexLock lock(mu_);
  observe(of(type).queue_latency, std::max(Millis(0), queue_latency));
}

void TypeStatsRecorder::record_finished(std::string_view type, bool succeeded,
                                        std::optional<Millis> run_time) {
  util::MutexLock lock(mu_);
  auto& stats = of(type);
  if (succeeded) ++stats.succeeded;
  record_run(stats, run_time);
}

void TypeStatsRecorder::record_failed(std::string_view type, bool dead,
                                      std::optional<Millis> run_time) {
  util::MutexLock lock(mu_);
  auto& stats = of(type);
  ++stats.failed;
  record_failed_attempt(stats, dead, run_time);
}

void TypeStatsRecorder::record_lost(std::string_view type, bool dead,
                                    std::optional<Millis> run_time) {
  util::MutexLock lock(mu_);
  auto& stats = of(type);
  ++stats.lost;
  record_failed_attempt(stats, dead, run_time);
}

void TypeStatsRecorder::record_snoozed(std::string_view type, std::optional<Millis> run_time) {
  util::MutexLock lock(mu_);
  record_run(of(type), run_time);
}

void TypeStatsRecorder::record_cancelled(std::string_view type, std::optional<Millis> run_time) {
  util::MutexLock lock(mu_);
  auto& stats = of(type);
  ++stats.cancelled;
  record_run(stats, run_time);
}

void TypeStatsRecorder::record_removed(std::string_view type, std::optional<Millis> run_time) {
  util::MutexLock lock(mu_);
  auto& stats = of(type);
  ++stats.removed;
  record_run(stats, run_time);
}

std::map<std::string, Jobs::TypeStats> TypeStatsRecorder::snapshot() const {
  util::MutexLock lock(mu_);
  return {stats_.begin(), stats_.end()};
}

void record_cancelled(Jobs::Impl& impl, std::string_view type, std::optional<Millis> run_time) {
  impl.type_stats.record_cancelled(type, run_time);
}

std::map<std::string, Jobs::TypeStats> Jobs::type_stats() const {
  return impl_->type_stats.snapshot();
}

}  // namespace kvq::jobs
