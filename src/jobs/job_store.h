// jobs/job_store.h — reading and writing job rows inside a transaction. save_job is the only
// writer of job rows and their index entries, so invariants I1–I8 of schema.h hold by
// construction: it removes the entries `before` implied and adds those `after` implies, and
// keeps the rows and the queue of the groups they belong to (group_queue.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

int64_t now_ms();
// Wall time in microseconds: the unit of the queue of groups (schema.h).
int64_t now_us();

// The row of (type, id), read without snapshot (so a later change conflicts); nullopt if absent.
// `read`: guesses the read may take (kv::ReadOptions).
Result<std::optional<JobRow>> load_job(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, std::string_view id,
                                       kv::ReadOptions read = {});

// Replaces `before` (nullopt: absent) by `after` (nullopt: delete). Sets after->seq to the
// transaction's read version and after->updated to now, and rewrites the type's tokens so
// waiters and subscribers hear of it. When either has a group, also save_groups (group_queue.h):
// a job without one before and after costs no read or write for groups.
Status save_job(kv::Transaction& txn, const Keys& keys, std::string_view type, std::string_view id,
                const std::optional<JobRow>& before, std::optional<JobRow> after);

// Appends `error` to the row's errors, keeping the last kMaxErrorsKept.
void record_error(JobRow& row, JobError error);

// Why a run was lost, for the error it records.
struct LostRun {
  std::string_view kind;  // "timeout" (activity monitor) or "worker_lost" (release_worker)
  std::string message;
  int64_t at_ms = 0;
};

// What a running job becomes when its run is lost (its worker went silent past the type's
// timeout, or left or died): a failed attempt. Its lock is cleared, so its worker is halted, the
// error is recorded, and it counts one more lost run. Then it goes back to pending, due at once,
// keeping its place in the queue if it was due (or taking the next run's time and priority, its
// attempts starting over, if it was resubmitted) — or, once it has made the type's max_attempts
// attempts or lost max_lost_runs runs in a row, it is finished dead (gave_up set: dead of lost
// runs) with its data as it was.
JobRow after_lost_run(const JobRow& running, const TypeSettings& settings, const LostRun& lost);

// The run a resubmit asked for (JobRow::resubmit) starts, in `after`, the row of a run of
// `before` that just ended (finished, failed, snoozed or lost): pending again at the time and
// priority the resubmitting add gave (next_scheduled, next_priority), its attempts and snoozes
// starting over. The one place this transition is written.
void start_resubmitted_run(JobRow& after, const JobRow& before);

// The row a finished job has once rerun (Jobs::rerun, and accept_job of a dead job): pending at
// the options' time and priority, starting over — its attempts, result, outcome and progress
// cleared — with its data and its errors (why it died, for a dead job) kept.
JobRow row_after_rerun(const JobRow& finished, const RerunOptions& options, int64_t now);

// Changes the existing job `id` of `type` in a transaction of its own (kv::run with `retry`):
// `edit` gets its row and returns the row it is to have, or nullopt to leave it as it is. The
// row written is stamped (add_seq) with its try's read version, by which a retry after an
// unknown commit result recognises that commit, though the job may have been accepted since:
// the edit applies once. kNotFound if the job does not exist; `edit`'s error otherwise.
Status edit_job_once(kv::Store& store, const Keys& keys, std::string_view type, std::string_view id,
                     const kv::RetryOptions& retry,
                     const std::function<Result<std::optional<JobRow>>(const JobRow&)>& edit);

// The type's settings, read in `txn`; nullopt for a type without a timeout.
Result<std::optional<TypeSettings>> type_settings_of(kv::Transaction& txn, const Keys& keys,
                                                     std::string_view type);

JobInfo to_info(std::string_view type, std::string_view id, const JobRow& row);
// The event a subscriber of the job sees for this row.
JobEvent to_event(std::string_view type, std::string_view id, const JobRow& row);
// The handle of the run `row` (running) holds, as an accept hands it out: its lock, data and
// format, attempt, priority, and timeout (the job's own, else `type_timeout`). Every accept
// builds its Job here.
Job job_of_run(std::string_view type, std::string_view id, const JobRow& row, Millis type_timeout);

}  // namespace kvq::jobs
