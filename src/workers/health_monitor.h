// workers/health_monitor.h — declares workers dead when their heartbeats stop.
//
// One thread per Workers. It knows every worker type (re-read when the types token changes)
// and checks each about four times per shortest health timeout among its workers. A check
// records (this process's steady time, the store's read version) and reads the workers of the
// type. A worker whose last heartbeat's seq is below the version of a check made at least its
// health timeout ago has not heartbeated since: it is removed (running on_departure, in the
// same transaction) unless it heartbeated in the meantime.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "workers/workers_impl.h"

namespace kvq::workers {

class HealthMonitor {
 public:
  explicit HealthMonitor(std::shared_ptr<Core> core);
  ~HealthMonitor();
  uint64_t declared_dead() const { return dead_.load(); }
  uint64_t checks() const { return checks_.load(); }

 private:
  struct Check {
    kv::Clock::time_point at;
    uint64_t version;
  };
  struct TypeState {
    std::deque<Check> checks;
    kv::Clock::time_point next_check{};
  };

  void run();
  Status refresh_types();
  void check(const std::string& type, TypeState& state);

  std::shared_ptr<Core> core_;
  std::map<std::string, TypeState> types_;  // only the monitor thread touches it
  kv::Watch types_watch_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool types_changed_ = true;
  bool stopping_ = false;
  std::atomic<uint64_t> dead_{0};
  std::atomic<uint64_t> checks_{0};
  std::thread thread_;
};

}  // namespace kvq::workers
