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
// Plain values; no behaviour beyond naming and parsing them.
#pragma once

#include <cstddef>
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

}  // namespace kvq::jobs
