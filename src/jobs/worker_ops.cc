// update, finish, fail, snooze and resubmit: what a worker does with a job it holds. Each checks
// the job's lock in the same transaction as its writes, which is what fences out a stale worker.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "jobs/held_job.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"
#include "jobs/worker_calls.h"
#include "util/random.h"

namespace kvq::jobs {
namespace {

// `before` once its worker ended the run it holds with `job` by `end`: no one holds it, the
// call and the run's lock are kept so that a retry of that call recognises its own commit (and
// no other call passes for one), and the run was not lost.
JobRow ended_by_worker(const JobRow& before, RunEnd end, const Job& job) {
  JobRow after = before;
  after.lock.clear();
  after.worker.clear();
  after.worker_type.clear();
  after.finished_lock = ended_lock(end, job);
  after.lost_runs = 0;
  return after;
}

// The data a call writes on `row`, which keeps its format: data checked as bytes (the handle
// said so) is checked as JSON here when the row's data is JSON.
Result<std::string> data_for(const JobRow& row, const Checked& checked) {
  if (row.data_format == DataFormat::kJson && checked.data_format == DataFormat::kBytes)
    return normalize_data(*checked.data, checked.data->size());
  return *checked.data;
}

Result<Checked> check_call(const Job& job, const std::optional<std::string>& data,
                           const std::optional<std::string>& value, std::string_view value_name,
                           size_t max) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  Checked checked;
  checked.data_format = job.data_format;
  if (data) {
    KVQ_ASSIGN_OR_RETURN(checked.data, normalize_data(*data, job.data_format, max));
  }
  if (value) {
    KVQ_ASSIGN_OR_RETURN(checked.value, normalize_value(*value, max, value_name));
  }
  return checked;
}

std::optional<std::string> copy(std::optional<std::string_view> text) {
  if (!text) return std::nullopt;
  return std::string(*text);
}

Result<Checked> check_update(const Job& job, const UpdateOptions& options, size_t max) {
  return check_call(job, options.data, options.progress, "progress", max);
}

}  // namespace

Result<Checked> check_finish(const Job& job, const FinishOptions& options, size_t max) {
  return check_call(job, options.data, options.result, "result", max);
}

namespace {

Result<UpdateResult> update_checked(kv::Transaction& txn, const Keys& keys, Job& job,
                                    const Checked& checked) {
  KVQ_ASSIGN_OR_RETURN(JobRow before, load_held(txn, keys, job));
  JobRow after = before;
  if (checked.data) {
    KVQ_ASSIGN_OR_RETURN(after.data, data_for(before, checked));
  }
  if (checked.value) after.progress = *checked.value;
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, job.type, job.id, before, after));
  if (checked.data) job.data = after.data;
  return UpdateResult{before.resubmit};
}

}  // namespace

Result<Finished> finish_checked(kv::Transaction& txn, const Keys& keys, const Job& job,
                                const Checked& checked) {
  KVQ_ASSIGN_OR_RETURN(auto current, load_own_row(txn, keys, job));
  // A retry after an unknown commit result finds its own finish already applied. Only while no
  // other run holds the job: a finish with the lock of a run since re-accepted halts.
  if (current && current->lock.empty() && ended_by(*current, RunEnd::kFinish, job)) {
    return Finished{current->finished && current->outcome == Outcome::kSucceeded, current->started,
                    true};
  }
  KVQ_ASSIGN_OR_RETURN(JobRow before, held(job, std::move(current)));
  JobRow after = ended_by_worker(before, RunEnd::kFinish, job);
  if (checked.data) {
    KVQ_ASSIGN_OR_RETURN(after.data, data_for(before, checked));
  }
  if (before.resubmit) {
    start_resubmitted_run(after, before);  // the add asked for a new run
  } else {
    after.finished = true;
    after.outcome = Outcome::kSucceeded;
    after.gave_up = false;
    after.result = checked.value;
  }
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, job.type, job.id, before, after));
  return Finished{!before.resubmit, before.started};
}

namespace {

Status resubmit_checked(kv::Transaction& txn, const Keys& keys, Job& job,
                        std::optional<int64_t> scheduled_time_ms, const Checked& checked) {
  KVQ_ASSIGN_OR_RETURN(JobRow before, load_held(txn, keys, job));
  JobRow after = before;
  after.resubmit = true;
  after.next_scheduled = scheduled_time_ms.value_or(now_ms());
  after.next_priority = before.priority;
  if (checked.data) {
    KVQ_ASSIGN_OR_RETURN(after.data, data_for(before, checked));
  }
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, job.type, job.id, before, after));
  if (checked.data) job.data = after.data;
  return Status::OK();
}

// A fail's input, checked once: the error as it is kept (message and details truncated), and
// what to do next.
struct CheckedFail {
  ErrorReport error;
  std::optional<Millis> retry_in;
  bool retry = true;
  std::optional<int64_t> priority;
};

Result<CheckedFail> check_fail(const Job& job, const FailOptions& options, size_t max) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  KVQ_ASSIGN_OR_RETURN(ErrorReport error,
                       validate_error(options.kind, options.message, options.details, max));
  if (options.retry_in && options.retry_in->count() < 0)
    return InvalidArgument("fail's retry_in must not be negative");
  return CheckedFail{std::move(error), options.retry_in, options.retry, options.priority};
}

// What a fail decided, and when the run it ended began (for the type's stats).
struct Failed {
  FailResult result;
  int64_t started = 0;
  bool recognised = false;  // the call found its own earlier commit
  bool counted = false;     // set by counting(): the stats count it
};

// What a fail that committed decided, read back from the row it wrote.
FailResult decided(const JobRow& row) {
  FailResult result;
  result.dead = row.finished && row.outcome == Outcome::kDead;
  if (!result.dead) result.retry_at_ms = row.scheduled;
  result.attempt = row.errors.empty() ? row.attempts : row.errors.back().attempt;
  return result;
}

Result<Failed> fail_checked(kv::Transaction& txn, const Keys& keys, const Job& job,
                            const CheckedFail& fail) {
  KVQ_ASSIGN_OR_RETURN(auto current, load_own_row(txn, keys, job));
  // A retry after an unknown commit result finds its own fail applied: the attempt is counted
  // once, and the answer is what that commit decided.
  if (current && ended_by(*current, RunEnd::kFail, job))
    return Failed{decided(*current), current->started, true};
  KVQ_ASSIGN_OR_RETURN(JobRow before, held(job, std::move(current)));
  KVQ_ASSIGN_OR_RETURN(auto settings, type_settings_of(txn, keys, job.type));
  const RetryPolicy policy = settings ? settings->retry : RetryPolicy{};
  const int64_t now = now_ms();
  JobRow after = ended_by_worker(before, RunEnd::kFail, job);
  record_error(after, JobError{before.attempts, now, before.worker, fail.error.kind,
                               fail.error.message, fail.error.details});
  FailResult result;
  result.attempt = before.attempts;
  if (before.resubmit) {
    start_resubmitted_run(after, before);  // the add asked for a new run: it comes
    result.retry_at_ms = after.scheduled;
  } else if (!fail.retry || before.attempts >= policy.max_attempts) {
    after.finished = true;
    after.outcome = Outcome::kDead;
    after.gave_up = false;  // dead of a failure, not of lost runs
    result.dead = true;
  } else {
    const Millis delay = fail.retry_in.value_or(
        jittered_backoff_delay(policy, before.attempts, util::random_unit()));
    after.scheduled = now + delay.count();
    result.retry_at_ms = after.scheduled;
  }
  if (fail.priority) after.priority = *fail.priority;
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, job.type, job.id, before, after));
  return Failed{result, before.started};
}

Status check_snooze(const Job& job, const SnoozeOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  if (options.delay.count() < 0) return InvalidArgument("snooze delay must not be negative");
  return Status::OK();
}

// When the run that snooze_checked ended began, for the type's stats.
struct Snoozed {
  int64_t started = 0;
  bool recognised = false;  // the call found its own earlier commit
  bool counted = false;     // set by counting(): the stats count it
};

Result<Snoozed> snooze_checked(kv::Transaction& txn, const Keys& keys, const Job& job,
                               const SnoozeOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto current, load_own_row(txn, keys, job));
  if (current && ended_by(*current, RunEnd::kSnooze, job)) return Snoozed{current->started, true};
  KVQ_ASSIGN_OR_RETURN(JobRow before, held(job, std::move(current)));
  JobRow after = ended_by_worker(before, RunEnd::kSnooze, job);
  // This run does not count as an attempt.
  if (after.attempts > 0) --after.attempts;
  after.scheduled = options.scheduled_time_ms.value_or(now_ms() + options.delay.count());
  if (before.resubmit) {
    // The resubmit's run, but not before the snooze's time: the worker said "not now".
    const int64_t snoozed_to = after.scheduled;
    start_resubmitted_run(after, before);
    after.scheduled = std::max(after.scheduled, snoozed_to);
  }
  if (options.priority) after.priority = *options.priority;
  after.snoozes += 1;
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, job.type, job.id, before, after));
  return Snoozed{before.started};
}

// A worker call in a transaction of its own (kv::run): `checked_call(txn, keys, job, input)`
// once the handle and input are checked, on reads that may be behind (allowing_stale_reads).
template <typename Input, typename CheckedCall>
auto run_call(kv::Store& store, const Keys& keys, const JobsOptions& options, Job& job,
              const Input& input, CheckedCall checked_call) {
  return kv::run(
      store,
      [&, call = allowing_stale_reads(checked_call)](kv::Transaction& txn) {
        return call(txn, keys, job, input);
      },
      options.retry);
}

// A worker call without a blocked thread (kv::run_async): `checked_call(txn, keys, job, input)`
// once the handle and input are checked.
template <typename Input, typename CheckedCall, typename Done>
void run_call_async(kv::Store& store, const Keys& keys, const JobsOptions& options, Job job,
                    Result<Input> input, CheckedCall checked_call, Done done) {
  if (!input.ok()) return done(input.status());
  auto call = std::make_shared<std::pair<Job, Input>>(std::move(job), std::move(*input));
  kv::run_async(
      store,
      [call, &keys, checked_call = allowing_stale_reads(checked_call)](kv::Transaction& txn) {
        return checked_call(txn, keys, call->first, call->second);
      },
      std::move(done), kv::replayable(options.retry));
}

}  // namespace

Result<UpdateResult> Jobs::update(Job& job, const UpdateOptions& options) {
  KVQ_ASSIGN_OR_RETURN(Checked checked, check_update(job, options, options_.max_data_bytes));
  return run_call(*store_, impl_->keys, options_, job, checked, update_checked);
}

Result<UpdateResult> Jobs::update(kv::Transaction& txn, Job& job, const UpdateOptions& options) {
  KVQ_ASSIGN_OR_RETURN(Checked checked, check_update(job, options, options_.max_data_bytes));
  return update_checked(txn, impl_->keys, job, checked);
}

void Jobs::update_async(Job job, UpdateOptions options,
                        std::function<void(Result<UpdateResult>)> done) {
  auto checked = check_update(job, options, options_.max_data_bytes);
  run_call_async(*store_, impl_->keys, options_, std::move(job), std::move(checked), update_checked,
                 std::move(done));
}

Result<UpdateResult> Jobs::update(Job& job, std::optional<std::string_view> data) {
  return update(job, UpdateOptions{.data = copy(data)});
}

Result<UpdateResult> Jobs::update(kv::Transaction& txn, Job& job,
                                  std::optional<std::string_view> data) {
  return update(txn, job, UpdateOptions{.data = copy(data)});
}

Status Jobs::finish(Job& job, const FinishOptions& options) {
  KVQ_ASSIGN_OR_RETURN(Checked checked, check_finish(job, options, options_.max_data_bytes));
  KVQ_ASSIGN_OR_RETURN(Finished finished, run_call(*store_, impl_->keys, options_, job, checked,
                                                   counting(finish_checked)));
  if (finished.counted) {
    impl_->type_stats.record_finished(job.type, finished.succeeded,
                                      run_time_since(finished.started));
  }
  return Status::OK();
}

Status Jobs::finish(kv::Transaction& txn, Job& job, const FinishOptions& options) {
  KVQ_ASSIGN_OR_RETURN(Checked checked, check_finish(job, options, options_.max_data_bytes));
  return finish_checked(txn, impl_->keys, job, checked).status();
}

void Jobs::finish_async(Job job, FinishOptions options, std::function<void(Status)> done) {
  auto checked = check_finish(job, options, options_.max_data_bytes);
  const std::string type = job.type;
  run_call_async(*store_, impl_->keys, options_, std::move(job), std::move(checked),
                 counting(finish_checked),
                 [impl = impl_.get(), type, done = std::move(done)](Result<Finished> finished) {
                   if (finished.ok() && finished->counted) {
                     impl->type_stats.record_finished(type, finished->succeeded,
                                                      run_time_since(finished->started));
                   }
                   done(finished.status());
                 });
}

Status Jobs::finish(Job& job, std::optional<std::string_view> data) {
  return finish(job, FinishOptions{.data = copy(data)});
}

Status Jobs::finish(kv::Transaction& txn, Job& job, std::optional<std::string_view> data) {
  return finish(txn, job, FinishOptions{.data = copy(data)});
}

namespace {

// resubmit_checked at the time `options` give, as run_call and run_call_async call it.
auto resubmit_at(std::optional<int64_t> scheduled_time_ms) {
  return [scheduled_time_ms](kv::Transaction& txn, const Keys& keys, Job& held,
                             const Checked& checked) {
    return resubmit_checked(txn, keys, held, scheduled_time_ms, checked);
  };
}

}  // namespace

Status Jobs::resubmit(Job& job, const ResubmitOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto checked,
                       check_call(job, options.data, std::nullopt, "", options_.max_data_bytes));
  return run_call(*store_, impl_->keys, options_, job, checked,
                  resubmit_at(options.scheduled_time_ms));
}

void Jobs::resubmit_async(Job job, ResubmitOptions options, std::function<void(Status)> done) {
  auto checked = check_call(job, options.data, std::nullopt, "", options_.max_data_bytes);
  run_call_async(*store_, impl_->keys, options_, std::move(job), std::move(checked),
                 resubmit_at(options.scheduled_time_ms), std::move(done));
}

Status Jobs::resubmit(kv::Transaction& txn, Job& job, const ResubmitOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto checked,
                       check_call(job, options.data, std::nullopt, "", options_.max_data_bytes));
  return resubmit_checked(txn, impl_->keys, job, options.scheduled_time_ms, checked);
}

Result<FailResult> Jobs::fail(Job& job, const FailOptions& options) {
  KVQ_ASSIGN_OR_RETURN(CheckedFail checked, check_fail(job, options, options_.max_data_bytes));
  KVQ_ASSIGN_OR_RETURN(Failed failed, run_call(*store_, impl_->keys, options_, job, checked,
                                               counting(fail_checked)));
  if (failed.counted)
    impl_->type_stats.record_failed(job.type, failed.result.dead, run_time_since(failed.started));
  return failed.result;
}

void Jobs::fail_async(Job job, FailOptions options, std::function<void(Result<FailResult>)> done) {
  auto checked = check_fail(job, options, options_.max_data_bytes);
  const std::string type = job.type;
  run_call_async(*store_, impl_->keys, options_, std::move(job), std::move(checked),
                 counting(fail_checked),
                 [impl = impl_.get(), type, done = std::move(done)](Result<Failed> failed) {
                   if (!failed.ok()) return done(failed.status());
                   if (failed->counted) {
                     impl->type_stats.record_failed(type, failed->result.dead,
                                                    run_time_since(failed->started));
                   }
                   done(failed->result);
                 });
}

Result<FailResult> Jobs::fail(kv::Transaction& txn, Job& job, const FailOptions& options) {
  KVQ_ASSIGN_OR_RETURN(CheckedFail checked, check_fail(job, options, options_.max_data_bytes));
  KVQ_ASSIGN_OR_RETURN(Failed failed, fail_checked(txn, impl_->keys, job, checked));
  return failed.result;
}

Status Jobs::snooze(Job& job, const SnoozeOptions& options) {
  KVQ_RETURN_IF_ERROR(check_snooze(job, options));
  KVQ_ASSIGN_OR_RETURN(Snoozed snoozed, run_call(*store_, impl_->keys, options_, job, options,
                                                 counting(snooze_checked)));
  if (snoozed.counted) impl_->type_stats.record_snoozed(job.type, run_time_since(snoozed.started));
  return Status::OK();
}

void Jobs::snooze_async(Job job, SnoozeOptions options, std::function<void(Status)> done) {
  Status checked = check_snooze(job, options);
  const std::string type = job.type;
  run_call_async(*store_, impl_->keys, options_, std::move(job),
                 checked.ok() ? Result<SnoozeOptions>(options) : Result<SnoozeOptions>(checked),
                 counting(snooze_checked),
                 [impl = impl_.get(), type, done = std::move(done)](Result<Snoozed> snoozed) {
                   if (snoozed.ok() && snoozed->counted)
                     impl->type_stats.record_snoozed(type, run_time_since(snoozed->started));
                   done(snoozed.status());
                 });
}

Status Jobs::snooze(kv::Transaction& txn, Job& job, const SnoozeOptions& options) {
  KVQ_RETURN_IF_ERROR(check_snooze(job, options));
  return snooze_checked(txn, impl_->keys, job, options).status();
}

Result<size_t> Jobs::release_worker(std::string_view worker_type, std::string_view worker) {
  // A try whose commit result was unknown (kv.h) may have applied: its retry then finds none of
  // those jobs held any more. It counts those whose last error is that try's lost run (its
  // kind, worker and time), so that the count says what the call did.
  std::vector<std::pair<std::string, std::string>> tried;  // what the previous try released
  int64_t tried_at = 0;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<size_t> {
        size_t recognised = 0;
        for (const auto& [type, id] : tried) {
          KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, impl_->keys, type, id));
          if (row && !row->errors.empty() && row->errors.back().kind == "worker_lost" &&
              row->errors.back().at_ms == tried_at && row->errors.back().worker == worker)
            ++recognised;
        }
        tried.clear();
        tried_at = now_ms();
        KVQ_ASSIGN_OR_RETURN(size_t released,
                             release_worker_at(txn, worker_type, worker, tried_at, &tried));
        return recognised + released;
      },
      options_.retry);
}

Result<size_t> Jobs::release_worker(kv::Transaction& txn, std::string_view worker_type,
                                    std::string_view worker) {
  return release_worker_at(txn, worker_type, worker, now_ms(), nullptr);
}

Result<size_t> Jobs::release_worker_at(
    kv::Transaction& txn, std::string_view worker_type, std::string_view worker, int64_t now,
    std::vector<std::pair<std::string, std::string>>* released_ids) {
  KVQ_RETURN_IF_ERROR(validate_worker(worker));
  if (worker.empty()) return InvalidArgument("release_worker needs a worker name");
  KVQ_RETURN_IF_ERROR(validate_worker_type(worker_type));
  const auto& keys = impl_->keys;
  // This worker's own jobs, and those taken under its bare name, which may be its own.
  std::vector<std::string_view> worker_types{worker_type};
  if (!worker_type.empty()) worker_types.push_back("");
  std::map<std::string, TypeSettings> settings_of;  // by type, read once each
  const LostRun lost{"worker_lost",
                     "worker '" + std::string(worker) +
                         (worker_type.empty() ? "" : "' of type '" + std::string(worker_type)) +
                         "' left or was declared dead",
                     now};
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
      auto settings = settings_of.find(type);
      if (settings == settings_of.end()) {
        KVQ_ASSIGN_OR_RETURN(auto read, type_settings_of(txn, keys, type));
        settings = settings_of.emplace(type, read.value_or(TypeSettings{})).first;
      }
      KVQ_RETURN_IF_ERROR(
          save_job(txn, keys, type, id, before, after_lost_run(*before, settings->second, lost)));
      ++released;
      if (released_ids) released_ids->emplace_back(type, id);
    }
  }
  return released;
}

}  // namespace kvq::jobs
