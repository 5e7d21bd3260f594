// kick and kick_job: beanstalkd's way back to ready for a buried (dead) or delayed (pending, not
// yet due) job, decided here so that its front end only names the tube or the job.
#include <algorithm>
#include <optional>
#include <string>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/types.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

// The most one rerun_some or make_due takes.
constexpr uint64_t kKickBatch = 1000;

// The row a kick makes of `before`, or kWrongState when beanstalkd would not kick it (a ready
// or reserved job, or one in no beanstalkd state).
Result<JobRow> row_after_kick(std::string_view type, std::string_view id, const JobRow& before,
                              int64_t now) {
  const State state = state_of(before);
  JobRow after = before;
  if (state == State::kFinished && before.outcome == Outcome::kDead) {
    after = row_after_rerun(before, {}, now);
  } else if (state == State::kPending && before.scheduled > now) {
    after.scheduled = now;
  } else {
    return WrongState("job '" + std::string(id) + "' of type '" + std::string(type) +
                      "' is neither dead nor pending and not yet due: nothing to kick");
  }
  ++after.kicks;
  return after;
}

}  // namespace

Result<uint64_t> Jobs::kick(std::string_view type, uint64_t limit) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (limit == 0) return 0;
  // Dead jobs first; only a type with none has its not-yet-due ones kicked (protocol.txt).
  uint64_t kicked = 0;
  while (kicked < limit) {
    KVQ_ASSIGN_OR_RETURN(uint64_t n,
                         rerun_some(type, Outcome::kDead, std::min(kKickBatch, limit - kicked)));
    // rerun_some may take fewer than asked (one transaction's worth) with more left.
    if (n == 0) break;
    kicked += n;
  }
  if (kicked > 0) return kicked;
  while (kicked < limit) {
    KVQ_ASSIGN_OR_RETURN(uint64_t n, make_due(type, std::min(kKickBatch, limit - kicked)));
    if (n == 0) break;
    kicked += n;
  }
  return kicked;
}

Status Jobs::kick_job(std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  return edit_job_once(*store_, impl_->keys, type, id, options_.retry,
                       [&](const JobRow& before) -> Result<std::optional<JobRow>> {
                         KVQ_ASSIGN_OR_RETURN(JobRow after,
                                              row_after_kick(type, id, before, now_ms()));
                         return std::optional<JobRow>(std::move(after));
                       });
}

}  // namespace kvq::jobs
