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
#include <memory>
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
  void stop() {
    Signal& signal = *signal_;
    {
      util::MutexLock lock(signal.mu);
      signal.stopping = true;
    }
    signal.cv.notify_all();
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
    // The callback holds the signal, not this monitor: a fire whose callback is already under
    // way when stop() cancels the watch may still be running after the monitor is destroyed
    // (cancel drops a fire it comes before, not one already calling back). Seen under ASan: a
    // heap-use-after-free of the activity monitor from the etcd watch thread at a Jobs' close.
    types_watch_.on_ready([signal = signal_](const Status& s) {
      if (s.code() == Code::kCancelled) return;
      util::MutexLock lock(signal->mu);
      signal->types_changed = true;
      signal->cv.notify_all();
    });
  }

  std::map<std::string, TypeState> types_;  // only the loop's thread touches it

 private:
  // What the loop waits on, shared with the types watch's callback (watch_types).
  struct Signal {
    util::Mutex mu;
    util::CondVar cv;
    bool types_changed KVQ_GUARDED_BY(mu) = true;
    bool stopping KVQ_GUARDED_BY(mu) = false;
  };

  void run() {
    Signal& signal = *signal_;
    util::MutexLock lock(signal.mu);
    while (!signal.stopping) {
      if (signal.types_changed) {
        signal.types_changed = false;
        lock.unlock();
        Status s = refresh_types();
        lock.lock();
        if (!s.ok()) {
          signal.types_changed = true;
          const auto resume = Clock::now() + error_pause_;
          while (!signal.stopping) {
            if (!signal.cv.wait_until(signal.mu, resume)) break;
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
      while (!signal.stopping && !signal.types_changed) {
        if (!signal.cv.wait_until(signal.mu, wake)) break;
      }
    }
  }

  const Clock::duration idle_period_;
  const Clock::duration error_pause_;
  Watch types_watch_;
  const std::shared_ptr<Signal> signal_ = std::make_shared<Signal>();
  std::thread thread_;
};

}  // namespace kvq::kv
