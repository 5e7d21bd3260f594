// jobs/held_job.h — the fence every worker call passes: a handle from accept (its lock issued for
// its type) whose lock the job's row still holds, checked in the call's own transaction.
#pragma once

#include <optional>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// kFailedPrecondition ("job ... was ...") saying why the worker holding `job` is fenced out.
Status halt(const Job& job, std::string_view why);

// The worker's call that ended the run it held: the row's finished_lock names it with the
// run's lock, so that only a retry of that same call recognises the commit, and any other call
// with the lock (a finish after a snooze) is fenced out.
enum class RunEnd { kFinish, kFail, kSnooze };
// The finished_lock of a row whose run, held with `job`, `end` ended.
std::string ended_lock(RunEnd end, const Job& job);
// Whether `row`'s last run ended by `end` with `job`'s lock: the call is a retry of that one.
// A finished_lock written before the call was named in it (a bare lock) matches no call.
bool ended_by(const JobRow& row, RunEnd end, const Job& job);
// kInvalidArgument for a handle that did not come from an accept of its type.
Status validate_handle(const Job& job);
// The row of the job a worker holds (nullopt if absent). Where the transaction allows guesses
// (kv::ReadOptions::remembered, after allow_stale_reads), as this store handle remembers it:
// the accept that gave the worker its job wrote it, usually through this handle, so on etcd
// the call reads nothing; its commit checks the guess.
Result<std::optional<JobRow>> load_own_row(kv::Transaction& txn, const Keys& keys, const Job& job);
// The job's row if this worker still holds it, or "halt" naming what became of the job: removed,
// cancelled, finished, ended by an earlier call with this lock, pending again, or held by
// another run.
Result<JobRow> held(const Job& job, std::optional<JobRow> row);
// held() of load_own_row().
Result<JobRow> load_held(kv::Transaction& txn, const Keys& keys, const Job& job);

}  // namespace kvq::jobs
