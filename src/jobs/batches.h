// jobs/batches.h — batches with a completion callback (kvq/workflows.h) in the store: the
// batch row (19, 7), its dead members (19, 8) and the store's totals (19, 9) of schema.h, the
// join at a member's add, and the count at its end. The count is made in the transaction of
// the member's own state change, read from and written to the batch's row: so it is made once
// whatever the retries, the last end (or the seal) sees every other one, and it alone adds the
// callback.
#pragma once

#include <optional>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// kInvalidArgument for a bad options.batch (an id as a job's).
Status validate_batch_of_add(const AddOptions& options);

// For an add of (type, id) that finds `before` (nullopt: new): kWrongState when options.batch
// names a batch and the job exists, has not ended, and is not a member of that batch.
Status check_batch_of_add(std::string_view type, std::string_view id,
                          const std::optional<JobRow>& before, const AddOptions& options);

// For an add that writes `after` as a new job or a finished one added anew: when
// options.batch names a batch, reads its row (kNotFound if absent, kWrongState if sealed),
// counts one more member and makes `after` one; an `after` ended already (cancelled at its add
// by a failed dependency) is counted ended at once.
Status join_batch(kv::Transaction& txn, const Keys& keys, std::string_view type,
                  std::string_view id, JobRow& after, const AddOptions& options);

// The end of the member (type, id) of `batch` with `outcome` (kCancelled for one removed
// before it ended), in the transaction of that end: counts it, and if that settles the batch
// adds its callback (or skips it). Called by save_job only, which clears the row's batch.
Status batch_member_ended(kv::Transaction& txn, const Keys& keys, std::string_view batch,
                          std::string_view type, std::string_view id, Outcome outcome);

}  // namespace kvq::jobs
