#include <algorithm>
#include <atomic>
#include <thread>

#include "kvq/kv.h"
#include "util/random.h"
#include "util/timer_queue.h"

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

void run_after(std::chrono::microseconds delay, std::function<void()> task) {
  // One queue (one thread) for the whole process, started on first use and never stopped, so
  // that no store has to own it; never destroyed, since tasks may be queued at exit. run_async's
  // caller keeps its store alive until `done`, hence past any retry.
  static auto* const timers = new util::TimerQueue<std::function<void()>>(util::run_each);
  timers->at(Clock::now() + delay, std::move(task));
}

}  // namespace detail
}  // namespace kvq::kv
