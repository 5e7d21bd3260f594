// The retry policy's arithmetic and its checks (kvq/jobs.h, RetryPolicy).
#include <algorithm>
#include <cmath>
#include <string>

#include "kvq/jobs.h"

namespace kvq::jobs {
namespace {

// The longest backoff_cap a type may set: a retry later than this is better expressed as dead
// and rerun.
constexpr Millis kMaxBackoffCap{30LL * 24 * 3600 * 1000};

}  // namespace

Millis backoff_delay(const RetryPolicy& policy, uint32_t n) {
  const double base = static_cast<double>(policy.backoff_base.count());
  const double cap = static_cast<double>(policy.backoff_cap.count());
  // In doubles, so a large n saturates at the cap instead of overflowing.
  const double delay =
      base * std::pow(policy.backoff_factor, static_cast<double>(std::max(n, 1u) - 1));
  return Millis(static_cast<int64_t>(std::min(cap, delay)));
}

Millis jittered_backoff_delay(const RetryPolicy& policy, uint32_t n, double unit_random) {
  const double delay = static_cast<double>(backoff_delay(policy, n).count());
  const double spread = policy.jitter * std::clamp(unit_random, 0.0, 1.0);
  return Millis(static_cast<int64_t>(std::ceil(delay * (1.0 - spread))));
}

Status validate_retry_policy(const RetryPolicy& policy) {
  if (policy.max_attempts < 1 || policy.max_attempts > kMaxAttemptsLimit) {
    return InvalidArgument("max_attempts must be between 1 and " +
                           std::to_string(kMaxAttemptsLimit));
  }
  if (policy.backoff_base.count() <= 0) return InvalidArgument("backoff base must be positive");
  // Also refuses NaN.
  if (!(policy.backoff_factor >= 1.0 && policy.backoff_factor <= 100.0))
    return InvalidArgument("backoff factor must be between 1 and 100");
  if (policy.backoff_cap < policy.backoff_base)
    return InvalidArgument("backoff cap must not be below the backoff base");
  if (policy.backoff_cap > kMaxBackoffCap)
    return InvalidArgument("backoff cap must be at most 30 days");
  if (!(policy.jitter >= 0.0 && policy.jitter <= 1.0))
    return InvalidArgument("jitter must be between 0 and 1");
  return Status::OK();
}

}  // namespace kvq::jobs
