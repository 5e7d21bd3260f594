// update, finish and resubmit: what a worker does with a job it holds. Each checks the job's
// lock in the same transaction as its writes, which is what fences out a stale worker.
#include <map>
#include <string>
#include <vector>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/pending_picks.h"
#include "jobs/validation.h"
#include "util/secret.h"

namespace kvq::jobs {
namespace {

Status halt(const Job& job, std::string_view why) {
  return FailedPrecondition("halt: job '" + job.id + "' of type '" + job.type + "' " +
                            std::string(why));
}

Status validate_handle(const Job& job) {
  KVQ_RETURN_IF_ERROR(validate_type(job.type));
  KVQ_RETURN_IF_ERROR(validate_id(job.id));
  if (job.lock.empty())
    return InvalidArgument("job handle has no lock; it did not come from accept");
  const auto dash = job.lock.rfind('-');
  if (dash == std::string::npos || job.lock.substr(dash + 1) != type_tag(job.type)) {
    return InvalidArgument("lock '" + job.lock + "' was not issued by accept for type '" +
                           job.type + "'");
  }
  return Status::OK();
}

// The job's row if this worker still holds it, or "halt".
Result<JobRow> held(const Job& job, std::optional<JobRow> row) {
  if (!row) return halt(job, "was removed");
  if (!util::secret_equal(row->lock, job.lock))
    return halt(job, "was re-enqueued or accepted by another worker");
  return std::move(*row);
}

Result<JobRow> load_held(kv::Transaction& txn, const Keys& keys, const Job& job) {
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, job.type, job.id));
  return held(job, std::move(row));
}

// A worker call's input, checked once: the handle, and the data normalized (if any).
Result<std::optional<std::string>> check_call(const Job& job, std::optional<std::string_view> data,
                                              size_t max) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  if (!data) return std::optional<std::string>();
  KVQ_ASSIGN_OR_RETURN(std::string normalized, normalize_data(*data, max));
  return std::optional<std::string>(std::move(normalized));
}

Result<UpdateResult> update_checked(kv::Transaction& txn, const Keys& keys, Job& job,
                                    const std::optional<std::string>& data) {
  KVQ_ASSIGN_OR_RETURN(JobRow before, load_held(txn, keys, job));
  JobRow after = before;
  if (data) after.data = *data;
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, job.type, job.id, before, after));
  if (data) job.data = *data;
  return UpdateResult{before.resubmit};
}

Status finish_checked(kv::Transaction& txn, const Keys& keys, const Job& job,
                      const std::optional<std::string>& data) {
  KVQ_ASSIGN_OR_RETURN(auto current, load_job(txn, keys, job.type, job.id));
  // A retry after an unknown commit result finds its own finish already applied.
  if (current && current->lock.empty() && util::secret_equal(current->finished_lock, job.lock))
    return Status::OK();
  KVQ_ASSIGN_OR_RETURN(JobRow before, held(job, std::move(current)));
  JobRow after = before;
  after.lock.clear();
  after.worker.clear();
  after.worker_type.clear();
  after.finished_lock = job.lock;
  after.lost_runs = 0;  // this run was not lost
  if (data) after.data = *data;
  if (before.resubmit) {
    after.resubmit = false;
    after.scheduled = before.next_scheduled;
    after.priority = before.next_priority;
  } else {
    after.finished = true;
  }
  return save_job(txn, keys, job.type, job.id, before, after);
}

Status resubmit_checked(kv::Transaction& txn, const Keys& keys, Job& job,
                        std::optional<int64_t> scheduled_time_ms,
                        const std::optional<std::string>& data) {
  KVQ_ASSIGN_OR_RETURN(JobRow before, load_held(txn, keys, job));
  JobRow after = before;
  after.resubmit = true;
  after.next_scheduled = scheduled_time_ms.value_or(now_ms());
  after.next_priority = before.priority;
  if (data) after.data = *data;
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, job.type, job.id, before, after));
  if (data) job.data = *data;
  return Status::OK();
}

// A worker call without a blocked thread (kv::run_async): `checked_call(txn, keys, job, data)`
// once the handle and data are checked.
template <typename CheckedCall, typename Done>
void run_call_async(kv::Store& store, const Keys& keys, const JobsOptions& options, Job job,
                    const std::optional<std::string>& data, CheckedCall checked_call, Done done) {
  auto checked = check_call(job, data, options.max_data_bytes);
  if (!checked.ok()) return done(checked.status());
  auto call = std::make_shared<std::pair<Job, std::optional<std::string>>>(std::move(job),
                                                                           std::move(*checked));
  kv::run_async(
      store,
      [call, &keys, checked_call](kv::Transaction& txn) {
        return checked_call(txn, keys, call->first, call->second);
      },
      std::move(done), options.retry);
}

}  // namespace

Result<UpdateResult> Jobs::update(Job& job, const UpdateOptions& options) {
  return update(job, options.data ? std::optional<std::string_view>(*options.data) : std::nullopt);
}

Result<UpdateResult> Jobs::update(kv::Transaction& txn, Job& job, const UpdateOptions& options) {
  return update(txn, job,
                options.data ? std::optional<std::string_view>(*options.data) : std::nullopt);
}

void Jobs::update_async(Job job, UpdateOptions options,
                        std::function<void(Result<UpdateResult>)> done) {
  run_call_async(*store_, impl_->keys, options_, std::move(job), options.data, update_checked,
                 std::move(done));
}

Status Jobs::finish(Job& job, const FinishOptions& options) {
  return finish(job, options.data ? std::optional<std::string_view>(*options.data) : std::nullopt);
}

Status Jobs::finish(kv::Transaction& txn, Job& job, const FinishOptions& options) {
  return finish(txn, job,
                options.data ? std::optional<std::string_view>(*options.data) : std::nullopt);
}

void Jobs::finish_async(Job job, FinishOptions options, std::function<void(Status)> done) {
  run_call_async(*store_, impl_->keys, options_, std::move(job), options.data, finish_checked,
                 std::move(done));
}

Result<UpdateResult> Jobs::update(Job& job, std::optional<std::string_view> data) {
  KVQ_ASSIGN_OR_RETURN(auto checked, check_call(job, data, options_.max_data_bytes));
  return kv::run(
      *store_, [&](kv::Transaction& txn) { return update_checked(txn, impl_->keys, job, checked); },
      options_.retry);
}

Result<UpdateResult> Jobs::update(kv::Transaction& txn, Job& job,
                                  std::optional<std::string_view> data) {
  KVQ_ASSIGN_OR_RETURN(auto checked, check_call(job, data, options_.max_data_bytes));
  return update_checked(txn, impl_->keys, job, checked);
}

Status Jobs::finish(Job& job, std::optional<std::string_view> data) {
  KVQ_ASSIGN_OR_RETURN(auto checked, check_call(job, data, options_.max_data_bytes));
  return kv::run(
      *store_, [&](kv::Transaction& txn) { return finish_checked(txn, impl_->keys, job, checked); },
      options_.retry);
}

Status Jobs::finish(kv::Transaction& txn, Job& job, std::optional<std::string_view> data) {
  KVQ_ASSIGN_OR_RETURN(auto checked, check_call(job, data, options_.max_data_bytes));
  return finish_checked(txn, impl_->keys, job, checked);
}

Status Jobs::resubmit(Job& job, const ResubmitOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto checked, check_call(job, options.data, options_.max_data_bytes));
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) {
        return resubmit_checked(txn, impl_->keys, job, options.scheduled_time_ms, checked);
      },
      options_.retry);
}

void Jobs::resubmit_async(Job job, ResubmitOptions options, std::function<void(Status)> done) {
  auto resubmit_at = [scheduled = options.scheduled_time_ms](
                         kv::Transaction& txn, const Keys& keys, Job& held,
                         const std::optional<std::string>& data) {
    return resubmit_checked(txn, keys, held, scheduled, data);
  };
  run_call_async(*store_, impl_->keys, options_, std::move(job), options.data, resubmit_at,
                 std::move(done));
}

Status Jobs::resubmit(kv::Transaction& txn, Job& job, const ResubmitOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto checked, check_call(job, options.data, options_.max_data_bytes));
  return resubmit_checked(txn, impl_->keys, job, options.scheduled_time_ms, checked);
}

Result<size_t> Jobs::release_worker(std::string_view worker_type, std::string_view worker) {
  return kv::run(
      *store_, [&](kv::Transaction& txn) { return release_worker(txn, worker_type, worker); },
      options_.retry);
}

Result<size_t> Jobs::release_worker(kv::Transaction& txn, std::string_view worker_type,
                                    std::string_view worker) {
  KVQ_RETURN_IF_ERROR(validate_worker(worker));
  if (worker.empty()) return InvalidArgument("release_worker needs a worker name");
  KVQ_RETURN_IF_ERROR(validate_worker_type(worker_type));
  const auto& keys = impl_->keys;
  // This worker's own jobs, and those taken under its bare name, which may be its own.
  std::vector<std::string_view> worker_types{worker_type};
  if (!worker_type.empty()) worker_types.push_back("");
  std::map<std::string, std::optional<uint32_t>> max_lost_runs;  // by type, read once each
  size_t released = 0;
  for (std::string_view held_type : worker_types) {
    auto [begin, end] = keys.held_by(held_type, worker);
    KVQ_ASSIGN_OR_RETURN(auto held, txn.get_range(begin, end));
    for (const auto& kv : held) {
      KVQ_ASSIGN_OR_RETURN(auto type_and_id, keys.parse_held(kv.key));
      const auto& [type, id] = type_and_id;
      KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, id));
      if (!before || state_of(*before) != State::kRunning || before->worker != worker ||
          before->worker_type != held_type) {
        return Internal("worker index entry for job '" + id + "' does not match its row");
      }
      auto limit = max_lost_runs.find(type);
      if (limit == max_lost_runs.end()) {
        KVQ_ASSIGN_OR_RETURN(auto read, max_lost_runs_of(txn, keys, type));
        limit = max_lost_runs.emplace(type, read).first;
      }
      KVQ_RETURN_IF_ERROR(
          save_job(txn, keys, type, id, before, after_lost_run(*before, limit->second)));
      ++released;
    }
  }
  return released;
}

}  // namespace kvq::jobs
