// jobs/types.h — what the other rooms of the jobs layer ask about a type. A type exists while it
// has a timeout (its row in the timeouts subspace, schema.h); calls that name a type that does
// not exist fail with kNotFound naming it, so a misspelt type is reported instead of looking
// empty.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// OK if `type` exists, else kNotFound naming it. A snapshot read: it adds no conflict, so a
// type created or deleted meanwhile does not abort the caller's transaction.
Status require_type(kv::Transaction& txn, const Keys& keys, std::string_view type);
// The same in a read-only transaction of its own (on LMDB it never waits for a commit, so a
// commit's completion may call it).
Status require_type(kv::Store& store, const Keys& keys, std::string_view type,
                    const kv::RetryOptions& retry);

// The row (4, type) of a type made with `settings` (its timeout, retention, max_lost_runs, retry
// policy and max_running; the others at their defaults), as ensure_type and an add with
// AddOptions::create_type write it; kInvalidArgument naming a setting out of range.
Result<std::string> new_type_row(const TypeSettings& settings);
// Writes the row of a type that does not exist, and tells the activity monitors.
void create_type(kv::Transaction& txn, const Keys& keys, std::string_view type,
                 const std::string& row);

// Changes the settings of a type that exists (kNotFound otherwise), keeping the others; writes
// its row (and tells the activity monitors) only when they change.
Status change_type(kv::Transaction& txn, const Keys& keys, std::string_view type,
                   const std::function<void(TypeSettings&)>& change);

}  // namespace kvq::jobs
