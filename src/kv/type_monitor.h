// kv/type_monitor.h — the background loop both monitors share: the jobs layer's activity
// monitor and the workers layer's health monitor.
//
// One thread keeps a map of types. It re-reads the map whenever a watched "types token" key
// changes, and also at start. Each type is checked on its own schedule (TypeState::next_check).
// A failed re-read is retried after `error_pause`. With no type due, the thread sleeps until the
// earliest next_check, or `idle_period` when there are no types. A derived class supplies the
// two hooks. It calls start() at the end of its constructor and stop() first in its destructor,
// so that the thread never runs a hook of a half-built or half-destroyed object.
#pragma once

#include <map>
#include <string>
#include <thread>
#include <utility>

#include "kvq/kv.h"
#include "util/mutex.h"

namespace kvq::kv {

// TypeState: the derived class's per-type state, with a `Clock::time_point next_check`.
template <typename TypeState>
class TypeMonitor {
 public:
  TypeMonitor(const TypeMonitor&) = delete;
  TypeMonitor& operator=(const TypeMonitor&) = delete;

 protected:
  TypeMonitor(Clock::duration idle_period, Clock::duration error_pause)
      : idle_period_(idle_period), error_pause_(error_pause) {}
  virtual ~TypeMonitor() = default;

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop() KVQ_EXCLUDES(mu_) {
    {
      util::MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    types_watch_.cancel();
  }

  // Hooks, called on the loop's thread. refresh_types re-reads types_ and hands the watch on the
  // types token to watch_types; check does one check of `type` and sets state.next_check.
  virtual Status refresh_types() = 0;
  virtual void check(const std::string& type, TypeState& state) = 0;

  // Makes a change of the types token trigger refresh_types.
  void watch_types(Watch watch) {
    types_watch_ = std::move(watch);
    types_watch_.on_ready([this](const Status& s) {
      if (s.code() == Code::kCancelled) return;
      util::MutexLock lock(mu_);
      types_changed_ = true;
      cv_.notify_all();
    });
  }

  std::map<std::string, TypeState> types_;  // only the loop's thread touches it

 private:
  void run() KVQ_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    while (!stopping_) {
      if (types_changed_) {
        types_changed_ = false;
        lock.unlock();
        Status s = refresh_types();
        lock.lock();
        if (!s.ok()) {
          types_changed_ = true;
          const auto resume = Clock::now() + error_pause_;
          while (!stopping_) {
            if (!cv_.wait_until(mu_, resume)) break;
          }
          continue;
        }
      }
      auto wake = Clock::now() + idle_period_;
      lock.unlock();
      for (auto& [type, state] : types_) {
        if (Clock::now() >= state.next_check) check(type, state);
        wake = std::min(wake, state.next_check);
      }
      lock.lock();
      while (!stopping_ && !types_changed_) {
        if (!cv_.wait_until(mu_, wake)) break;
      }
    }
  }

  const Clock::duration idle_period_;
  const Clock::duration error_pause_;
  Watch types_watch_;
  util::Mutex mu_;
  util::CondVar cv_;
  bool types_changed_ KVQ_GUARDED_BY(mu_) = true;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvq::kv
