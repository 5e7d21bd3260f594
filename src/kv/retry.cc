#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "kvq/kv.h"
#include "util/mutex.h"
#include "util/random.h"

namespace kvq::kv {
namespace {
std::atomic<uint64_t> aborted_retries{0}, unavailable_retries{0}, unknown_retries{0};
}  // namespace

RetryCounts retry_counts() {
  return {aborted_retries.load(), unavailable_retries.load(), unknown_retries.load()};
}

namespace detail {

void count_retry(Code code) {
  switch (code) {
    case Code::kAborted: aborted_retries.fetch_add(1, std::memory_order_relaxed); break;
    case Code::kUnavailable: unavailable_retries.fetch_add(1, std::memory_order_relaxed); break;
    case Code::kUnknownResult: unknown_retries.fetch_add(1, std::memory_order_relaxed); break;
    default: break;
  }
}

std::optional<std::chrono::microseconds> backoff_delay(int attempt, const RetryOptions& options,
                                                       Clock::time_point deadline) {
  // Full exponential growth capped at max_backoff, then +-50% jitter so that transactions that
  // conflicted together do not collide again in lock step.
  const int shift = std::min(attempt, 20);
  auto base = std::min(options.initial_backoff * (int64_t{1} << shift), options.max_backoff);
  auto delay = util::jittered(base, 0.5);
  if (Clock::now() + delay >= deadline) return std::nullopt;
  return delay;
}

bool backoff_before_retry(int attempt, const RetryOptions& options, Clock::time_point deadline) {
  auto delay = backoff_delay(attempt, options, deadline);
  if (!delay) return false;
  std::this_thread::sleep_for(*delay);
  return true;
}

namespace {

// One thread for the whole process, started on first use and never stopped, so that no store
// has to own it. run_async's caller keeps its store alive until `done`, hence past any retry.
class Timer {
 public:
  static Timer& instance() {
    static Timer* timer = new Timer;  // never destroyed: tasks may be queued at exit
    return *timer;
  }

  void add(std::chrono::microseconds delay, std::function<void()> task) KVQ_EXCLUDES(mu_) {
    {
      util::MutexLock lock(mu_);
      tasks_.emplace(Clock::now() + delay, std::move(task));
    }
    cv_.notify_one();
  }

 private:
  Timer() {
    std::thread([this] { run(); }).detach();
  }

  void run() KVQ_EXCLUDES(mu_) {
    util::MutexLock lock(mu_);
    for (;;) {
      if (tasks_.empty()) {
        cv_.wait(mu_);
        continue;
      }
      auto first = tasks_.begin();
      if (Clock::now() < first->first) {
        cv_.wait_until(mu_, first->first);
        continue;
      }
      auto task = std::move(first->second);
      tasks_.erase(first);
      lock.unlock();
      task();
      lock.lock();
    }
  }

  util::Mutex mu_;
  util::CondVar cv_;
  std::multimap<Clock::time_point, std::function<void()>> tasks_ KVQ_GUARDED_BY(mu_);
};

}  // namespace

void run_after(std::chrono::microseconds delay, std::function<void()> task) {
  Timer::instance().add(delay, std::move(task));
}

}  // namespace detail
}  // namespace kvq::kv
