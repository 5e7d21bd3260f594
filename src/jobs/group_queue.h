// jobs/group_queue.h — the groups of a type (AddOptions::group): each group's row (17), its
// pending index (15) and the queue of groups (16) that accepts take turns from (schema.h,
// I6–I8). save_job keeps them through save_groups, so every change of a grouped job keeps them
// true; accepts mark a group full, and set_max_running_per_group re-judges every group.
//
// A group's place in the queue is recomputed from its first (15) entry, read in the same
// transaction (which sees its own writes). Group rows and (15) are read without snapshot: an
// accept that drains a group conflicts with an add to it, and two accepts of one group with
// each other, so max_running_per_group holds exactly across processes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// save_job's part for the groups of `before` and `after` (either may have none; one of them
// has one): moves the job's entry between (15) indexes, counts its group's running jobs (a run
// of it ending clears `full`; an accept sets last_accept_us to now), puts the group at its turn
// in (16) and deletes the group's row once it has nothing pending or running. Writes the type's
// pending token when a group gets a queue entry it did not have, or when one of its runs ends
// while it has one, so waiting accepts look again. Reads nothing when the job stays in its
// group at the same place (an update of a running job, a change of a pending one's data).
Status save_groups(kv::Transaction& txn, const Keys& keys, std::string_view type,
                   const std::optional<JobRow>& before, const std::optional<JobRow>& after);

// The row of (type, group), read without snapshot; nullopt if absent.
Result<std::optional<GroupRow>> load_group(kv::Transaction& txn, const Keys& keys,
                                           std::string_view type, std::string_view group);

// The group's first pending job, as its (15) entry (time: scheduled ms), read without snapshot
// and limit 1; nullopt when it has none.
Result<std::optional<OrderedIndex::Entry>> first_pending(kv::Transaction& txn, const Keys& keys,
                                                         std::string_view type,
                                                         std::string_view group);

// Marks the group full, `row` being its row as this transaction sees it: it leaves the queue of
// groups until one of its runs ends.
Status mark_group_full(kv::Transaction& txn, const Keys& keys, std::string_view type,
                       std::string_view group, const GroupRow& row);

// Re-judges every group of the type under max_running_per_group `limit`: full exactly when it
// holds at least `limit` running jobs. A group no longer full goes back into the queue (the
// pending token wakes waiting accepts). Reads every group row of the type: O(groups).
Status refit_groups(kv::Transaction& txn, const Keys& keys, std::string_view type,
                    std::optional<uint32_t> limit);

// Calls `fn` with each group row of the type, by name (snapshot reads, a page at a time),
// while it returns true.
Status for_each_group(kv::Transaction& txn, const Keys& keys, std::string_view type,
                      const std::function<Result<bool>(const std::string&, const GroupRow&)>& fn);

// Milliseconds as the queue's microseconds, saturating.
int64_t ms_to_us(int64_t ms);
// The millisecond a time in microseconds falls in (floor).
int64_t us_to_ms(int64_t us);

}  // namespace kvq::jobs
