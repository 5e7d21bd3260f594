#include "jobs/held_job.h"

#include <string>

#include "jobs/accept/accept.h"
#include "jobs/job_store.h"
#include "jobs/validation.h"
#include "util/secret.h"

namespace kvq::jobs {

Status halt(const Job& job, std::string_view why) {
  return FailedPrecondition("job '" + job.id + "' of type '" + job.type + "' " + std::string(why));
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

namespace {

constexpr RunEnd kRunEnds[] = {RunEnd::kFinish, RunEnd::kFail, RunEnd::kSnooze};

std::string_view tag_of(RunEnd end) {
  switch (end) {
    case RunEnd::kFinish: return "finish:";
    case RunEnd::kFail: return "fail:";
    case RunEnd::kSnooze: return "snooze:";
  }
  return "";
}

std::string_view past_tense(RunEnd end) {
  switch (end) {
    case RunEnd::kFinish: return "finished";
    case RunEnd::kFail: return "failed";
    case RunEnd::kSnooze: return "snoozed";
  }
  return "";
}

// Why a worker holding `job` no longer holds `row`, whose lock is not the handle's.
std::string why_not_held(const JobRow& row, const Job& job) {
  if (!row.lock.empty()) return "was accepted by another worker: this lock's run has ended";
  for (RunEnd end : kRunEnds) {
    if (ended_by(row, end, job)) {
      return "was already " + std::string(past_tense(end)) + " with this lock: its run has ended";
    }
  }
  if (!row.finished) return "was re-enqueued: this lock's run has ended";
  if (row.outcome == Outcome::kCancelled) return "was cancelled";
  if (row.outcome == Outcome::kDead)
    return row.gave_up ? "ended dead after its runs were lost" : "ended dead";
  return "has finished";
}

}  // namespace

std::string ended_lock(RunEnd end, const Job& job) { return std::string(tag_of(end)) + job.lock; }

bool ended_by(const JobRow& row, RunEnd end, const Job& job) {
  return util::secret_equal(row.finished_lock, ended_lock(end, job));
}

Result<JobRow> held(const Job& job, std::optional<JobRow> row) {
  if (!row) return halt(job, "was removed");
  if (!util::secret_equal(row->lock, job.lock)) return halt(job, why_not_held(*row, job));
  return std::move(*row);
}

Result<std::optional<JobRow>> load_own_row(kv::Transaction& txn, const Keys& keys, const Job& job) {
  return load_job(txn, keys, job.type, job.id, {.remembered = true});
}

Result<JobRow> load_held(kv::Transaction& txn, const Keys& keys, const Job& job) {
  KVQ_ASSIGN_OR_RETURN(auto row, load_own_row(txn, keys, job));
  return held(job, std::move(row));
}

}  // namespace kvq::jobs
