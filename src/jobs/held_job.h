// jobs/held_job.h — the fence every worker call passes: a handle from accept (its lock issued for
// its type) whose lock the job's row still holds, checked in the call's own transaction.
#pragma once

#include <optional>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// kFailedPrecondition ("halt: ...") saying why the worker holding `job` is fenced out.
Status halt(const Job& job, std::string_view why);
// kInvalidArgument for a handle that did not come from an accept of its type.
Status validate_handle(const Job& job);
// The row of the job a worker holds (nullopt if absent). Where the transaction allows guesses
// (kv::ReadOptions::remembered, after allow_stale_reads), as this store handle remembers it:
// the accept that gave the worker its job wrote it, usually through this handle, so on etcd
// the call reads nothing; its commit checks the guess.
Result<std::optional<JobRow>> load_own_row(kv::Transaction& txn, const Keys& keys, const Job& job);
// The job's row if this worker still holds it, or "halt".
Result<JobRow> held(const Job& job, std::optional<JobRow> row);
// held() of load_own_row().
Result<JobRow> load_held(kv::Transaction& txn, const Keys& keys, const Job& job);

}  // namespace kvq::jobs
