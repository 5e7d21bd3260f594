#include "jobs/job_store.h"

#include <algorithm>
#include <chrono>

#include "jobs/add_windows.h"
#include "jobs/batches.h"
#include "jobs/dependencies.h"
#include "jobs/group_queue.h"
#include "jobs/own_timeouts.h"

namespace kvq::jobs {
namespace {

// Outcomes with an outcome-index entry (I5).
bool is_indexed(Outcome outcome) {
  return outcome == Outcome::kDead || outcome == Outcome::kCancelled;
}

// JobInfo::gave_up: dead because of lost runs.
bool gave_up(const JobRow& row) {
  return row.finished && row.outcome == Outcome::kDead && row.gave_up;
}

// The pending-index entry of a pending job: in (2) without a group, in its group's (15) with
// one (I1, I6).
std::string pending_key(const Keys& keys, std::string_view type, std::string_view id,
                        const JobRow& row) {
  if (row.group.empty()) return keys.pending(type, row.priority, row.scheduled, id);
  return keys.group_pending_index(type, row.group).key(row.priority, row.scheduled, id);
}

}  // namespace

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

Result<std::optional<JobRow>> load_job(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, std::string_view id,
                                       kv::ReadOptions read) {
  KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(keys.job(type, id), read));
  if (!bytes) return std::optional<JobRow>();
  KVQ_ASSIGN_OR_RETURN(JobRow row, decode_row(*bytes));
  return std::optional<JobRow>(std::move(row));
}

Status save_job(kv::Transaction& txn, const Keys& keys, std::string_view type, std::string_view id,
                const std::optional<JobRow>& before, std::optional<JobRow> after) {
  KVQ_ASSIGN_OR_RETURN(uint64_t version, txn.read_version());
  const bool was_pending = before && state_of(*before) == State::kPending;
  const bool was_running = before && state_of(*before) == State::kRunning;
  const bool was_finished = before && state_of(*before) == State::kFinished;
  const bool was_waiting = before && state_of(*before) == State::kWaiting;
  if (was_waiting) txn.clear(keys.waiting(type, id));
  // The end of a batch's member counts once (I12): the row it leaves is in no batch.
  const bool ends = !was_finished && (!after || state_of(*after) == State::kFinished);
  std::string ended_batch;
  if (before && !before->batch.empty() && ends) {
    ended_batch = before->batch;
    if (after) after->batch.clear();
  }
  if (was_finished) {
    txn.clear(keys.finished(type, before->updated, id));
    if (is_indexed(before->outcome)) txn.clear(keys.ended(type, before->outcome, id));
  }
  if (was_pending) txn.clear(pending_key(keys, type, id, *before));
  if (was_running) {
    txn.clear(activity_key(keys, type, id, *before));
    if (!before->worker.empty())
      txn.clear(keys.held_by(before->worker_type, before->worker, type, id));
  }
  // I9: the global-id entry lives as long as the row (an add keeps a job's global_id).
  if (before && before->global_id && !(after && after->global_id)) txn.clear(keys.global_id(id));
  if (after && after->global_id && !(before && before->global_id))
    txn.set(keys.global_id(id), std::string(type));
  if (!after) {
    txn.clear(keys.job(type, id));
    if (before && before->dependencies > 0) {
      auto [begin, end] = keys.dependencies_of(type, id);
      txn.clear_range(begin, end);
    }
  } else {
    after->seq = version;
    after->updated = now_ms();
    end_debounce_window(before, *after);
    txn.set(keys.job(type, id), encode_row(*after));
    switch (state_of(*after)) {
      case State::kPending:
        txn.set(pending_key(keys, type, id, *after), "");
        txn.touch(keys.pending_token(type));
        break;
      case State::kRunning:
        txn.set(activity_key(keys, type, id, *after), "");
        if (!after->worker.empty())
          txn.set(keys.held_by(after->worker_type, after->worker, type, id), "");
        break;
      case State::kFinished:
        txn.set(keys.finished(type, after->updated, id), "");
        if (is_indexed(after->outcome)) txn.set(keys.ended(type, after->outcome, id), "");
        break;
      case State::kWaiting: txn.set(keys.waiting(type, id), ""); break;
    }
  }
  txn.touch(keys.activity_token(type));
  // A job others wait on resolves their edges in the transaction of its end (I11), or of its
  // removal before it ended (as if cancelled).
  if (before && before->has_dependents && !was_finished) {
    if (!after) {
      KVQ_RETURN_IF_ERROR(resolve_dependents(txn, keys, type, id, Outcome::kCancelled));
    } else if (state_of(*after) == State::kFinished) {
      KVQ_RETURN_IF_ERROR(resolve_dependents(txn, keys, type, id, after->outcome));
    }
  }
  if (!ended_batch.empty()) {
    KVQ_RETURN_IF_ERROR(batch_member_ended(txn, keys, ended_batch, type, id,
                                           after ? after->outcome : Outcome::kCancelled));
  }
  if ((before && !before->group.empty()) || (after && !after->group.empty()))
    return save_groups(txn, keys, type, before, after);
  return Status::OK();
}

void record_error(JobRow& row, JobError error) {
  row.errors.push_back(std::move(error));
  if (row.errors.size() > kMaxErrorsKept)
    row.errors.erase(row.errors.begin(), row.errors.end() - kMaxErrorsKept);
}

Status edit_job_once(kv::Store& store, const Keys& keys, std::string_view type, std::string_view id,
                     const kv::RetryOptions& retry,
                     const std::function<Result<std::optional<JobRow>>(const JobRow&)>& edit) {
  std::optional<uint64_t> attempt_version;
  return kv::run(
      store,
      [&](kv::Transaction& txn) -> Status {
        KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, id));
        if (attempt_version && before && before->add_seq == *attempt_version) return Status::OK();
        if (!before) {
          return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                          "' does not exist");
        }
        KVQ_ASSIGN_OR_RETURN(std::optional<JobRow> after, edit(*before));
        if (!after) return Status::OK();
        KVQ_ASSIGN_OR_RETURN(after->add_seq, txn.read_version());
        attempt_version = after->add_seq;
        return save_job(txn, keys, type, id, before, std::move(after));
      },
      retry);
}

void start_resubmitted_run(JobRow& after, const JobRow& before) {
  after.resubmit = false;
  after.scheduled = before.next_scheduled;
  after.priority = before.next_priority;
  after.attempts = 0;
  after.snoozes = 0;
}

JobRow after_lost_run(const JobRow& running, const TypeSettings& settings, const LostRun& lost) {
  JobRow after = running;
  record_error(after, JobError{running.attempts, lost.at_ms, running.worker, std::string(lost.kind),
                               lost.message, ""});
  after.lock.clear();
  after.worker.clear();
  after.worker_type.clear();
  after.progress.reset();
  after.lost_runs = running.lost_runs + 1;
  const bool attempts_used_up = after.attempts >= settings.retry.max_attempts;
  const bool lost_too_often = settings.max_lost_runs && after.lost_runs >= *settings.max_lost_runs;
  if (attempts_used_up || lost_too_often) {
    after.finished = true;
    after.outcome = Outcome::kDead;
    after.gave_up = true;  // dead of lost runs: JobInfo::gave_up
    after.resubmit = false;
    // No worker finished it: a finish with the lost run's lock must halt, not pass as a retry.
    after.finished_lock.clear();
    return after;
  }
  if (running.resubmit) {
    start_resubmitted_run(after, running);
    return after;
  }
  // Due at once (jobs.h: a lost run is retried at once), as in beanstalkd, where a job whose
  // TTR ran out is ready again: also a job whose run began before it was due (accept_job,
  // AcceptOptions::max_scheduled_time_ms). A due job keeps its place.
  after.scheduled = std::min(after.scheduled, lost.at_ms);
  return after;
}

Result<std::optional<TypeSettings>> type_settings_of(kv::Transaction& txn, const Keys& keys,
                                                     std::string_view type) {
  KVQ_ASSIGN_OR_RETURN(auto value, txn.get(keys.timeout(type)));
  if (!value) return std::optional<TypeSettings>();
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, decode_type(*value));
  return std::optional<TypeSettings>(std::move(settings));
}

JobInfo to_info(std::string_view type, std::string_view id, const JobRow& row) {
  JobInfo info;
  info.type = type;
  info.id = id;
  info.state = state_of(row);
  info.data = row.data;
  info.scheduled_time_ms = row.scheduled;
  info.priority = row.priority;
  info.resubmitted = row.resubmit;
  info.worker = row.worker;
  info.worker_type = row.worker_type;
  info.attempts = row.attempts;
  info.lost_runs = row.lost_runs;
  info.outcome = row.outcome;
  info.gave_up = gave_up(row);
  info.result = row.result;
  info.progress = row.progress;
  info.errors = row.errors;
  info.created_at_ms = row.created;
  info.updated_at_ms = row.updated;
  info.started_at_ms = row.started;
  if (row.finished) info.ended_at_ms = row.updated;
  info.group = row.group;
  info.timeout = row.timeout;
  info.data_format = row.data_format;
  info.global_id = row.global_id;
  info.snoozes = row.snoozes;
  info.kicks = row.kicks;
  info.traceparent = row.traceparent;
  info.dependencies = row.dependencies;
  info.waiting_on = row.waiting_on;
  info.on_dependency_failure = row.on_dependency_failure;
  info.has_dependents = row.has_dependents;
  info.batch = row.batch;
  info.debounce_since_ms = row.debounce_since;
  info.unique_until_ms = row.unique_until;
  return info;
}

JobEvent to_event(std::string_view type, std::string_view id, const JobRow& row) {
  JobEvent e;
  e.type = type;
  e.id = id;
  e.state = state_of(row);
  e.data = row.data;
  e.seq = row.seq;
  e.outcome = row.outcome;
  e.result = row.result;
  e.attempts = row.attempts;
  e.gave_up = gave_up(row);
  e.data_format = row.data_format;
  e.traceparent = row.traceparent;
  return e;
}

Job job_of_run(std::string_view type, std::string_view id, const JobRow& row, Millis type_timeout) {
  Job job;
  job.type = type;
  job.id = id;
  job.lock = row.lock;
  job.data = row.data;
  job.worker = row.worker;
  job.worker_type = row.worker_type;
  job.attempt = row.attempts;
  job.data_format = row.data_format;
  job.priority = row.priority;
  job.timeout = row.timeout.value_or(type_timeout);
  job.traceparent = row.traceparent;
  return job;
}

}  // namespace kvq::jobs
