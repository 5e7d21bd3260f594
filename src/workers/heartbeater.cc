#include "workers/heartbeater.h"

#include "util/random.h"
#include "workers/workers_impl.h"

namespace kvq::workers {
namespace {

constexpr size_t kMaxBatch = 256;

kv::Clock::time_point next_beat(const RegistrationImpl& r, bool after_error) {
  auto period =
      std::chrono::duration_cast<std::chrono::microseconds>(r.timeout()) / (after_error ? 10 : 3);
  return kv::Clock::now() + util::jittered(period, 0.1);
}

}  // namespace

Heartbeater::Heartbeater() : thread_([this] { run(); }) {}

Heartbeater::~Heartbeater() {
  {
    util::MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Heartbeater::add(const std::shared_ptr<RegistrationImpl>& registration) {
  {
    util::MutexLock lock(mu_);
    due_.emplace(next_beat(*registration, false), registration);
  }
  cv_.notify_all();
}

void Heartbeater::run() {
  util::MutexLock lock(mu_);
  while (!stopping_) {
    if (due_.empty()) {
      cv_.wait(mu_);
      continue;
    }
    if (kv::Clock::now() < due_.begin()->first) {
      const auto when = due_.begin()->first;  // a copy: the entry may be erased while we wait
      cv_.wait_until(mu_, when);
      continue;
    }
    // Everything due goes out together: one transaction, one commit (one fsync) per batch
    // rather than per worker.
    std::vector<std::shared_ptr<RegistrationImpl>> batch;
    const auto now = kv::Clock::now();
    while (!due_.empty() && due_.begin()->first <= now && batch.size() < kMaxBatch) {
      if (auto r = due_.begin()->second.lock(); r && r->active()) batch.push_back(std::move(r));
      due_.erase(due_.begin());
    }
    lock.unlock();
    const Status s = RegistrationImpl::heartbeat_all(batch);
    lock.lock();
    for (const auto& r : batch) {
      // A lost registration is not rescheduled; after a transient error all retry sooner.
      if (r->active()) due_.emplace(next_beat(*r, !s.ok()), r);
    }
    lock.unlock();
    batch.clear();  // may run destructors (unregister): not under our lock
    lock.lock();
  }
}

}  // namespace kvq::workers
