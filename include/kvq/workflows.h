// kvq/workflows.h — jobs that wait for other jobs (dependencies), the values an add takes for
// them (AddOptions::depends_on, AddOptions::on_dependency_failure) and what a dependent's
// worker reads of its dependencies (Jobs::dependencies, kvq/jobs.h).
//
// A job added with dependencies is in state `waiting` (State::kWaiting) while any of them has
// not ended: it is listed and counted, never accepted. Each dependency that ends resolves its
// edge once, in the same transaction as its end (so exactly once, across every process sharing
// the store and through retries after an unknown commit result):
//   * succeeded: the dependent waits on one fewer; when it waits on none it becomes pending,
//     due at its scheduled time or now if later, at its priority;
//   * dead or cancelled (or removed before it ended): with kCancel (the default) the dependent
//     ends cancelled, its error (kind "dependency_failed") naming that dependency, and its own
//     dependents follow in the same transaction, transitively; with kRun the edge counts as
//     resolved, as a success would.
// A resolved edge stays resolved: a failed dependency rerun (or added anew) that then succeeds
// does not release its dependents again. A dependency that has already ended when the add runs
// resolves at the add. The cost of an end is the number of the job's unresolved dependents; a
// job that never had dependents pays nothing (its row says so).
//
// Batches. A batch (Jobs::put_batch) names a callback job; jobs join it at their add
// (AddOptions::batch), of any type, while it is open; seal_batch says no more will join. Once
// the batch is sealed and every member has ended, the callback is added exactly once, in the
// transaction of the last member's end (or of the seal, for a batch whose members have all
// ended, or that has none): its data is the callback's data with a field "batch" =
//   {"id", "members", "succeeded", "dead", "cancelled", "dead_jobs": [{"type", "id"}, ...]}
// (dead_jobs: the first kMaxDeadJobsInCallback dead members in (type, id) order; "dead" counts
// them all), added as an add with the default if_exists would (a job of that id already there
// is replaced, resubmitted or added anew). With BatchOn::kSuccess it is added only if every
// member succeeded; otherwise the batch settles without it (BatchState::kSkipped).
//   * A member ends when it finishes succeeded, dead (attempts used up) or cancelled, or is
//     removed before it ended (counted cancelled). Retries, snoozes and lost runs are not ends.
//   * A member counts once, at its first end: a rerun of it, or an add anew without `batch`, is
//     no longer a member (an add anew naming an open batch joins it again, as a new member).
//     So a member rerun after the callback was added does not add it again.
//   * A member's end reads and writes the batch's row only (and, when dead, one key): O(1),
//     never a scan of the members. The row is a hot key: ends of one batch's members at the
//     same moment conflict and are retried by the store; each counts in the transaction of its
//     own state change, so a retry after an unknown commit result that finds the member ended
//     counts nothing again.
//   * Until sealed the callback is never added; an add naming a sealed batch fails with
//     kWrongState, one naming no existing batch with kNotFound.
//
// The calls (class Jobs, kvq/jobs.h), each also in a caller's transaction:
//   * dependencies(type, id): the dependencies the job was added with, in (type, id) order,
//     each with how it resolved and the dependency as get() shows it now (its result); empty
//     for a job added without any; kNotFound if the job does not exist.
//   * put_batch(id, spec): creates the open batch `id` (an id as a job's), or changes the spec
//     of one still open, keeping its members; on a sealed batch it changes nothing and answers
//     kWrongState, unless the spec is the same. kNotFound if the callback's type does not
//     exist; kInvalidArgument for a bad id, type or data.
//   * seal_batch(id): no more members may join; if every member has ended (or it has none),
//     the callback is added in this transaction. Sealing a sealed batch changes nothing.
//   * batch(id): the batch as BatchInfo shows it; batch_totals(): the store's settled batches.
//     Both, and seal_batch, kNotFound for a batch that does not exist.
//
// Plain values; no behaviour beyond naming and parsing them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvq/status.h"

namespace kvq::jobs {

// A job another one depends on: its type (any type, the dependent's own or another) and id.
struct DependencyRef {
  std::string type;
  std::string id;
  friend bool operator==(const DependencyRef&, const DependencyRef&) = default;
};

// The most dependencies one add may give.
inline constexpr size_t kMaxDependencies = 100;

// What a waiting job does when one of its dependencies ends dead or cancelled.
enum class OnDependencyFailure {
  kCancel,  // end cancelled, and so, transitively, do the jobs waiting on it
  kRun,     // count it as resolved: become pending once the others have ended
};
std::string_view on_dependency_failure_name(OnDependencyFailure policy);  // "cancel", "run"
// kInvalidArgument naming the accepted names for anything else.
Result<OnDependencyFailure> parse_on_dependency_failure(std::string_view name);

// When a batch's callback is added once it is sealed and every member has ended.
enum class BatchOn {
  kComplete,  // whatever the members' outcomes
  kSuccess,   // only if every member succeeded; else the batch settles without it
};
std::string_view batch_on_name(BatchOn on);  // "complete", "success"
// kInvalidArgument naming the accepted names for anything else.
Result<BatchOn> parse_batch_on(std::string_view name);

// What put_batch takes: the callback job (its type must exist at put_batch; should it be gone
// by the time the callback is added, the add creates it with kBatchCallbackTypeTimeoutMs rather
// than fail the member's end) and when it is added.
struct BatchSpec {
  std::string callback_type;
  std::string callback_id;
  std::string callback_data = "{}";  // a JSON object
  BatchOn on = BatchOn::kComplete;
  friend bool operator==(const BatchSpec&, const BatchSpec&) = default;
};

// kOpen: members may join. kSealed: none may; waiting for members to end. kFired: the callback
// was added. kSkipped: BatchOn::kSuccess and a member did not succeed: settled without it.
enum class BatchState { kOpen, kSealed, kFired, kSkipped };
std::string_view batch_state_name(BatchState state);  // "open", "sealed", "fired", "skipped"

// A batch as Jobs::batch shows it.
struct BatchInfo {
  std::string id;
  BatchSpec spec;
  BatchState state = BatchState::kOpen;
  uint64_t members = 0;  // every job that joined
  uint64_t succeeded = 0;
  uint64_t dead = 0;
  uint64_t cancelled = 0;  // removed before they ended included
  int64_t created_ms = 0;
  int64_t settled_ms = 0;  // when it fired or was skipped; 0 before
  bool sealed() const { return state != BatchState::kOpen; }
  bool fired() const { return state == BatchState::kFired; }
  // Members not yet ended (pending, waiting or running).
  uint64_t unfinished() const { return members - succeeded - dead - cancelled; }
};

// The batches settled in the store since it was created (every process's), for /metrics.
struct BatchTotals {
  uint64_t fired = 0;
  uint64_t skipped = 0;
};

// The most dead members a callback's data names.
inline constexpr size_t kMaxDeadJobsInCallback = 100;
// The activity timeout a callback's add gives its type if it had to create it (ms).
inline constexpr int64_t kBatchCallbackTypeTimeoutMs = 300'000;

}  // namespace kvq::jobs
