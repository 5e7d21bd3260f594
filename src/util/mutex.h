// util/mutex.h — a mutex, its scoped lock and a condition variable that clang's thread-safety
// analysis can follow (util/thread_annotations.h), after LevelDB's port/port_stdcxx.h.
//
//   util::Mutex mu_;
//   int count_ KVQ_GUARDED_BY(mu_);
//   ...
//   util::MutexLock lock(mu_);
//   while (count_ == 0) cv_.wait(mu_);
//
// A thin wrapper over std::mutex and std::condition_variable: same cost, same semantics. Waits
// take no predicate: a lambda is analysed as a function of its own, which holds no lock, so a
// caller writes the loop (as above) where the analysis sees the mutex held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "util/thread_annotations.h"

namespace kvq::util {

class KVQ_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() KVQ_ACQUIRE() { mu_.lock(); }
  void unlock() KVQ_RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds the mutex where it cannot see it (checks nothing).
  void assert_held() const KVQ_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope. unlock() and lock() let go of it for a stretch in between (to run a
// callback unlocked); the destructor releases it only if held.
class KVQ_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) KVQ_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() KVQ_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() KVQ_RELEASE() {
    held_ = false;
    mu_.unlock();
  }
  void lock() KVQ_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable for util::Mutex. Every wait releases `mu` while blocked and holds it
// again on return; it may return spuriously, so callers wait in a loop on their condition.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void wait(Mutex& mu) KVQ_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false if `deadline` passed (the caller still checks its condition: it may hold).
  template <typename Clock, typename Duration>
  bool wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      KVQ_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  template <typename Rep, typename Period>
  bool wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout) KVQ_REQUIRES(mu) {
    return wait_until(mu, std::chrono::steady_clock::now() + timeout);
  }

  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace kvq::util
