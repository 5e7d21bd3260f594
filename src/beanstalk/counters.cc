#include "beanstalk/counters.h"

#include "util/random.h"

namespace kvq::beanstalk {

Counters::Counters() : id(util::random_hex(8)) {}

void Counters::command(Verb verb) {
  util::MutexLock lock(mu_);
  ++process_.commands[static_cast<size_t>(verb)];
}

void Counters::connection(int delta) {
  util::MutexLock lock(mu_);
  process_.connections += delta;
  if (delta > 0) process_.total_connections += delta;
}

void Counters::producer(int delta) {
  util::MutexLock lock(mu_);
  process_.producers += delta;
}

void Counters::worker(int delta) {
  util::MutexLock lock(mu_);
  process_.workers += delta;
}

void Counters::waiting(int delta) {
  util::MutexLock lock(mu_);
  process_.waiting += delta;
}

void Counters::tube_gauge(const std::string& tube, int64_t TubeCounts::*gauge, int delta) {
  util::MutexLock lock(mu_);
  tubes_[tube].*gauge += delta;
}

void Counters::put(const std::string& tube) {
  util::MutexLock lock(mu_);
  ++process_.puts;
  ++tubes_[tube].puts;
}

void Counters::deleted(const std::string& tube) {
  util::MutexLock lock(mu_);
  ++tubes_[tube].deletes;
}

void Counters::paused(const std::string& tube, uint32_t seconds) {
  util::MutexLock lock(mu_);
  auto& counts = tubes_[tube];
  ++counts.pauses;
  counts.last_pause_seconds = seconds;
}

ProcessCounts Counters::process() const {
  util::MutexLock lock(mu_);
  return process_;
}

TubeCounts Counters::tube(const std::string& tube) const {
  util::MutexLock lock(mu_);
  auto found = tubes_.find(tube);
  return found == tubes_.end() ? TubeCounts{} : found->second;
}

}  // namespace kvq::beanstalk
