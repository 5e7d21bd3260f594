// workers/heartbeater.h — one thread that keeps every registration of a Workers alive,
// heartbeating each about every third of its health timeout (jittered). Heartbeats that are due
// together go out in one transaction (one commit, one fsync), so a thousand workers cost a
// handful of commits per second, not a thousand. A registration whose heartbeat finds it
// replaced or declared dead is marked lost and dropped.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "kvq/workers.h"

namespace kvq::workers {

class RegistrationImpl;

class Heartbeater {
 public:
  Heartbeater();
  ~Heartbeater();
  void add(const std::shared_ptr<RegistrationImpl>& registration);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<kv::Clock::time_point, std::weak_ptr<RegistrationImpl>> due_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvq::workers
