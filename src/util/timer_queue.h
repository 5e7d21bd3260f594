// util/timer_queue.h — items due at given times, handed to one function on one thread of the
// queue's own when they fall due: far cheaper than a timer (or a sleeping thread) per item.
//
// The queue's thread calls `fire` with every item due at that moment, in order of their times
// (ties in order of arrival), at most `max_batch` at once, and never while holding the queue's
// lock: `fire` may call at() and cancel() (to reschedule what it fired, say). An item fires
// once, never before its time; late by however long the previous `fire` took.
//
// Thread-safe: at() and cancel() may be called from any thread. The destructor waits for a
// `fire` under way to return, then drops the items not yet due without firing them; so `fire`
// must not destroy the queue, and what `fire` uses must outlive it (declare the queue last).
//
//   util::TimerQueue<std::function<void()>> timers(util::run_each);
//   auto id = timers.at(Clock::now() + 1s, [] { give_up(); });
//   timers.cancel(id);  // false if it already fired
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace kvq::util {

template <typename Item>
class TimerQueue {
 public:
  using Clock = std::chrono::steady_clock;
  using Fire = std::function<void(std::vector<Item>& due)>;

  // REQUIRES: max_batch >= 1.
  explicit TimerQueue(Fire fire, size_t max_batch = 1)
      : fire_(std::move(fire)), max_batch_(max_batch), thread_([this] { run(); }) {}
  ~TimerQueue() {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Queues `item` to fire at `when` (at once if that has passed) and returns its id, never 0.
  uint64_t at(Clock::time_point when, Item item) KVQ_EXCLUDES(mu_) {
    uint64_t id;
    {
      MutexLock lock(mu_);
      id = next_id_++;
      by_id_.emplace(id, due_.emplace(when, Entry{id, std::move(item)}));
    }
    cv_.notify_all();
    return id;
  }

  // Drops the item `id` if it has not fired yet: true then, false if it fired (or is firing)
  // or was never queued.
  bool cancel(uint64_t id) KVQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    auto found = by_id_.find(id);
    if (found == by_id_.end()) return false;
    due_.erase(found->second);
    by_id_.erase(found);
    return true;
  }

 private:
  struct Entry {
    uint64_t id;
    Item item;
  };
  using Due = std::multimap<Clock::time_point, Entry>;

  void run() KVQ_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::vector<Item> batch;
    while (!stopping_) {
      if (due_.empty()) {
        cv_.wait(mu_);
        continue;
      }
      if (Clock::now() < due_.begin()->first) {
        const auto when = due_.begin()->first;  // a copy: the entry may be erased while we wait
        cv_.wait_until(mu_, when);
        continue;
      }
      const auto now = Clock::now();
      while (!due_.empty() && due_.begin()->first <= now && batch.size() < max_batch_) {
        by_id_.erase(due_.begin()->second.id);
        batch.push_back(std::move(due_.begin()->second.item));
        due_.erase(due_.begin());
      }
      lock.unlock();
      fire_(batch);
      batch.clear();  // may run destructors that call at() or cancel(): not under our lock
      lock.lock();
    }
  }

  const Fire fire_;
  const size_t max_batch_;
  Mutex mu_;
  CondVar cv_;
  Due due_ KVQ_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, typename Due::iterator> by_id_ KVQ_GUARDED_BY(mu_);
  uint64_t next_id_ KVQ_GUARDED_BY(mu_) = 1;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once everything it uses is constructed
};

// A Fire for a queue of tasks: runs each in turn.
inline void run_each(std::vector<std::function<void()>>& tasks) {
  for (auto& task : tasks) task();
}

}  // namespace kvq::util
