// remove(Job&) — a worker deletes the job it holds — and remove with options, which refuses a
// running job: beanstalkd's `delete` of a reserved job, by its reserver or by anyone else.
#include <memory>

#include "jobs/held_job.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

// One try of remove(Job&). `removing`: an earlier try got as far as the delete, so a retry that
// finds the job gone sees that try's commit (its result was unknown), not a fence.
Status remove_held(kv::Transaction& txn, const Keys& keys, const Job& job, bool& removing) {
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, job.type, job.id));
  if (!row && removing) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(JobRow before, held(job, std::move(row)));
  removing = true;
  return save_job(txn, keys, job.type, job.id, before, std::nullopt);
}

Status not_found(std::string_view type, std::string_view id) {
  return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                  "' does not exist");
}

}  // namespace

Status Jobs::remove(Job& job) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  bool removing = false;
  return kv::run(
      *store_, [&](kv::Transaction& txn) { return remove_held(txn, impl_->keys, job, removing); },
      options_.retry);
}

void Jobs::remove_async(Job job, std::function<void(Status)> done) {
  if (Status valid = validate_handle(job); !valid.ok()) return done(valid);
  struct Removal {
    Job job;
    bool removing = false;
  };
  auto removal = std::make_shared<Removal>(Removal{std::move(job)});
  kv::run_async(
      *store_,
      [removal, &keys = impl_->keys](kv::Transaction& txn) {
        return remove_held(txn, keys, removal->job, removal->removing);
      },
      std::move(done), options_.retry);
}

Status Jobs::remove(kv::Transaction& txn, Job& job) {
  KVQ_RETURN_IF_ERROR(validate_handle(job));
  bool removing = false;
  return remove_held(txn, impl_->keys, job, removing);
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
