#include "jobs/dependencies.h"

#include <algorithm>
#include <map>
#include <set>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

std::string named(std::string_view type, std::string_view id) {
  return "job '" + std::string(id) + "' of type '" + std::string(type) + "'";
}

bool is_failure(Outcome outcome) {
  return outcome == Outcome::kDead || outcome == Outcome::kCancelled;
}

// `row` (waiting, or being added) ends cancelled because the dependency (type, id) ended
// `outcome`: its error names the dependency.
void cancel_for_dependency(JobRow& row, std::string_view type, std::string_view id, Outcome outcome,
                           int64_t now) {
  row.finished = true;
  row.outcome = Outcome::kCancelled;
  row.waiting_on = 0;
  record_error(row, JobError{row.attempts, now, "", "dependency_failed",
                             "dependency " + named(type, id) + " ended " +
                                 std::string(outcome_name(outcome)),
                             ""});
}

Result<Outcome> decode_edge(std::string_view bytes) {
  KVQ_ASSIGN_OR_RETURN(Tuple t, Tuple::unpack(bytes));
  if (t.size() != 1 || !t[0].is_int() || t[0].as_int() < static_cast<int64_t>(Outcome::kNone) ||
      t[0].as_int() > static_cast<int64_t>(Outcome::kCancelled)) {
    return Internal("dependency edge of the wrong shape");
  }
  return static_cast<Outcome>(t[0].as_int());
}

std::string encode_edge(Outcome resolved) { return Tuple{static_cast<int64_t>(resolved)}.pack(); }

}  // namespace

std::string_view on_dependency_failure_name(OnDependencyFailure policy) {
  return policy == OnDependencyFailure::kRun ? "run" : "cancel";
}

Result<OnDependencyFailure> parse_on_dependency_failure(std::string_view name) {
  if (name == "cancel") return OnDependencyFailure::kCancel;
  if (name == "run") return OnDependencyFailure::kRun;
  return InvalidArgument("unknown on_dependency_failure '" + std::string(name) +
                         "' (cancel or run)");
}

Status validate_dependencies(std::string_view type, std::string_view id,
                             const AddOptions& options) {
  const auto& deps = options.depends_on;
  if (deps.size() > kMaxDependencies) {
    return InvalidArgument("depends_on has " + std::to_string(deps.size()) +
                           " dependencies; at most " + std::to_string(kMaxDependencies));
  }
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const DependencyRef& dep : deps) {
    if (Status s = validate_type(dep.type); !s.ok())
      return InvalidArgument("depends_on: " + s.message());
    if (Status s = validate_id(dep.id); !s.ok())
      return InvalidArgument("depends_on: " + s.message());
    if (dep.type == type && dep.id == id) {
      return InvalidArgument("depends_on: " + named(type, id) +
                             " cannot depend on itself (a dependency cycle)");
    }
    if (!seen.emplace(dep.type, dep.id).second)
      return InvalidArgument("depends_on names " + named(dep.type, dep.id) + " twice");
  }
  return Status::OK();
}

Result<std::vector<size_t>> batch_order(std::string_view type, const std::vector<NewJob>& jobs) {
  const size_t n = jobs.size();
  std::vector<size_t> order;
  order.reserve(n);
  bool any = false;
  for (const NewJob& job : jobs) any = any || !job.options.depends_on.empty();
  if (!any) {
    for (size_t i = 0; i < n; ++i) order.push_back(i);
    return order;
  }
  std::map<std::string_view, std::vector<size_t>> by_id;
  for (size_t i = 0; i < n; ++i) by_id[jobs[i].id].push_back(i);
  // after[j]: the jobs of the batch that depend on job j; blocking[i]: how many i depends on.
  std::vector<std::vector<size_t>> after(n);
  std::vector<size_t> blocking(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (const DependencyRef& dep : jobs[i].options.depends_on) {
      if (dep.type != type) continue;
      auto it = by_id.find(dep.id);
      if (it == by_id.end()) continue;
      for (size_t j : it->second) {
        if (j == i) continue;
        after[j].push_back(i);
        ++blocking[i];
      }
    }
  }
  // Kahn's algorithm, taking the first ready job in batch order each time.
  std::set<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (blocking[i] == 0) ready.insert(i);
  while (!ready.empty()) {
    const size_t j = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(j);
    for (size_t i : after[j])
      if (--blocking[i] == 0) ready.insert(i);
  }
  if (order.size() == n) return order;
  // Every job left depends on another one left: walk back from one until a job repeats.
  size_t at = 0;
  while (blocking[at] == 0) ++at;
  std::vector<size_t> path;
  std::vector<int> seen_at(n, -1);
  while (seen_at[at] < 0) {
    seen_at[at] = static_cast<int>(path.size());
    path.push_back(at);
    for (const DependencyRef& dep : jobs[at].options.depends_on) {
      if (dep.type != type) continue;
      auto it = by_id.find(dep.id);
      if (it == by_id.end()) continue;
      auto next = std::find_if(it->second.begin(), it->second.end(),
                               [&](size_t j) { return j != at && blocking[j] > 0; });
      if (next != it->second.end()) {
        at = *next;
        break;
      }
    }
  }
  std::string cycle;
  for (size_t k = static_cast<size_t>(seen_at[at]); k < path.size(); ++k)
    cycle += "'" + jobs[path[k]].id + "' -> ";
  cycle += "'" + jobs[at].id + "'";
  return InvalidArgument("depends_on makes a dependency cycle among jobs of type '" +
                         std::string(type) + "': " + cycle);
}

Status add_dependencies(kv::Transaction& txn, const Keys& keys, std::string_view type,
                        std::string_view id, const std::optional<JobRow>& before, JobRow& after,
                        const AddOptions& options) {
  if (before && before->dependencies > 0) {
    auto [begin, end] = keys.dependencies_of(type, id);
    txn.clear_range(begin, end);
  }
  // A finished job added anew had its dependents resolved when it ended.
  after.has_dependents = false;
  after.waiting_on = 0;
  after.dependencies = static_cast<uint32_t>(options.depends_on.size());
  after.on_dependency_failure =
      options.depends_on.empty() ? OnDependencyFailure::kCancel : options.on_dependency_failure;
  if (options.depends_on.empty()) return Status::OK();
  std::vector<std::string> rows;
  rows.reserve(options.depends_on.size());
  for (const DependencyRef& dep : options.depends_on) rows.push_back(keys.job(dep.type, dep.id));
  // Without snapshot: a dependency that ends meanwhile conflicts, and the retry sees its end.
  KVQ_ASSIGN_OR_RETURN(auto stored, txn.get_many(rows));
  std::optional<std::pair<const DependencyRef*, Outcome>> failed;
  for (size_t i = 0; i < rows.size(); ++i) {
    const DependencyRef& dep = options.depends_on[i];
    if (!stored[i]) return NotFound("dependency " + named(dep.type, dep.id) + " does not exist");
    KVQ_ASSIGN_OR_RETURN(JobRow row, decode_row(*stored[i]));
    Outcome resolved = Outcome::kNone;
    if (state_of(row) == State::kFinished) {
      resolved = row.outcome;
      if (is_failure(resolved) && options.on_dependency_failure == OnDependencyFailure::kCancel &&
          !failed) {
        failed = std::pair{&dep, resolved};
      }
    } else {
      if (!row.has_dependents) {
        // The one write of a row outside save_job: the flag changes no index, nor the job as
        // anyone sees it, so the row keeps its seq and updated.
        row.has_dependents = true;
        txn.set(rows[i], encode_row(row));
      }
      txn.set(keys.dependent(dep.type, dep.id, type, id), "");
      ++after.waiting_on;
    }
    txn.set(keys.dependency(type, id, dep.type, dep.id), encode_edge(resolved));
  }
  if (failed)
    cancel_for_dependency(after, failed->first->type, failed->first->id, failed->second, now_ms());
  return Status::OK();
}

Status resolve_dependents(kv::Transaction& txn, const Keys& keys, std::string_view type,
                          std::string_view id, Outcome outcome) {
  auto [begin, end] = keys.dependents_of(type, id);
  // Without snapshot: an add of a dependent meanwhile conflicts with this end.
  KVQ_ASSIGN_OR_RETURN(auto entries, txn.get_range(begin, end));
  const int64_t now = now_ms();
  for (const auto& entry : entries) {
    txn.clear(entry.key);
    KVQ_ASSIGN_OR_RETURN(auto dependent, keys.parse_edge_end(entry.key));
    const auto& [dep_type, dep_id] = dependent;
    const std::string edge = keys.dependency(dep_type, dep_id, type, id);
    KVQ_ASSIGN_OR_RETURN(auto value, txn.get(edge));
    if (!value) continue;  // the dependent was removed or added anew without this edge
    KVQ_ASSIGN_OR_RETURN(Outcome resolved, decode_edge(*value));
    if (resolved != Outcome::kNone) continue;
    txn.set(edge, encode_edge(outcome));
    KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, dep_type, dep_id));
    if (!before || state_of(*before) != State::kWaiting) continue;  // cancelled meanwhile
    JobRow after = *before;
    if (is_failure(outcome) && before->on_dependency_failure == OnDependencyFailure::kCancel) {
      cancel_for_dependency(after, type, id, outcome, now);
    } else if (--after.waiting_on == 0) {
      // Released: its scheduled time and priority apply from now.
      after.scheduled = std::max(after.scheduled, now);
    }
    KVQ_RETURN_IF_ERROR(save_job(txn, keys, dep_type, dep_id, before, std::move(after)));
  }
  return Status::OK();
}

// What a dependent's worker reads of its dependencies.
Result<std::vector<DependencyInfo>> Jobs::dependencies(std::string_view type, std::string_view id) {
  return in_own_transaction(&Jobs::dependencies, type, id);
}

Result<std::vector<DependencyInfo>> Jobs::dependencies(kv::Transaction& txn, std::string_view type,
                                                       std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  const Keys& keys = impl_->keys;
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
  if (!row)
    return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                    "' does not exist");
  std::vector<DependencyInfo> out;
  if (row->dependencies == 0) return out;
  auto [begin, end] = keys.dependencies_of(type, id);
  KVQ_ASSIGN_OR_RETURN(auto edges, txn.get_range(begin, end));
  std::vector<std::string> rows;
  for (const auto& edge : edges) {
    KVQ_ASSIGN_OR_RETURN(auto dep, keys.parse_edge_end(edge.key));
    KVQ_ASSIGN_OR_RETURN(Tuple value, Tuple::unpack(edge.value));
    if (value.size() != 1 || !value[0].is_int())
      return Internal("dependency edge of the wrong shape");
    DependencyInfo info;
    info.dependency = {std::move(dep.first), std::move(dep.second)};
    info.resolved = static_cast<Outcome>(value[0].as_int());
    rows.push_back(keys.job(info.dependency.type, info.dependency.id));
    out.push_back(std::move(info));
  }
  // One read for all (on etcd, one round trip).
  KVQ_ASSIGN_OR_RETURN(auto stored, txn.get_many(rows));
  for (size_t i = 0; i < out.size(); ++i) {
    if (!stored[i]) continue;
    KVQ_ASSIGN_OR_RETURN(JobRow dep, decode_row(*stored[i]));
    out[i].job = to_info(out[i].dependency.type, out[i].dependency.id, dep);
  }
  return out;
}

}  // namespace kvq::jobs
