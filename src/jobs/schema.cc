#include "jobs/schema.h"

#include <limits>

namespace kvq::jobs {
namespace {

constexpr int64_t kRowFormat = 1;
constexpr size_t kRowFieldsBeforeLostRuns = 16;
constexpr size_t kRowFieldsBeforeWorkerType = 18;
constexpr size_t kRowFields = 19;

std::pair<std::string, std::string> between(const Subspace& s, const Tuple& lo, const Tuple& hi) {
  return {s.pack(lo), s.pack(hi)};
}

}  // namespace

State state_of(const JobRow& row) {
  if (!row.lock.empty()) return State::kRunning;
  return row.finished ? State::kFinished : State::kPending;
}

std::string encode_row(const JobRow& r) {
  Tuple t{kRowFormat,       static_cast<int64_t>(r.seq),
          r.lock,           r.worker,
          r.finished,       r.resubmit,
          r.scheduled,      r.priority,
          r.next_scheduled, r.next_priority,
          r.finished_lock,  static_cast<int64_t>(r.attempts),
          r.created,        r.updated,
          r.data,           static_cast<int64_t>(r.add_seq)};
  // Only a job that has lost a run carries the two fields, so every other row is as short, and
  // encodes byte for byte, as before they existed.
  // Likewise a worker_type, only on a job accepted by a typed worker.
  if (r.lost_runs != 0 || r.gave_up || !r.worker_type.empty()) {
    t.append(static_cast<int64_t>(r.lost_runs));
    t.append(r.gave_up);
  }
  if (!r.worker_type.empty()) t.append(r.worker_type);
  return t.pack();
}

Result<JobRow> decode_row(std::string_view bytes) {
  KVQ_ASSIGN_OR_RETURN(Tuple t, Tuple::unpack(bytes));
  const bool known_size = t.size() == kRowFields || t.size() == kRowFieldsBeforeWorkerType ||
                          t.size() == kRowFieldsBeforeLostRuns;
  if (!known_size || !t[0].is_int() || t[0].as_int() != kRowFormat) {
    return Internal("job row has an unknown format");
  }
  const bool shaped =
      t[1].is_int() && t[2].is_string() && t[3].is_string() && t[4].is_bool() && t[5].is_bool() &&
      t[6].is_int() && t[7].is_int() && t[8].is_int() && t[9].is_int() && t[10].is_string() &&
      t[11].is_int() && t[12].is_int() && t[13].is_int() && t[14].is_string() && t[15].is_int() &&
      (t.size() == kRowFieldsBeforeLostRuns || (t[16].is_int() && t[17].is_bool())) &&
      (t.size() != kRowFields || t[18].is_string());
  if (!shaped) return Internal("job row has fields of the wrong kind");
  JobRow r;
  r.seq = static_cast<uint64_t>(t[1].as_int());
  r.lock = t[2].as_string();
  r.worker = t[3].as_string();
  r.finished = t[4].as_bool();
  r.resubmit = t[5].as_bool();
  r.scheduled = t[6].as_int();
  r.priority = t[7].as_int();
  r.next_scheduled = t[8].as_int();
  r.next_priority = t[9].as_int();
  r.finished_lock = t[10].as_string();
  r.attempts = static_cast<uint32_t>(t[11].as_int());
  r.created = t[12].as_int();
  r.updated = t[13].as_int();
  r.data = t[14].as_string();
  r.add_seq = static_cast<uint64_t>(t[15].as_int());
  if (t.size() >= kRowFieldsBeforeWorkerType) {
    r.lost_runs = static_cast<uint32_t>(t[16].as_int());
    r.gave_up = t[17].as_bool();
  }
  if (t.size() == kRowFields) r.worker_type = t[18].as_string();
  return r;
}

std::string encode_type(const TypeSettings& settings) {
  Tuple t{static_cast<int64_t>(settings.timeout.count())};
  if (settings.finished_retention || settings.max_lost_runs) {
    if (settings.finished_retention) {
      t.append(static_cast<int64_t>(settings.finished_retention->count()));
    } else {
      t.append(nullptr);
    }
  }
  if (settings.max_lost_runs) t.append(static_cast<int64_t>(*settings.max_lost_runs));
  return t.pack();
}

Result<TypeSettings> decode_type(std::string_view bytes) {
  auto t = Tuple::unpack(bytes);
  if (!t.ok() || t->empty() || t->size() > 3) return Internal("corrupt type settings");
  const auto& e = t->elements();
  const bool shaped = e[0].is_int() && (e.size() < 2 || e[1].is_int() || e[1].is_null()) &&
                      (e.size() < 3 || (e[2].is_int() && e[2].as_int() > 0));
  if (!shaped) return Internal("corrupt type settings");
  TypeSettings settings;
  settings.timeout = Millis(e[0].as_int());
  if (e.size() >= 2 && e[1].is_int()) settings.finished_retention = Millis(e[1].as_int());
  if (e.size() == 3) settings.max_lost_runs = static_cast<uint32_t>(e[2].as_int());
  return settings;
}

std::string Keys::job(std::string_view type, std::string_view id) const {
  return space(kJobs).pack({type, id});
}
std::pair<std::string, std::string> Keys::jobs_of(std::string_view type) const {
  return space(kJobs).range({type});
}
std::string Keys::pending(std::string_view type, int64_t priority, int64_t scheduled,
                          std::string_view id) const {
  return space(kPending).pack({type, priority, scheduled, id});
}
std::pair<std::string, std::string> Keys::pending_of(std::string_view type) const {
  return space(kPending).range({type});
}
std::pair<std::string, std::string> Keys::pending_due(std::string_view type, int64_t priority,
                                                      int64_t max_scheduled) const {
  auto lo = space(kPending).range({type, priority}).first;
  // Every id sorts after (.., max_scheduled) and before (.., max_scheduled + 1).
  auto hi = max_scheduled == std::numeric_limits<int64_t>::max()
                ? space(kPending).range({type, priority}).second
                : space(kPending).pack({type, priority, max_scheduled + 1});
  return {lo, hi};
}
std::string Keys::pending_from_priority(std::string_view type, int64_t priority) const {
  return space(kPending).pack({type, priority});
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
