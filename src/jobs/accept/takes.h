// jobs/accept/takes.h — the steps every look that takes a pending job shares: taking one job
// or one group's turn in a caller's transaction, how a group's turn and a job without a group
// compare, and the levels of the pending index a look reads. Internal to the accept path
// (pending_picks.cc, take_many.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "jobs/accept/index_levels.h"
#include "jobs/accept/pending_picks.h"
#include "jobs/flow_control.h"

namespace kvq::jobs {

// Priority levels examined per attempt; beyond it a caller sees "nothing due" (and is woken by
// the next change). Priorities are meant to be a handful of levels.
inline constexpr int kMaxPriorityLevels = 64;
// The most job rows an accept asks for in one read ahead of taking them (try_accept_many).
inline constexpr size_t kPrefetchRows = 64;

// Takes the pending job `id` (its index entry at (priority, scheduled)) for `taker`. With
// `guess`, its row as the store handle remembers it (kv::ReadOptions::remembered: on etcd the
// row of a job this process added costs no read); the commit checks it.
Result<Job> take_job(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                     const std::string& id, int64_t priority, int64_t scheduled,
                     std::string_view group, const Taker& taker, const FlowGate& gate,
                     bool guess = false);

// The group whose turn `turn` (its (16) entry) is gives its first pending job to `taker` —
// unless it already runs max_running_per_group jobs: then it is marked full and leaves the
// queue, and nothing is taken (nullopt). A group that reaches its limit by this job is marked
// full too.
Result<std::optional<Job>> take_turn(kv::Transaction& txn, const AcceptScope& scope,
                                     std::string_view type, const OrderedIndex::Entry& turn,
                                     const Taker& taker, const FlowGate& gate);

// Whether the group standing at `turn` comes before the job without a group whose entry is
// `job`: by priority, then by in_turn_at against the job's scheduled time (a tie: the job).
bool turn_first(const OrderedIndex::Entry& turn, const OrderedIndex::Entry& job);

// The end of the millisecond `ms`, in the queue's microseconds.
int64_t end_of_ms(int64_t ms);

// The levels of `type`'s pending index a look for `takers` jobs reads, due by `max_time`. Each
// priority level costs one read, or two when it held fewer due jobs than wanted.
DueLevels ungrouped_levels(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                           const AcceptOptions& accept, size_t takers, int64_t max_time);

}  // namespace kvq::jobs
