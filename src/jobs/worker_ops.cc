// update, finish and resubmit: what a worker does with a job it holds. Each checks the job's
// lock in the same transaction as its writes, which is what fences out a stale worker.
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

Status halt(const Job& job, std::string_view why) {
  return FailedPrecondition("halt: job '" + job.id + "' of type '" + job.type + "' " + std::string(why));
}

Status validate_handle(const Job& job) {
  KVQ_RETURN_IF_ERROR(validate_type(job.type));
  KVQ_RETURN_IF_ERROR(validate_id(job.id));
  if (job.lock.empty()) return InvalidArgument("job handle has no lock; it did not come from accept");
  const auto dash = job.lock.rfind('-');
  if (dash == std::string::npos || job.lock.substr(dash + 1) != type_tag(job.type)) {
    return InvalidArgument("job handle was accepted from another type than '" + job.type + "'");
  }
  return Status::OK();
}

// The row of a job this worker still holds, or "halt".
Result<JobRow> load_held(kv::Transaction& txn, const Keys& keys, const Job& job) {
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, job.type, job.id));
  if (!row) return halt(job, "was removed");
  if (row->lock != job.lock) return halt(job, "was re-enqueued or accepted by another worker");
  return std::move(*row);
}

Result<std::optional<std::string>> normalize_optional(std::optional<std::string_view> data, size_t max) {
  if (!data) return std::optional<std::string>();
  KVQ_ASSIGN_OR_RETURN(std::string normalized, normalize_data(*data, max));
  return std::optional<std::string>(std::move(normalized));
}

}  // namespace

Result<UpdateResult> Jobs::update(Job& job, std::optional<std::string_view> data) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  KVQ_ASSIGN_OR_RETURN(auto normalized, normalize_optional(data, options_.max_data_bytes));
  std::optional<std::string_view> view;
  if (normalized) view = *normalized;
  return kv::run(*store_, [&](kv::Transaction& txn) { return update(txn, job, view); }, options_.retry);
}

Result<UpdateResult> Jobs::update(kv::Transaction& txn, Job& job, std::optional<std::string_view> data) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  KVQ_ASSIGN_OR_RETURN(auto normalized, normalize_optional(data, options_.max_data_bytes));
  KVQ_ASSIGN_OR_RETURN(JobRow before, load_held(txn, impl_->keys, job));
  JobRow after = before;
  if (normalized) after.data = std::move(*normalized);
  KVQ_RETURN_IF_ERROR(save_job(txn, impl_->keys, job.type, job.id, before, after));
  if (normalized) job.data = after.data;
  return UpdateResult{before.resubmit};
}

Status Jobs::finish(Job& job, std::optional<std::string_view> data) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  KVQ_ASSIGN_OR_RETURN(auto normalized, normalize_optional(data, options_.max_data_bytes));
  std::optional<std::string_view> view;
  if (normalized) view = *normalized;
  return kv::run(*store_, [&](kv::Transaction& txn) { return finish(txn, job, view); }, options_.retry);
}

Status Jobs::finish(kv::Transaction& txn, Job& job, std::optional<std::string_view> data) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  KVQ_ASSIGN_OR_RETURN(auto normalized, normalize_optional(data, options_.max_data_bytes));
  const auto& keys = impl_->keys;
  KVQ_ASSIGN_OR_RETURN(auto current, load_job(txn, keys, job.type, job.id));
  // A retry after an unknown commit result finds its own finish already applied.
  if (current && current->lock.empty() && current->finished_lock == job.lock) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(JobRow before, load_held(txn, keys, job));
  JobRow after = before;
  after.lock.clear();
  after.worker.clear();
  after.finished_lock = job.lock;
  if (normalized) after.data = std::move(*normalized);
  if (before.resubmit) {
    after.resubmit = false;
    after.scheduled = before.next_scheduled;
    after.priority = before.next_priority;
  } else {
    after.finished = true;
  }
  return save_job(txn, keys, job.type, job.id, before, after);
}

Status Jobs::resubmit(Job& job, const ResubmitOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  ResubmitOptions normalized = options;
  if (options.data) {
    KVQ_ASSIGN_OR_RETURN(normalized.data, normalize_data(*options.data, options_.max_data_bytes));
  }
  return kv::run(*store_, [&](kv::Transaction& txn) { return resubmit(txn, job, normalized); }, options_.retry);
}

Status Jobs::resubmit(kv::Transaction& txn, Job& job, const ResubmitOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  std::optional<std::string> data;
  if (options.data) {
    KVQ_ASSIGN_OR_RETURN(data, normalize_data(*options.data, options_.max_data_bytes));
  }
  KVQ_ASSIGN_OR_RETURN(JobRow before, load_held(txn, impl_->keys, job));
  JobRow after = before;
  after.resubmit = true;
  after.next_scheduled = options.scheduled_time_ms.value_or(now_ms());
  after.next_priority = before.priority;
  if (data) after.data = std::move(*data);
  KVQ_RETURN_IF_ERROR(save_job(txn, impl_->keys, job.type, job.id, before, after));
  if (data) job.data = after.data;
  return Status::OK();
}

}  // namespace kvq::jobs
