// tests/support/delivered.h — what asynchronous `done` callbacks delivered, on any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace kvq::testing {

// What asynchronous `done` callbacks delivered. Held by shared_ptr: a callback that comes after a
// failed test returned must still find it.
template <typename T>
class Delivered {
 public:
  void add(T value) {
    {
      std::lock_guard lock(mu_);
      values_.push_back(std::move(value));
    }
    cv_.notify_all();
  }
  // True once `n` values arrived; waits up to `timeout`, so a lost callback fails the test rather
  // than hanging it.
  bool wait_for(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return values_.size() >= n; });
  }
  std::vector<T> values() {
    std::lock_guard lock(mu_);
    return values_;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return values_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<T> values_;
};

// A `done` callback that adds what it gets to `delivered`.
template <typename T>
std::function<void(T)> deliver_to(std::shared_ptr<Delivered<T>> delivered) {
  return [delivered](T value) { delivered->add(std::move(value)); };
}

}  // namespace kvq::testing
