// The counts of a type's jobs (Jobs::count, Jobs::pending_count): by state, and pending ones by
// due time and priority, read a page or a priority level at a time.
#include <algorithm>
#include <functional>
#include <limits>

#include "jobs/accept/accept.h"
#include "jobs/group_queue.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/own_timeouts.h"
#include "jobs/types.h"
#include "jobs/validation.h"
#include "jobs/worker_calls.h"

namespace kvq::jobs {

namespace {

// The type's settings, or kNotFound naming it (a snapshot read, as require_type's).
Result<TypeSettings> existing_type(kv::Transaction& txn, const Keys& keys, std::string_view type) {
  KVQ_ASSIGN_OR_RETURN(auto value, txn.get(keys.timeout(type), {.snapshot = true}));
  if (!value)
    return NotFound("type '" + std::string(type) + "' does not exist (it has no timeout)");
  return decode_type(*value);
}

// Entries of `index` with time at most `max_time` and priority at most `max_priority` (which
// stops the walk of its levels there), counting at most `limit`.
Result<uint64_t> count_due_up_to(kv::Transaction& txn, const OrderedIndex& index, int64_t max_time,
                                 int64_t max_priority, uint64_t limit) {
  uint64_t count = 0;
  if (limit == 0) return count;
  KVQ_RETURN_IF_ERROR(for_each_priority(txn, index, [&](int64_t priority) -> Result<bool> {
    if (priority > max_priority) return false;
    KVQ_ASSIGN_OR_RETURN(uint64_t n, count_keys(txn, index.due(priority, max_time), limit - count));
    count += n;
    return count < limit;
  }));
  return count;
}

// Pending jobs of `type` with a scheduled time at most `max_time` (due: true) or after it (due:
// false), counting at most `limit`: the jobs without a group, then each group's (a type that
// had jobs with a group pays a read or two per group). `max_priority` (due jobs only): of that
// priority or better.
Result<uint64_t> count_pending_by_time(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, const TypeSettings& settings,
                                       int64_t max_time, bool due, uint64_t limit,
                                       std::optional<int64_t> max_priority = std::nullopt) {
  auto count_in = [&](const OrderedIndex& index, uint64_t most) -> Result<uint64_t> {
    if (due && max_priority) return count_due_up_to(txn, index, max_time, *max_priority, most);
    return count_by_time(txn, index, max_time, due, most);
  };
  KVQ_ASSIGN_OR_RETURN(uint64_t count, count_in(keys.pending_index(type), limit));
  if (!settings.has_groups || count >= limit) return count;
  KVQ_RETURN_IF_ERROR(for_each_group(
      txn, keys, type, [&](const std::string& group, const GroupRow&) -> Result<bool> {
        KVQ_ASSIGN_OR_RETURN(uint64_t n,
                             count_in(keys.group_pending_index(type, group), limit - count));
        count += n;
        return count < limit;
      }));
  return count;
}

}  // namespace

Result<Jobs::StateCounts> Jobs::count(std::string_view type, size_t limit) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  const auto& keys = impl_->keys;
  const int64_t now = now_ms();
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<StateCounts> {
        KVQ_ASSIGN_OR_RETURN(TypeSettings settings, existing_type(txn, keys, type));
        StateCounts counts;
        KVQ_ASSIGN_OR_RETURN(counts.pending, count_keys(txn, keys.pending_of(type), limit));
        if (settings.has_groups && counts.pending < limit) {
          KVQ_ASSIGN_OR_RETURN(uint64_t grouped, count_keys(txn, keys.group_pending_of(type),
                                                            limit - counts.pending));
          counts.pending += grouped;
        }
        KVQ_ASSIGN_OR_RETURN(counts.scheduled,
                             count_pending_by_time(txn, keys, type, settings, now, false, limit));
        KVQ_ASSIGN_OR_RETURN(counts.running, count_running(txn, keys, type, limit, true));
        KVQ_ASSIGN_OR_RETURN(
            counts.finished,
            count_keys(txn, keys.finished_before(type, std::numeric_limits<int64_t>::max()),
                       limit));
        // From the outcome index: dead jobs finished by a build older than it are not counted.
        KVQ_ASSIGN_OR_RETURN(counts.dead,
                             count_keys(txn, keys.ended_with(type, Outcome::kDead), limit));
        KVQ_ASSIGN_OR_RETURN(counts.cancelled,
                             count_keys(txn, keys.ended_with(type, Outcome::kCancelled), limit));
        KVQ_ASSIGN_OR_RETURN(counts.waiting, count_keys(txn, keys.waiting_of(type), limit));
        return counts;
      },
      options_.retry);
}

Result<uint64_t> Jobs::pending_count(std::string_view type, const PendingCountOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  const int64_t max_time = options.max_scheduled_time_ms.value_or(now_ms());
  const auto& keys = impl_->keys;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<uint64_t> {
        KVQ_ASSIGN_OR_RETURN(TypeSettings settings, existing_type(txn, keys, type));
        return count_pending_by_time(txn, keys, type, settings, max_time, true, options.limit,
                                     options.max_priority);
      },
      options_.retry);
}

}  // namespace kvq::jobs
