// Jobs::change_type_settings: several of a type's settings changed in one transaction, through
// the setters each field names, so a front end (HTTP's PUT /v1/types/{type}, pause, resume)
// makes one call and every front end merges a partial retry policy the same way.
#include "jobs/jobs_impl.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

RetryPolicy RetryPolicyChange::applied_to(RetryPolicy policy) const {
  if (max_attempts) policy.max_attempts = *max_attempts;
  if (backoff_base) policy.backoff_base = *backoff_base;
  if (backoff_factor) policy.backoff_factor = *backoff_factor;
  if (backoff_cap) policy.backoff_cap = *backoff_cap;
  if (jitter) policy.jitter = *jitter;
  return policy;
}

Result<TypeSettings> Jobs::change_type_settings(std::string_view type,
                                                const TypeSettingsChange& change) {
  return in_own_transaction(&Jobs::change_type_settings, type, change);
}

Result<TypeSettings> Jobs::change_type_settings(kv::Transaction& txn, std::string_view type,
                                                const TypeSettingsChange& change) {
  if (change.paused_until_ms && change.paused != true)
    return InvalidArgument("paused_until_ms is for a pause (paused = true) only");
  const auto& c = change;
  if (c.timeout) KVQ_RETURN_IF_ERROR(set_type_timeout(txn, type, *c.timeout));
  if (c.finished_retention)
    KVQ_RETURN_IF_ERROR(set_finished_retention(txn, type, *c.finished_retention));
  if (c.max_lost_runs) KVQ_RETURN_IF_ERROR(set_max_lost_runs(txn, type, *c.max_lost_runs));
  if (c.max_running) KVQ_RETURN_IF_ERROR(set_max_running(txn, type, *c.max_running));
  if (c.rate) KVQ_RETURN_IF_ERROR(set_rate_limit(txn, type, *c.rate));
  if (c.max_running_per_group)
    KVQ_RETURN_IF_ERROR(set_max_running_per_group(txn, type, *c.max_running_per_group));
  if (c.retry.any()) {
    KVQ_ASSIGN_OR_RETURN(TypeSettings current, get_type(txn, type));
    KVQ_RETURN_IF_ERROR(set_retry_policy(txn, type, c.retry.applied_to(current.retry)));
  }
  if (c.paused == true) KVQ_RETURN_IF_ERROR(pause_type(txn, type, c.paused_until_ms));
  if (c.paused == false) KVQ_RETURN_IF_ERROR(resume_type(txn, type));
  // Read back from this transaction's own writes.
  return get_type(txn, type);
}

}  // namespace kvq::jobs
