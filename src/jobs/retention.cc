#include "jobs/retention.h"

#include "jobs/job_store.h"

namespace kvq::jobs {

Result<size_t> remove_expired_batch(kv::Store& store, const Keys& keys, const std::string& type,
                                    int64_t cutoff_ms, size_t batch,
                                    const kv::RetryOptions& retry) {
  return kv::run(
      store,
      [&](kv::Transaction& txn) -> Result<size_t> {
        auto [begin, end] = keys.finished_before(type, cutoff_ms);
        KVQ_ASSIGN_OR_RETURN(auto expired,
                             txn.get_range(begin, end, {.limit = batch, .snapshot = true}));
        size_t count = 0;
        for (const auto& kv : expired) {
          KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_finished(kv.key));
          KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, entry.id));
          if (!before || state_of(*before) != State::kFinished ||
              before->updated != entry.finished_ms) {
            // An entry its row does not back (the invariant says none exists): left in place it
            // would head every later read of the index and stall the removals behind it.
            txn.clear(kv.key);
            continue;
          }
          KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, entry.id, before, std::nullopt));
          ++count;
        }
        return count;
      },
      retry);
}

}  // namespace kvq::jobs
