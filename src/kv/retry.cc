#include <algorithm>
#include <thread>

#include "kvq/kv.h"
#include "util/random.h"

namespace kvq::kv::detail {

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

}  // namespace kvq::kv::detail
