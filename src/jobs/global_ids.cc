// Ids unique across types (AddOptions::global_id): type_of finds a job's type by its id alone,
// and next_job_number hands out numbers no one else will (beanstalkd's job ids).
#include "jobs/job_numbers.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"

namespace kvq::jobs {

Result<std::string> Jobs::type_of(std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_id(id));
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<std::string> {
        KVQ_ASSIGN_OR_RETURN(auto type, txn.get(impl_->keys.global_id(id), {.snapshot = true}));
        if (!type) return NotFound("no job '" + std::string(id) + "' added with a global id");
        return std::move(*type);
      },
      options_.retry);
}

Result<uint64_t> Jobs::next_job_number() {
  JobNumbers& numbers = impl_->job_numbers;
  util::MutexLock hold(numbers.mu);
  if (numbers.next == numbers.end) {
    const auto& keys = impl_->keys;
    // A try whose commit result was unknown and did apply wastes its block: the retry takes the
    // next one. Numbers are never handed out twice, only skipped.
    KVQ_ASSIGN_OR_RETURN(
        uint64_t last,
        kv::run(
            *store_,
            [&](kv::Transaction& txn) -> Result<uint64_t> {
              KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(keys.job_numbers()));
              uint64_t taken = 0;
              if (bytes) {
                auto t = Tuple::unpack(*bytes);
                if (!t.ok() || t->size() != 1 || !(*t)[0].is_int() || (*t)[0].as_int() < 0)
                  return Internal("corrupt job number counter");
                taken = static_cast<uint64_t>((*t)[0].as_int());
              }
              txn.set(keys.job_numbers(),
                      Tuple{static_cast<int64_t>(taken + kJobNumberBlock)}.pack());
              return taken;
            },
            options_.retry));
    numbers.next = last + 1;
    numbers.end = last + 1 + kJobNumberBlock;
  }
  return numbers.next++;
}

}  // namespace kvq::jobs
