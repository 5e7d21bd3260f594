// workers/health_monitor.h — declares workers dead when their heartbeats stop.
//
// One thread per Workers (kv::TypeMonitor's loop). It knows every worker type (re-read when
// the types token changes) and checks each about four times per shortest health timeout among
// its workers. A check reads the store's version and the workers of the type in one snapshot,
// dated when the store answered (kv::CheckHistory). A worker whose last heartbeat's seq is below
// the version of a check at least its health timeout old has not heartbeated since: it is
// removed (running on_departure, in the same transaction) unless it heartbeated in the meantime.
//
// It has the activity monitor's shape, and keeps its promise: a worker is declared dead only
// when none of its heartbeats that began within its health timeout has committed. A stalled
// read never makes recent heartbeats look old, time the monitor spent stalled or paused does not
// count (at most 1.5 check periods between two checks), and a removal that stalls commits only
// if the worker is still unchanged.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "kv/check_history.h"
#include "kv/type_monitor.h"
#include "workers/workers_impl.h"

namespace kvq::workers {

struct HealthTypeState {
  kv::CheckHistory checks;
  kv::Clock::duration period = std::chrono::seconds(1);  // the one the next check was scheduled by
  kv::Clock::time_point next_check{};
};

class HealthMonitor final : private kv::TypeMonitor<HealthTypeState> {
 public:
  explicit HealthMonitor(std::shared_ptr<Core> core);
  ~HealthMonitor() override;
  uint64_t declared_dead() const { return dead_.load(); }
  uint64_t checks() const { return checks_.load(); }

 private:
  using TypeState = HealthTypeState;

  Status refresh_types() override;
  void check(const std::string& type, TypeState& state) override;

  std::shared_ptr<Core> core_;
  std::atomic<uint64_t> dead_{0};
  std::atomic<uint64_t> checks_{0};
};

}  // namespace kvq::workers
