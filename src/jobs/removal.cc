// remove(Job&) — a worker deletes the job it holds — and remove with options, which refuses a
// running job: beanstalkd's `delete` of a reserved job, by its reserver or by anyone else.
#include <memory>

#include "jobs/held_job.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/type_stats.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

// A worker's remove of the job it holds, across the tries of its transaction.
struct HeldRemoval {
  Job job;
  bool removing = false;  // an earlier try got as far as the delete
  int64_t started = 0;    // when the removed run began (for the type's stats)
};

// One try of remove(Job&). A retry that finds the job gone after an earlier try got as far as
// the delete sees that try's commit (its result was unknown), not a fence.
Status remove_held(kv::Transaction& txn, const Keys& keys, HeldRemoval& removal) {
  const Job& job = removal.job;
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, job.type, job.id));
  if (!row && removal.removing) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(JobRow before, held(job, std::move(row)));
  removal.removing = true;
  removal.started = before.started;
  return save_job(txn, keys, job.type, job.id, before, std::nullopt);
}

Status not_found(std::string_view type, std::string_view id) {
  return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                  "' does not exist");
}

}  // namespace

Status Jobs::remove(Job& job) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  HeldRemoval removal{job};
  Status removed = kv::run(
      *store_, [&](kv::Transaction& txn) { return remove_held(txn, impl_->keys, removal); },
      options_.retry);
  if (removed.ok()) impl_->type_stats.record_removed(job.type, run_time_since(removal.started));
  return removed;
}

void Jobs::remove_async(Job job, std::function<void(Status)> done) {
  if (Status valid = validate_handle(job); !valid.ok()) return done(valid);
  auto removal = std::make_shared<HeldRemoval>(HeldRemoval{std::move(job)});
  kv::run_async(
      *store_,
      [removal, &keys = impl_->keys](kv::Transaction& txn) {
        return remove_held(txn, keys, *removal);
      },
      [removal, impl = impl_.get(), done = std::move(done)](Status removed) {
        if (removed.ok()) {
          impl->type_stats.record_removed(removal->job.type, run_time_since(removal->started));
        }
        done(removed);
      },
      kv::replayable(options_.retry));
}

Status Jobs::remove(kv::Transaction& txn, Job& job) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  HeldRemoval removal{job};
  return remove_held(txn, impl_->keys, removal);
}

Status Jobs::remove(std::string_view type, std::string_view id, const RemoveOptions& options) {
  if (!options.unless_running) return remove(type, id);
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  bool removing = false;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Status {
        KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, impl_->keys, type, id));
        if (!before) return removing ? Status::OK() : not_found(type, id);
        if (state_of(*before) == State::kRunning) {
          return WrongState("job '" + std::string(id) + "' of type '" + std::string(type) +
                            "' is running; only its worker may remove it");
        }
        removing = true;
        return save_job(txn, impl_->keys, type, id, before, std::nullopt);
      },
      options_.retry);
}

}  // namespace kvq::jobs
