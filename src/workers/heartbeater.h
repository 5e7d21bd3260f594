// workers/heartbeater.h — one thread that keeps every registration of a Workers alive,
// heartbeating each about every third of its health timeout (jittered). Heartbeats that are due
// together go out in one transaction (one commit, one fsync), so a thousand workers cost a
// handful of commits per second, not a thousand. A registration whose heartbeat finds it
// replaced or declared dead is marked lost and dropped.
#pragma once

#include <map>
#include <memory>
#include <thread>

#include "kvq/workers.h"
#include "util/mutex.h"

namespace kvq::workers {

class RegistrationImpl;

class Heartbeater {
 public:
  Heartbeater();
  ~Heartbeater();
  void add(const std::shared_ptr<RegistrationImpl>& registration) KVQ_EXCLUDES(mu_);

 private:
  void run() KVQ_EXCLUDES(mu_);

  util::Mutex mu_;
  util::CondVar cv_;
  std::multimap<kv::Clock::time_point, std::weak_ptr<RegistrationImpl>> due_ KVQ_GUARDED_BY(mu_);
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvq::workers
