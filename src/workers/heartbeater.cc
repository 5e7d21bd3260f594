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

// Everything due goes out together: one transaction, one commit (one fsync) per batch rather
// than per worker.
Heartbeater::Heartbeater() : due_([this](auto& due) { beat(due); }, kMaxBatch) {}

void Heartbeater::add(const std::shared_ptr<RegistrationImpl>& registration) {
  due_.at(next_beat(*registration, false), registration);
}

void Heartbeater::beat(std::vector<std::weak_ptr<RegistrationImpl>>& due) {
  std::vector<std::shared_ptr<RegistrationImpl>> batch;
  for (auto& weak : due) {
    if (auto r = weak.lock(); r && r->active()) batch.push_back(std::move(r));
  }
  const Status s = RegistrationImpl::heartbeat_all(batch);
  for (const auto& r : batch) {
    // A lost registration is not rescheduled; after a transient error all retry sooner.
    if (r->active()) due_.at(next_beat(*r, !s.ok()), r);
  }
  // The batch's last references may go here (unregister): the queue holds no lock while we run.
}

}  // namespace kvq::workers
