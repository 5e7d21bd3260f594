// rerun, rerun_all and cancel: a producer's say over how a job ends, and over a finished one.
//
// Each stamps the row's add_seq with its transaction's read version, as add does, so that a
// retry after an unknown commit result recognises its own earlier commit: the job may have moved
// on since (a rerun job accepted, even finished again), and re-applying would run it twice, or
// answer kWrongState for what this very call did.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/types.h"
#include "jobs/validation.h"

namespace kvq::jobs {

JobRow row_after_rerun(const JobRow& finished, const RerunOptions& options, int64_t now) {
  JobRow after = finished;
  after.finished = false;
  after.resubmit = false;
  after.gave_up = false;
  after.lost_runs = 0;
  after.attempts = 0;
  after.snoozes = 0;
  after.outcome = Outcome::kNone;
  after.result.reset();
  after.progress.reset();
  after.scheduled = options.scheduled_time_ms.value_or(now);
  after.priority = options.priority.value_or(finished.priority);
  // Its dependents were resolved when it ended: a later end of this run has none to resolve.
  after.has_dependents = false;
  return after;
}

namespace {

// rerun_all reruns at most this many jobs, and reads about this many bytes of job rows, per
// transaction (as remove_all_jobs does).
constexpr size_t kRerunAllBatch = 256;
constexpr size_t kRerunAllBytes = 32 * 1024 * 1024;

Status not_found(std::string_view type, std::string_view id) {
  return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                  "' does not exist");
}

// The row a pending or running job has once cancelled. Clearing the lock fences its worker out
// (its next call halts); the run is neither lost nor failed, so lost_runs, attempts and errors
// stay as they were. No worker ended the run: a finish with its lock must halt, not pass as the
// retry of a finish (finished_lock).
JobRow row_after_cancel(const JobRow& job) {
  JobRow after = job;
  after.finished = true;
  after.outcome = Outcome::kCancelled;
  after.lock.clear();
  after.worker.clear();
  after.worker_type.clear();
  after.resubmit = false;
  after.finished_lock.clear();
  return after;
}

// rerun in `txn`, once its input is validated.
Status rerun_in(kv::Transaction& txn, const Keys& keys, std::string_view type, std::string_view id,
                const RerunOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, id));
  if (!before) return not_found(type, id);
  const State state = state_of(*before);
  if (state != State::kFinished) {
    return WrongState("job '" + std::string(id) + "' of type '" + std::string(type) + "' is " +
                      std::string(state_name(state)) + "; only a finished job can be rerun");
  }
  JobRow after = row_after_rerun(*before, options, now_ms());
  KVQ_ASSIGN_OR_RETURN(after.add_seq, txn.read_version());
  return save_job(txn, keys, type, id, before, std::move(after));
}

// What a cancel did: whether it ended a run, and when that run was accepted.
struct Cancelled {
  bool ended_run = false;
  int64_t started = 0;
};

Result<Cancelled> cancel_in(kv::Transaction& txn, const Keys& keys, std::string_view type,
                            std::string_view id) {
  KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, id));
  if (!before) return not_found(type, id);
  if (state_of(*before) == State::kFinished) {
    return WrongState("job '" + std::string(id) + "' of type '" + std::string(type) +
                      "' is already finished (" + std::string(outcome_name(before->outcome)) +
                      "); only a pending or running job can be cancelled");
  }
  const Cancelled cancelled{.ended_run = state_of(*before) == State::kRunning,
                            .started = before->started};
  JobRow after = row_after_cancel(*before);
  KVQ_ASSIGN_OR_RETURN(after.add_seq, txn.read_version());
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, id, before, std::move(after)));
  return cancelled;
}

// Whether the job's row shows that the try at read version `attempt_version` committed: it, and
// no later change of the job by a producer, stamped it.
Result<bool> applied_before(kv::Transaction& txn, const Keys& keys, std::string_view type,
                            std::string_view id, const std::optional<uint64_t>& attempt_version) {
  if (!attempt_version) return false;
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
  return row && row->add_seq == *attempt_version;
}

struct RerunBatch {
  size_t entries = 0;            // index entries the batch read
  size_t rerun = 0;              // jobs it reran
  std::vector<std::string> ids;  // their ids
  uint64_t version = 0;          // the add_seq it stamped them with
};

// Reruns the first `batch` finished jobs of `type` that ended with `outcome`, stamping each
// row's add_seq with the transaction's read version (as rerun does); `kick`: counting a kick on
// each (rerun_some).
Result<RerunBatch> rerun_batch(kv::Transaction& txn, const Keys& keys, std::string_view type,
                               Outcome outcome, size_t batch, bool kick) {
  auto [begin, end] = keys.ended_with(type, outcome);
  // The index is read with snapshot, each row without: a job changed meanwhile
  // conflicts, and the retry sees what it is now.
  KVQ_ASSIGN_OR_RETURN(auto entries, txn.get_range(begin, end, {.limit = batch, .snapshot = true}));
  KVQ_ASSIGN_OR_RETURN(uint64_t version, txn.read_version());
  const int64_t now = now_ms();
  RerunBatch b{.entries = entries.size(), .version = version};
  std::vector<std::string> ids, rows;
  for (const auto& kv : entries) {
    KVQ_ASSIGN_OR_RETURN(auto id, keys.parse_ended_id(kv.key));
    rows.push_back(keys.job(type, id));
    ids.push_back(std::move(id));
  }
  // One read for all the rows (on etcd, one round trip).
  KVQ_ASSIGN_OR_RETURN(auto stored, txn.get_many(rows));
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& kv = entries[i];
    const auto& id = ids[i];
    std::optional<JobRow> before;
    if (stored[i]) {
      KVQ_ASSIGN_OR_RETURN(before, decode_row(*stored[i]));
    }
    if (!before || state_of(*before) != State::kFinished || before->outcome != outcome) {
      // An entry its row does not back (I5 says none exists): left in place it would
      // head every later batch, and the walk would never end.
      txn.clear(kv.key);
      continue;
    }
    JobRow after = row_after_rerun(*before, {}, now);
    after.add_seq = version;
    if (kick) ++after.kicks;
    KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, id, before, std::move(after)));
    ++b.rerun;
    b.ids.push_back(id);
  }
  return b;
}

Status check_rerun_outcome(Outcome outcome, std::string_view call) {
  if (outcome == Outcome::kDead || outcome == Outcome::kCancelled) return Status::OK();
  return InvalidArgument(std::string(call) + " takes the outcome dead or cancelled, not '" +
                         std::string(outcome_name(outcome)) +
                         "' (only those are indexed; rerun other jobs one by one)");
}

}  // namespace

Status Jobs::rerun(std::string_view type, std::string_view id, const RerunOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  std::optional<uint64_t> attempt_version;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Status {
        KVQ_ASSIGN_OR_RETURN(bool applied,
                             applied_before(txn, impl_->keys, type, id, attempt_version));
        if (applied) return Status::OK();
        Status rerun = rerun_in(txn, impl_->keys, type, id, options);
        KVQ_ASSIGN_OR_RETURN(attempt_version, txn.read_version());
        return rerun;
      },
      options_.retry);
}

Status Jobs::rerun(kv::Transaction& txn, std::string_view type, std::string_view id,
                   const RerunOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  return rerun_in(txn, impl_->keys, type, id, options);
}

Result<uint64_t> Jobs::rerun_all(std::string_view type, Outcome outcome) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(check_rerun_outcome(outcome, "rerun_all"));
  const auto& keys = impl_->keys;
  KVQ_RETURN_IF_ERROR(require_type(*store_, keys, type, options_.retry));
  const size_t batch =
      std::clamp<size_t>(kRerunAllBytes / options_.max_data_bytes, 1, kRerunAllBatch);
  uint64_t rerun = 0;
  for (;;) {
    KVQ_ASSIGN_OR_RETURN(RerunBatch done, kv::run(
                                              *store_,
                                              [&](kv::Transaction& txn) {
                                                return rerun_batch(txn, keys, type, outcome, batch,
                                                                   false);
                                              },
                                              options_.retry));
    rerun += done.rerun;
    // Fewer than a batch: the type had no more such jobs at that transaction's read version.
    if (done.entries < batch) return rerun;
  }
}

Result<uint64_t> Jobs::rerun_some(std::string_view type, Outcome outcome, size_t limit) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(check_rerun_outcome(outcome, "rerun_some"));
  if (limit == 0 || limit > 1000) return InvalidArgument("rerun_some's limit must be in 1..1000");
  const auto& keys = impl_->keys;
  KVQ_RETURN_IF_ERROR(require_type(*store_, keys, type, options_.retry));
  // Bounded in bytes read as rerun_all's batches are.
  const size_t most = std::min(
      limit, std::clamp<size_t>(kRerunAllBytes / options_.max_data_bytes, 1, kRerunAllBatch));
  // A try whose commit result was unknown may have applied: its retry finds a job it reran
  // still stamped with its read version, and answers what it did instead of rerunning more.
  std::optional<RerunBatch> tried;
  KVQ_ASSIGN_OR_RETURN(RerunBatch done,
                       kv::run(
                           *store_,
                           [&](kv::Transaction& txn) -> Result<RerunBatch> {
                             if (tried) {
                               for (const std::string& id : tried->ids) {
                                 KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
                                 if (row && row->add_seq == tried->version) return *tried;
                               }
                             }
                             auto batch = rerun_batch(txn, keys, type, outcome, most, true);
                             if (batch.ok()) tried = *batch;
                             return batch;
                           },
                           options_.retry));
  return done.rerun;
}

Status Jobs::cancel(std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  std::optional<uint64_t> attempt_version;
  // What the latest try that got as far as writing did: the one that committed, if a retry
  // recognises its commit.
  Cancelled cancelled;
  KVQ_RETURN_IF_ERROR(kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Status {
        KVQ_ASSIGN_OR_RETURN(bool applied,
                             applied_before(txn, impl_->keys, type, id, attempt_version));
        if (applied) return Status::OK();
        auto tried = cancel_in(txn, impl_->keys, type, id);
        KVQ_ASSIGN_OR_RETURN(attempt_version, txn.read_version());
        if (!tried.ok()) return tried.status();
        cancelled = *tried;
        return Status::OK();
      },
      options_.retry));
  record_cancelled(*impl_, type,
                   cancelled.ended_run ? run_time_since(cancelled.started) : std::nullopt);
  return Status::OK();
}

Status Jobs::cancel(kv::Transaction& txn, std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  return cancel_in(txn, impl_->keys, type, id).status();
}

}  // namespace kvq::jobs
