// The steps every look that takes a pending job shares (takes.h).
#include "jobs/accept/takes.h"

#include <algorithm>
#include <limits>

#include "jobs/group_queue.h"
#include "jobs/job_store.h"

namespace kvq::jobs {

Result<Job> take_job(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                     const std::string& id, int64_t priority, int64_t scheduled,
                     std::string_view group, const Taker& taker, const FlowGate& gate, bool guess) {
  const Keys& keys = scope.keys;
  KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, id, {.remembered = guess}));
  if (!before || state_of(*before) != State::kPending || before->priority != priority ||
      before->scheduled != scheduled || before->group != group) {
    // A remembered row older than the index entry (the job changed in another process): the
    // attempt is retried, reading it (a retry guesses nothing).
    if (guess) return Aborted("the remembered row of job '" + id + "' is out of date");
    return Internal("pending index entry for job '" + id + "' does not match its row");
  }
  JobRow after = *before;
  after.lock = taker.lock;
  after.worker = taker.worker;
  after.worker_type = taker.worker_type;
  after.attempts += 1;
  // A rate-limited type's accepts are stamped as its window records them.
  after.started = gate.stamp_ms.value_or(now_ms());
  scope.local.latencies.note(taker.lock, Millis(after.started - before->scheduled));
  after.progress.reset();  // progress is of one run
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, id, before, after));
  return job_of_run(type, id, after, gate.type_timeout);
}

Result<std::optional<Job>> take_turn(kv::Transaction& txn, const AcceptScope& scope,
                                     std::string_view type, const OrderedIndex::Entry& turn,
                                     const Taker& taker, const FlowGate& gate) {
  const Keys& keys = scope.keys;
  const std::string& group = turn.name;
  KVQ_ASSIGN_OR_RETURN(auto row, load_group(txn, keys, type, group));
  if (!row || row->queued != std::pair{turn.priority, turn.time})
    return Internal("queue entry of group '" + group + "' does not match its row");
  const auto& limit = gate.max_running_per_group;
  if (limit && row->running >= *limit) {
    KVQ_RETURN_IF_ERROR(mark_group_full(txn, keys, type, group, *row));
    return std::optional<Job>();
  }
  KVQ_ASSIGN_OR_RETURN(auto first, first_pending(txn, keys, type, group));
  if (!first || first->priority != turn.priority)
    return Internal("queue entry of group '" + group + "' does not match its first job");
  KVQ_ASSIGN_OR_RETURN(Job job, take_job(txn, scope, type, first->name, first->priority,
                                         first->time, group, taker, gate));
  if (limit && row->running + 1 >= *limit) {
    KVQ_ASSIGN_OR_RETURN(auto taken, load_group(txn, keys, type, group));  // as save_job left it
    if (!taken) return Internal("group '" + group + "' lost its row to an accept");
    KVQ_RETURN_IF_ERROR(mark_group_full(txn, keys, type, group, *taken));
  }
  return std::optional<Job>(std::move(job));
}

bool turn_first(const OrderedIndex::Entry& turn, const OrderedIndex::Entry& job) {
  return turn.priority < job.priority ||
         (turn.priority == job.priority && turn.time < ms_to_us(job.time));
}

int64_t end_of_ms(int64_t ms) {
  const int64_t us = ms_to_us(ms);
  return us > std::numeric_limits<int64_t>::max() - 999 ? us : us + 999;
}

DueLevels ungrouped_levels(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                           const AcceptOptions& accept, size_t takers, int64_t max_time) {
  const size_t spread = std::max(scope.options.accept_spread, takers);
  return DueLevels(txn, scope.keys.pending_index(type), max_time, accept.max_priority, spread,
                   2 * kMaxPriorityLevels, kPendingHeadWindow, &scope.local.heads);
}

}  // namespace kvq::jobs
