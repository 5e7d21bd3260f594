// jobs/accept/hand_off.h — an add that hands its new job to an accept waiting in this process,
// in the add's own transaction (issue 42's first lever): the job is written as that waiter's
// run, so no pending entry is written and deleted, no round of the accept waiters runs, and no
// thread is woken to run one. As Redis serves a blocked BLMOVE inside the push that woke it.
//
// The add claims the type's first waiter before its transaction (AcceptWaiters::claim), and the
// transaction takes the hand-off only where that waiter's own look would have taken this job
// first, and only where no rule of the type's could refuse it:
//   - the job is new (no row before), due now, without a group;
//   - the type has no flow control (not paused, no max_running, no rate limit) and never had a
//     grouped job (those rules are decided by reading what they limit; a hand-off does not try);
//   - the type's pending index is empty, read in this transaction: nothing queued ahead of the
//     job, and an add of the type committed meanwhile anywhere makes this one conflict and retry,
//     so order and exactness across processes hold as they do for an accept's look.
// Otherwise the add writes the job pending as always and the waiter goes back to the front of
// its queue. Only on a nonblocking store (LMDB): on etcd the range read would be a round trip
// more in every add.
#pragma once

#include <optional>
#include <string_view>

#include "jobs/accept/accept_waiters.h"
#include "jobs/schema.h"

namespace kvq::jobs {

// One add's hand-off: the waiter it claimed, and what its transaction decided.
struct HandOff {
  const AcceptScope& scope;
  AcceptWaiters::Claim claim;
  // The run the attempt started for the waiter (reset by each attempt): deliver it if that
  // attempt's commit is the one that held.
  std::optional<Job> job;
};

// In an add's transaction: when the rules above allow it, turns `row` (the new pending job add
// made of `type`'s job `id`) into the claimed waiter's run and sets hand_off.job, noting the
// queue latency for the waiter's accept. `settings` are the type's, as the add read them.
Result<bool> take_hand_off(kv::Transaction& txn, std::string_view type, std::string_view id,
                           const TypeSettings& settings, JobRow& row, HandOff& hand_off);

// For an add whose commit result was unknown and that finds its own earlier write `row`: the
// job to deliver if that write was the hand-off (the row is still the claimed waiter's run).
Result<std::optional<Job>> handed_off_earlier(kv::Transaction& txn, std::string_view type,
                                              std::string_view id, const JobRow& row,
                                              const HandOff& hand_off);

}  // namespace kvq::jobs
