// jobs/job_store.h — reading and writing job rows inside a transaction. save_job is the only
// writer of job rows and their index entries, so invariants I1–I4 of schema.h hold by
// construction: it removes the entries `before` implied and adds those `after` implies.
#pragma once

#include <optional>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

int64_t now_ms();

// The row of (type, id), read without snapshot (so a later change conflicts); nullopt if absent.
Result<std::optional<JobRow>> load_job(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, std::string_view id);

// Replaces `before` (nullopt: absent) by `after` (nullopt: delete). Sets after->seq to the
// transaction's read version and after->updated to now, and rewrites the type's tokens so
// waiters and subscribers hear of it.
Status save_job(kv::Transaction& txn, const Keys& keys, std::string_view type, std::string_view id,
                const std::optional<JobRow>& before, std::optional<JobRow> after);

// What a running job becomes when its run is lost (its worker went silent past the type's
// timeout, or left or died): its lock is cleared, so its worker is halted, and it counts one
// more lost run. Then it goes back to pending, keeping its place in the queue (or taking the
// next run's time and priority if it was resubmitted) — or, once `max_lost_runs` runs were lost
// in a row, it is finished with gave_up set and its data as it was.
JobRow after_lost_run(const JobRow& running, std::optional<uint32_t> max_lost_runs);

// The type's max_lost_runs, read in `txn`; nullopt also for a type without a timeout.
Result<std::optional<uint32_t>> max_lost_runs_of(kv::Transaction& txn, const Keys& keys,
                                                 std::string_view type);

JobInfo to_info(std::string_view type, std::string_view id, const JobRow& row);
// The event a subscriber of the job sees for this row.
JobEvent to_event(std::string_view type, std::string_view id, const JobRow& row);

}  // namespace kvq::jobs
