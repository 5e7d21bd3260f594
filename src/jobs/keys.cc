// jobs/keys.cc — the key layout of schema.h: where each row and index entry of the jobs layer
// lives (Keys, OrderedIndex), and the parsing of index keys back into what they name. The rows'
// encodings are schema.cc's.
#include "jobs/schema.h"

namespace kvq::jobs {

Keys::Keys(std::string prefix) : root_(std::move(prefix)) {
  for (int64_t s = 1; s <= kLastSpace; ++s) spaces_[s] = root_.sub(Tuple{s});
  for (int64_t m = 1; m <= kLastMisc; ++m) misc_[m] = spaces_[kMisc].sub(Tuple{m});
}

namespace {

std::pair<std::string, std::string> between(const Subspace& s, const Tuple& lo, const Tuple& hi) {
  return {s.pack(lo), s.pack(hi)};
}

}  // namespace

std::string OrderedIndex::key(int64_t priority, int64_t time, std::string_view name) const {
  return space_.pack({priority, time, name});
}
std::pair<std::string, std::string> OrderedIndex::due(int64_t priority, int64_t max_time) const {
  auto lo = space_.range({priority}).first;
  // Every name sorts after (.., max_time) and before (.., max_time + 1).
  auto hi = max_time == std::numeric_limits<int64_t>::max() ? space_.range({priority}).second
                                                            : space_.pack({priority, max_time + 1});
  return {lo, hi};
}
std::string OrderedIndex::from_priority(int64_t priority) const { return space_.pack({priority}); }
Result<OrderedIndex::Entry> OrderedIndex::parse(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space_.unpack(key));
  if (t.size() != 3 || !t[0].is_int() || !t[1].is_int() || !t[2].is_string()) {
    return InvalidArgument("not a key of this index");
  }
  return Entry{t[0].as_int(), t[1].as_int(), t[2].as_string()};
}

std::string Keys::job(std::string_view type, std::string_view id) const {
  return space(kJobs).pack({type, id});
}
std::pair<std::string, std::string> Keys::jobs_of(std::string_view type) const {
  return space(kJobs).range({type});
}
std::string Keys::pending(std::string_view type, int64_t priority, int64_t scheduled,
                          std::string_view id) const {
  return pending_index(type).key(priority, scheduled, id);
}
std::pair<std::string, std::string> Keys::pending_of(std::string_view type) const {
  return pending_index(type).all();
}
std::pair<std::string, std::string> Keys::pending_due(std::string_view type, int64_t priority,
                                                      int64_t max_scheduled) const {
  return pending_index(type).due(priority, max_scheduled);
}
std::string Keys::pending_from_priority(std::string_view type, int64_t priority) const {
  return pending_index(type).from_priority(priority);
}
OrderedIndex Keys::pending_index(std::string_view type) const {
  return OrderedIndex(space(kPending).sub({type}));
}
OrderedIndex Keys::group_pending_index(std::string_view type, std::string_view group) const {
  return OrderedIndex(space(kGroupPending).sub({type, group}));
}
OrderedIndex Keys::group_queue(std::string_view type) const {
  return OrderedIndex(space(kGroupQueue).sub({type}));
}
std::pair<std::string, std::string> Keys::group_pending_of(std::string_view type) const {
  return space(kGroupPending).range({type});
}
std::string Keys::group(std::string_view type, std::string_view group) const {
  return space(kGroups).pack({type, group});
}
std::pair<std::string, std::string> Keys::groups_of(std::string_view type) const {
  return space(kGroups).range({type});
}
Result<std::string> Keys::parse_group_name(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kGroups).unpack(key));
  if (t.size() != 2 || !t[1].is_string()) return InvalidArgument("not a group key");
  return t[1].as_string();
}
std::string Keys::activity(std::string_view type, uint64_t seq, std::string_view id) const {
  return space(kActivity).pack({type, static_cast<int64_t>(seq), id});
}
std::pair<std::string, std::string> Keys::activity_before(std::string_view type,
                                                          uint64_t below) const {
  return between(space(kActivity), {type, int64_t{0}}, {type, static_cast<int64_t>(below)});
}
std::pair<std::string, std::string> Keys::activity_at(std::string_view type, uint64_t seq) const {
  return space(kActivity).range({type, static_cast<int64_t>(seq)});
}
std::string Keys::own_activity(std::string_view type, int64_t timeout_ms, uint64_t seq,
                               std::string_view id) const {
  return space(kOwnActivity).pack({type, timeout_ms, static_cast<int64_t>(seq), id});
}
std::pair<std::string, std::string> Keys::own_activity_before(std::string_view type,
                                                              int64_t timeout_ms,
                                                              uint64_t below) const {
  return between(space(kOwnActivity), {type, timeout_ms, int64_t{0}},
                 {type, timeout_ms, static_cast<int64_t>(below)});
}
std::pair<std::string, std::string> Keys::own_activity_at(std::string_view type, int64_t timeout_ms,
                                                          uint64_t seq) const {
  return space(kOwnActivity).range({type, timeout_ms, static_cast<int64_t>(seq)});
}
std::pair<std::string, std::string> Keys::own_activity_of(std::string_view type) const {
  return space(kOwnActivity).range({type});
}
std::string Keys::own_activity_from(std::string_view type, int64_t timeout_ms) const {
  return space(kOwnActivity).pack({type, timeout_ms});
}
Result<Keys::OwnActivityEntry> Keys::parse_own_activity(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kOwnActivity).unpack(key));
  if (t.size() != 4 || !t[1].is_int() || !t[2].is_int() || !t[3].is_string())
    return InvalidArgument("not an own-timeout activity key");
  return OwnActivityEntry{t[1].as_int(), static_cast<uint64_t>(t[2].as_int()), t[3].as_string()};
}
std::string Keys::global_id(std::string_view id) const { return misc(kGlobalIds).pack({id}); }
std::string Keys::job_numbers() const {
  return space(kMisc).pack({static_cast<int64_t>(kJobNumbers)});
}
std::string Keys::own_timeouts(std::string_view type) const {
  return misc(kOwnTimeouts).pack({type});
}
std::pair<std::string, std::string> Keys::all_own_timeouts() const {
  return misc(kOwnTimeouts).range();
}
Result<std::string> Keys::parse_own_timeouts_type(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, misc(kOwnTimeouts).unpack(key));
  if (t.size() != 1 || !t[0].is_string()) return InvalidArgument("not an own-timeouts key");
  return t[0].as_string();
}
std::string Keys::dependency(std::string_view type, std::string_view id, std::string_view dep_type,
                             std::string_view dep_id) const {
  return misc(kDependencies).pack({type, id, dep_type, dep_id});
}
std::pair<std::string, std::string> Keys::dependencies_of(std::string_view type,
                                                          std::string_view id) const {
  return misc(kDependencies).range({type, id});
}
std::string Keys::dependent(std::string_view dep_type, std::string_view dep_id,
                            std::string_view type, std::string_view id) const {
  return misc(kDependents).pack({dep_type, dep_id, type, id});
}
std::pair<std::string, std::string> Keys::dependents_of(std::string_view dep_type,
                                                        std::string_view dep_id) const {
  return misc(kDependents).range({dep_type, dep_id});
}
std::string Keys::waiting(std::string_view type, std::string_view id) const {
  return misc(kWaiting).pack({type, id});
}
std::pair<std::string, std::string> Keys::waiting_of(std::string_view type) const {
  return misc(kWaiting).range({type});
}
Result<std::pair<std::string, std::string>> Keys::parse_edge_end(std::string_view key) const {
  auto forward = misc(kDependencies).unpack(key);
  auto t = forward.ok() ? std::move(forward) : misc(kDependents).unpack(key);
  if (!t.ok() || t->size() != 4 || !(*t)[2].is_string() || !(*t)[3].is_string())
    return InvalidArgument("not a dependency key");
  return std::pair{(*t)[2].as_string(), (*t)[3].as_string()};
}
std::string Keys::batch(std::string_view batch) const { return misc(kBatches).pack({batch}); }
std::string Keys::batch_dead(std::string_view batch, std::string_view type,
                             std::string_view id) const {
  return misc(kBatchDead).pack({batch, type, id});
}
std::pair<std::string, std::string> Keys::batch_dead_of(std::string_view batch) const {
  return misc(kBatchDead).range({batch});
}
std::string Keys::batch_totals() const { return misc(kBatchTotals).pack(Tuple{}); }
Result<std::pair<std::string, std::string>> Keys::parse_batch_dead(std::string_view key) const {
  auto t = misc(kBatchDead).unpack(key);
  if (!t.ok() || t->size() != 3 || !(*t)[1].is_string() || !(*t)[2].is_string())
    return InvalidArgument("not a batch's dead-member key");
  return std::pair{(*t)[1].as_string(), (*t)[2].as_string()};
}
std::string Keys::timeout(std::string_view type) const { return space(kTimeouts).pack({type}); }
std::pair<std::string, std::string> Keys::timeouts() const { return space(kTimeouts).range(); }
std::string Keys::pending_token(std::string_view type) const {
  return space(kPendingToken).pack({type});
}
std::string Keys::activity_token(std::string_view type) const {
  return space(kActivityToken).pack({type});
}
std::string Keys::types_token() const { return space(kTypesToken).pack({int64_t{0}}); }
std::string Keys::held_by(std::string_view worker_type, std::string_view worker,
                          std::string_view type, std::string_view id) const {
  if (worker_type.empty()) return space(kHeldBy).pack({worker, type, id});
  return space(kHeldByTyped).pack({worker_type, worker, type, id});
}
std::pair<std::string, std::string> Keys::held_by(std::string_view worker_type,
                                                  std::string_view worker) const {
  if (worker_type.empty()) return space(kHeldBy).range({worker});
  return space(kHeldByTyped).range({worker_type, worker});
}

std::string Keys::finished(std::string_view type, int64_t finished_ms, std::string_view id) const {
  return space(kFinished).pack({type, finished_ms, id});
}
std::pair<std::string, std::string> Keys::finished_before(std::string_view type,
                                                          int64_t below) const {
  return {space(kFinished).range({type}).first, space(kFinished).pack({type, below})};
}

std::string Keys::ended(std::string_view type, Outcome outcome, std::string_view id) const {
  return space(kEnded).pack({type, static_cast<int64_t>(outcome), id});
}
std::pair<std::string, std::string> Keys::ended_with(std::string_view type, Outcome outcome) const {
  return space(kEnded).range({type, static_cast<int64_t>(outcome)});
}

std::string Keys::schedule(std::string_view name) const { return space(kSchedules).pack({name}); }
std::pair<std::string, std::string> Keys::schedules() const { return space(kSchedules).range(); }
std::string Keys::schedules_token() const { return space(kSchedulesToken).pack({int64_t{0}}); }
Result<std::string> Keys::parse_schedule_name(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kSchedules).unpack(key));
  if (t.size() != 1 || !t[0].is_string()) return InvalidArgument("not a schedule key");
  return t[0].as_string();
}
std::string Keys::rate_window(std::string_view type) const {
  return space(kRateWindows).pack({type});
}

Result<std::string> Keys::parse_ended_id(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kEnded).unpack(key));
  if (t.size() != 3 || !t[1].is_int() || !t[2].is_string())
    return InvalidArgument("not an outcome-index key");
  return t[2].as_string();
}

Result<Keys::PendingEntry> Keys::parse_pending(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kPending).unpack(key));
  if (t.size() != 4 || !t[1].is_int() || !t[2].is_int() || !t[3].is_string()) {
    return InvalidArgument("not a pending-index key");
  }
  return PendingEntry{t[1].as_int(), t[2].as_int(), t[3].as_string()};
}

Result<Keys::ActivityEntry> Keys::parse_activity(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kActivity).unpack(key));
  if (t.size() != 3 || !t[1].is_int() || !t[2].is_string())
    return InvalidArgument("not an activity key");
  return ActivityEntry{static_cast<uint64_t>(t[1].as_int()), t[2].as_string()};
}

Result<Keys::FinishedEntry> Keys::parse_finished(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kFinished).unpack(key));
  if (t.size() != 3 || !t[1].is_int() || !t[2].is_string())
    return InvalidArgument("not a finished-index key");
  return FinishedEntry{t[1].as_int(), t[2].as_string()};
}

Result<std::string> Keys::parse_timeout_type(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kTimeouts).unpack(key));
  if (t.size() != 1 || !t[0].is_string()) return InvalidArgument("not a timeout key");
  return t[0].as_string();
}

Result<std::pair<std::string, std::string>> Keys::parse_held(std::string_view key) const {
  // (worker, type, id) in subspace 8, (worker_type, worker, type, id) in 10.
  auto bare = space(kHeldBy).unpack(key);
  auto t = bare.ok() ? std::move(bare) : space(kHeldByTyped).unpack(key);
  const size_t fields = bare.ok() ? 3 : 4;
  if (!t.ok() || t->size() != fields || !(*t)[fields - 2].is_string() ||
      !(*t)[fields - 1].is_string()) {
    return InvalidArgument("not a worker-index key");
  }
  return std::pair{(*t)[fields - 2].as_string(), (*t)[fields - 1].as_string()};
}

Result<std::string> Keys::parse_job_id(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kJobs).unpack(key));
  if (t.size() != 2 || !t[1].is_string()) return InvalidArgument("not a job key");
  return t[1].as_string();
}

}  // namespace kvq::jobs
