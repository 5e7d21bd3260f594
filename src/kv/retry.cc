#include <algorithm>
#include <atomic>
#include <thread>

#include "kvq/kv.h"
#include "util/random.h"

namespace kvq::kv {
namespace {
std::atomic<uint64_t> aborted_retries{0}, unavailable_retries{0}, unknown_retries{0};
}  // namespace

RetryCounts retry_counts() { return {aborted_retries.load(), unavailable_retries.load(), unknown_retries.load()}; }

namespace detail {

void count_retry(Code code) {
  switch (code) {
    case Code::kAborted: aborted_retries.fetch_add(1, std::memory_order_relaxed); break;
    case Code::kUnavailable: unavailable_retries.fetch_add(1, std::memory_order_relaxed); break;
    case Code::kUnknownResult: unknown_retries.fetch_add(1, std::memory_order_relaxed); break;
    default: break;
  }
}

bool backoff_before_retry(int attempt, const RetryOptions& options, Clock::time_point deadline) {
  // Full exponential growth capped at max_backoff, then +-50% jitter so that transactions that
  // conflicted together do not collide again in lock step.
  const int shift = std::min(attempt, 20);
  auto base = std::min(options.initial_backoff * (int64_t{1} << shift), options.max_backoff);
  auto delay = util::jittered(base, 0.5);
  if (Clock::now() + delay >= deadline) return false;
  std::this_thread::sleep_for(delay);
  return true;
}

}  // namespace detail
}  // namespace kvq::kv
