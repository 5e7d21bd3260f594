// jobs/adds.h — the add of one job inside a transaction (jobs.cc), for the jobs layer's own
// adds: a batch's callback (batches.cc).
#pragma once

#include <string>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// add, once its input is validated and its data normalized. Returns whether it added (or
// changed, or would have changed nothing of) the job — not when if_exists kKeep or an open
// unique window kept it — and what its windows did (add_windows.h).
// `wrote` (if given) tells whether it wrote the job, the only answer its commit vouches for.
// `guess`: read the type's settings as remembered and take the job as new (kv::ReadOptions:
// on etcd, no call at all), for the commit to check.
Result<AddResult> add_normalized(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                 std::string_view id, const std::string& data,
                                 const AddOptions& options, bool* wrote = nullptr,
                                 bool guess = false);

}  // namespace kvq::jobs
