#include "jobs/held_job.h"

#include <string>

#include "jobs/accept/accept.h"
#include "jobs/job_store.h"
#include "jobs/validation.h"
#include "util/secret.h"

namespace kvq::jobs {

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

Result<JobRow> held(const Job& job, std::optional<JobRow> row) {
  if (!row) return halt(job, "was removed");
  if (!util::secret_equal(row->lock, job.lock))
    return halt(job, "was re-enqueued or accepted by another worker");
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
