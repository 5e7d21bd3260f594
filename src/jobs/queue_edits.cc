// reschedule, make_due and peek: a producer's look at, and say over, where pending jobs stand in
// their type's queue (beanstalkd's `kick` of delayed jobs and its `peek-*` commands).
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "jobs/accept/accept.h"
#include "jobs/group_queue.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/types.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

constexpr size_t kMaxMakeDue = 1000;
// Priority levels a peek at the due jobs reads at most (as an accept does).
constexpr int kMaxPeekReads = 128;

Status not_found(std::string_view type, std::string_view id) {
  return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                  "' does not exist");
}

// The type's settings, or kNotFound naming it (a snapshot read).
Result<TypeSettings> settings_of(kv::Transaction& txn, const Keys& keys, std::string_view type) {
  KVQ_ASSIGN_OR_RETURN(auto value, txn.get(keys.timeout(type), {.snapshot = true}));
  if (!value)
    return NotFound("type '" + std::string(type) + "' does not exist (it has no timeout)");
  return decode_type(*value);
}

// Every pending index of the type: that of its jobs without a group, and each group's.
Result<std::vector<OrderedIndex>> pending_indexes(kv::Transaction& txn, const Keys& keys,
                                                  std::string_view type,
                                                  const TypeSettings& settings) {
  std::vector<OrderedIndex> indexes{keys.pending_index(type)};
  if (!settings.has_groups) return indexes;
  KVQ_RETURN_IF_ERROR(
      for_each_group(txn, keys, type, [&](const std::string& group, const GroupRow&) {
        indexes.push_back(keys.group_pending_index(type, group));
        return Result<bool>(true);
      }));
  return indexes;
}

// Up to `limit` pending jobs not yet due at `now`, those due soonest first (then by priority,
// then id), from snapshot reads of every pending index: up to `limit` per priority level.
Result<std::vector<OrderedIndex::Entry>> soonest_not_due(kv::Transaction& txn, const Keys& keys,
                                                         std::string_view type,
                                                         const TypeSettings& settings, int64_t now,
                                                         size_t limit) {
  std::vector<OrderedIndex::Entry> found;
  KVQ_ASSIGN_OR_RETURN(auto indexes, pending_indexes(txn, keys, type, settings));
  for (const OrderedIndex& index : indexes) {
    KVQ_RETURN_IF_ERROR(for_each_priority(txn, index, [&](int64_t priority) -> Result<bool> {
      const std::string begin = index.due(priority, now).second;
      const std::string end = index.due(priority, std::numeric_limits<int64_t>::max()).second;
      KVQ_ASSIGN_OR_RETURN(auto entries,
                           txn.get_range(begin, end, {.limit = limit, .snapshot = true}));
      for (const auto& kv : entries) {
        KVQ_ASSIGN_OR_RETURN(auto entry, index.parse(kv.key));
        found.push_back(std::move(entry));
      }
      return true;
    }));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.time, a.priority, a.name) < std::tie(b.time, b.priority, b.name);
  });
  if (found.size() > limit) found.resize(limit);
  return found;
}

// The due job an accept would take next at `now`, ignoring flow control and spread: the first
// due job without a group, or the first job of the group first in turn, whichever comes first
// (as try_accept_many chooses).
Result<std::optional<std::string>> next_due(kv::Transaction& txn, const Keys& keys,
                                            std::string_view type, const TypeSettings& settings,
                                            int64_t now) {
  DueLevels ungrouped(txn, keys.pending_index(type), now, std::nullopt, 1, kMaxPeekReads,
                      kPendingHeadWindow, /*heads=*/nullptr);  // seldom: reads to the end
  KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry* job, ungrouped.head());
  const OrderedIndex::Entry* turn = nullptr;
  std::optional<DueLevels> groups;
  if (settings.has_groups) {
    const int64_t end_of_now = ms_to_us(now) + 999;
    groups.emplace(txn, keys.group_queue(type), end_of_now, std::nullopt, 1, kMaxPeekReads,
                   ms_to_us(kPendingHeadWindow), /*heads=*/nullptr);
    KVQ_ASSIGN_OR_RETURN(turn, groups->head());
  }
  const bool turn_first =
      turn && (!job || turn->priority < job->priority ||
               (turn->priority == job->priority && turn->time < ms_to_us(job->time)));
  if (!turn_first) {
    if (!job) return std::optional<std::string>();
    return std::optional<std::string>(job->name);
  }
  KVQ_ASSIGN_OR_RETURN(auto first, first_pending(txn, keys, type, turn->name));
  if (!first) return Internal("queue entry of group '" + turn->name + "' has no pending job");
  return std::optional<std::string>(first->name);
}

// The first job of `type` that ended dead, as rerun_all takes them.
Result<std::optional<std::string>> first_dead(kv::Transaction& txn, const Keys& keys,
                                              std::string_view type) {
  auto [begin, end] = keys.ended_with(type, Outcome::kDead);
  KVQ_ASSIGN_OR_RETURN(auto entries, txn.get_range(begin, end, {.limit = 1, .snapshot = true}));
  if (entries.empty()) return std::optional<std::string>();
  KVQ_ASSIGN_OR_RETURN(auto id, keys.parse_ended_id(entries.front().key));
  return std::optional<std::string>(std::move(id));
}

}  // namespace

Status Jobs::reschedule(std::string_view type, std::string_view id,
                        const RescheduleOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  return edit_job_once(
      *store_, impl_->keys, type, id, options_.retry,
      [&](const JobRow& before) -> Result<std::optional<JobRow>> {
        const State state = state_of(before);
        if (state != State::kPending) {
          return WrongState("job '" + std::string(id) + "' of type '" + std::string(type) +
                            "' is " + std::string(state_name(state)) +
                            "; only a pending job can be rescheduled");
        }
        JobRow after = before;
        after.scheduled = options.scheduled_time_ms.value_or(before.scheduled);
        after.priority = options.priority.value_or(before.priority);
        if (after.scheduled == before.scheduled && after.priority == before.priority)
          return std::optional<JobRow>();
        return std::optional<JobRow>(std::move(after));
      });
}

Result<uint64_t> Jobs::make_due(std::string_view type, size_t limit) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (limit == 0 || limit > kMaxMakeDue)
    return InvalidArgument("make_due's limit must be in 1.." + std::to_string(kMaxMakeDue));
  const auto& keys = impl_->keys;
  // What the latest try that wrote did: a retry that finds one of its jobs still stamped with
  // its read version knows that try committed (its result was unknown), and answers for it.
  std::vector<std::string> tried;
  uint64_t tried_version = 0;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<uint64_t> {
        for (const std::string& id : tried) {
          KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
          if (row && row->add_seq == tried_version) return tried.size();
        }
        tried.clear();
        KVQ_ASSIGN_OR_RETURN(TypeSettings settings, settings_of(txn, keys, type));
        const int64_t now = now_ms();
        KVQ_ASSIGN_OR_RETURN(auto entries, soonest_not_due(txn, keys, type, settings, now, limit));
        KVQ_ASSIGN_OR_RETURN(tried_version, txn.read_version());
        std::vector<std::string> rows;
        for (const auto& entry : entries) rows.push_back(keys.job(type, entry.name));
        // The index was read with snapshot; the rows without (in one read: on etcd, one round
        // trip), so a job changed meanwhile conflicts.
        KVQ_ASSIGN_OR_RETURN(auto stored, txn.get_many(rows));
        for (size_t i = 0; i < entries.size(); ++i) {
          const auto& entry = entries[i];
          if (!stored[i]) continue;
          KVQ_ASSIGN_OR_RETURN(JobRow before, decode_row(*stored[i]));
          if (state_of(before) != State::kPending || before.scheduled != entry.time) continue;
          JobRow after = before;
          after.scheduled = now;
          after.add_seq = tried_version;
          ++after.kicks;
          KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, entry.name, before, std::move(after)));
          tried.push_back(entry.name);
        }
        return tried.size();
      },
      options_.retry);
}

Result<JobInfo> Jobs::peek(std::string_view type, Peek which) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  const auto& keys = impl_->keys;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<JobInfo> {
        KVQ_ASSIGN_OR_RETURN(TypeSettings settings, settings_of(txn, keys, type));
        const int64_t now = now_ms();
        std::optional<std::string> id;
        std::string_view what;
        switch (which) {
          case Peek::kDue: {
            what = "due";
            KVQ_ASSIGN_OR_RETURN(id, next_due(txn, keys, type, settings, now));
            break;
          }
          case Peek::kScheduled: {
            what = "scheduled";
            KVQ_ASSIGN_OR_RETURN(auto soonest, soonest_not_due(txn, keys, type, settings, now, 1));
            if (!soonest.empty()) id = soonest.front().name;
            break;
          }
          case Peek::kDead: {
            what = "dead";
            KVQ_ASSIGN_OR_RETURN(id, first_dead(txn, keys, type));
            break;
          }
        }
        if (!id)
          return NotFound("type '" + std::string(type) + "' has no " + std::string(what) + " job");
        KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, *id));
        if (!row) return not_found(type, *id);
        return to_info(type, *id, *row);
      },
      options_.retry);
}

}  // namespace kvq::jobs
