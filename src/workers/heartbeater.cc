#include "workers/heartbeater.h"

#include "util/random.h"
#include "workers/workers_impl.h"

namespace kvq::workers {
namespace {

kv::Clock::time_point next_beat(const RegistrationImpl& r, bool after_error) {
  auto period = std::chrono::duration_cast<std::chrono::microseconds>(r.timeout()) / (after_error ? 10 : 3);
  return kv::Clock::now() + util::jittered(period, 0.1);
}

}  // namespace

Heartbeater::Heartbeater() : thread_([this] { run(); }) {}

Heartbeater::~Heartbeater() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Heartbeater::add(const std::shared_ptr<RegistrationImpl>& registration) {
  {
    std::lock_guard lock(mu_);
    due_.emplace(next_beat(*registration, false), registration);
  }
  cv_.notify_all();
}

void Heartbeater::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (due_.empty()) {
      cv_.wait(lock, [&] { return stopping_ || !due_.empty(); });
      continue;
    }
    auto first = due_.begin();
    if (kv::Clock::now() < first->first) {
      cv_.wait_until(lock, first->first);
      continue;
    }
    auto weak = first->second;
    due_.erase(first);
    auto registration = weak.lock();
    if (!registration || !registration->active()) continue;
    lock.unlock();
    Status s = registration->heartbeat();
    lock.lock();
    // A lost registration is not rescheduled; a transient error is retried sooner.
    if (s.ok() || s.code() != Code::kFailedPrecondition) {
      due_.emplace(next_beat(*registration, !s.ok()), registration);
    }
    lock.unlock();
    registration.reset();  // may run the destructor (unregister): not under our lock
    lock.lock();
  }
}

}  // namespace kvq::workers
