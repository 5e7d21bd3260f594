// workers/heartbeater.h — one thread that keeps every registration of a Workers alive,
// heartbeating each about every third of its health timeout (jittered). Heartbeats that are due
// together go out in one transaction (one commit, one fsync), so a thousand workers cost a
// handful of commits per second, not a thousand. A registration whose heartbeat finds it
// replaced or declared dead is marked lost and dropped.
#pragma once

#include <memory>
#include <vector>

#include "kvq/workers.h"
#include "util/timer_queue.h"

namespace kvq::workers {

class RegistrationImpl;

class Heartbeater {
 public:
  Heartbeater();
  void add(const std::shared_ptr<RegistrationImpl>& registration);

 private:
  void beat(std::vector<std::weak_ptr<RegistrationImpl>>& due);

  util::TimerQueue<std::weak_ptr<RegistrationImpl>> due_;
};

}  // namespace kvq::workers
