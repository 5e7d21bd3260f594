// The schedule operations (put, get, list, remove, previews) and the one transaction that
// enqueues a schedule's due occurrences, which every process's scheduler runs (scheduler.h).
//
// Row (12, name) -> Tuple(format=1, type, cron, timezone, data, priority, catch_up, next_run_ms,
// last_run_ms, last_job_id, enqueued, skipped, last_error, created_at_ms, updated_at_ms
// [, paused]); catch_up as CatchUp's integer, next_run_ms 0 once the expression names no later
// time; paused (true) only on a paused schedule, so a row of one never paused is as before.
#include <algorithm>
#include <limits>
#include <utility>

#include "absl/time/time.h"
#include "jobs/cron.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"
#include "util/random.h"

namespace kvq::jobs {

std::string_view catch_up_name(CatchUp catch_up) {
  switch (catch_up) {
    case CatchUp::kNone: return "none";
    case CatchUp::kOne: return "one";
    case CatchUp::kAll: return "all";
  }
  return "one";
}

Result<CatchUp> parse_catch_up(std::string_view name) {
  if (name == "none") return CatchUp::kNone;
  if (name == "one") return CatchUp::kOne;
  if (name == "all") return CatchUp::kAll;
  return InvalidArgument("unknown catch_up '" + std::string(name) + "' (none, one or all)");
}

namespace {

constexpr int64_t kScheduleFormat = 1;
constexpr size_t kScheduleFieldsBeforePaused = 15;
constexpr size_t kScheduleFields = 16;
// kAll enqueues at most this many occurrences per transaction, the rest in the next ones.
constexpr size_t kMaxEnqueuedPerTransaction = 100;
// Occurrences left out are counted at most this many per transaction, so that a per-second
// schedule back from a long downtime never makes one huge transaction.
constexpr size_t kMaxCountedPerTransaction = 10'000;
// kNone's grace: an occurrence found at most this late (and before the next one) is on time.
constexpr int64_t kMaxGraceMs = 60'000;
constexpr size_t kMaxNextRuns = 1000;

std::string encode_schedule(const ScheduleInfo& s) {
  Tuple t{kScheduleFormat,
          s.spec.type,
          s.spec.cron,
          s.spec.timezone,
          s.spec.data,
          s.spec.priority,
          static_cast<int64_t>(s.spec.catch_up),
          s.next_run_ms,
          s.last_run_ms,
          s.last_job_id,
          static_cast<int64_t>(s.enqueued),
          static_cast<int64_t>(s.skipped),
          s.last_error,
          s.created_at_ms,
          s.updated_at_ms};
  if (s.paused) t.append(true);
  return t.pack();
}

Result<ScheduleInfo> decode_schedule(std::string_view name, std::string_view bytes) {
  auto t = Tuple::unpack(bytes);
  if (!t.ok() || (t->size() != kScheduleFields && t->size() != kScheduleFieldsBeforePaused) ||
      !(*t)[0].is_int() || (*t)[0].as_int() != kScheduleFormat ||
      (t->size() == kScheduleFields && !((*t)[15].is_bool() && (*t)[15].as_bool()))) {
    return Internal("corrupt schedule row '" + std::string(name) + "'");
  }
  const auto& e = t->elements();
  for (size_t i : {1, 2, 3, 4, 9, 12}) {
    if (!e[i].is_string()) return Internal("corrupt schedule row '" + std::string(name) + "'");
  }
  for (size_t i : {5, 6, 7, 8, 10, 11, 13, 14}) {
    if (!e[i].is_int()) return Internal("corrupt schedule row '" + std::string(name) + "'");
  }
  const int64_t catch_up = e[6].as_int();
  if (catch_up < 0 || catch_up > static_cast<int64_t>(CatchUp::kAll))
    return Internal("corrupt schedule row '" + std::string(name) + "'");
  ScheduleInfo s;
  s.name = std::string(name);
  s.spec.type = e[1].as_string();
  s.spec.cron = e[2].as_string();
  s.spec.timezone = e[3].as_string();
  s.spec.data = e[4].as_string();
  s.spec.priority = e[5].as_int();
  s.spec.catch_up = static_cast<CatchUp>(catch_up);
  s.next_run_ms = e[7].as_int();
  s.last_run_ms = e[8].as_int();
  s.last_job_id = e[9].as_string();
  s.enqueued = static_cast<uint64_t>(e[10].as_int());
  s.skipped = static_cast<uint64_t>(e[11].as_int());
  s.last_error = e[12].as_string();
  s.created_at_ms = e[13].as_int();
  s.updated_at_ms = e[14].as_int();
  s.paused = e.size() == kScheduleFields;
  return s;
}

// The checks put_schedule and next_runs share: the spec with its data normalized, and its
// expression parsed.
Result<std::pair<ScheduleSpec, CronSchedule>> validate_spec(const ScheduleSpec& spec,
                                                            size_t max_data_bytes) {
  KVQ_RETURN_IF_ERROR(validate_type(spec.type));
  KVQ_ASSIGN_OR_RETURN(CronSchedule cron, CronSchedule::parse(spec.cron, spec.timezone));
  ScheduleSpec normalized = spec;
  KVQ_ASSIGN_OR_RETURN(normalized.data, normalize_data(spec.data, max_data_bytes));
  if (spec.catch_up != CatchUp::kNone && spec.catch_up != CatchUp::kOne &&
      spec.catch_up != CatchUp::kAll) {
    return InvalidArgument("unknown catch_up");
  }
  return std::pair{std::move(normalized), std::move(cron)};
}

// The first occurrence strictly after `after_ms`; 0 when there is none.
int64_t occurrence_after(const CronSchedule& cron, int64_t after_ms) {
  return cron.next_after(after_ms).value_or(0);
}

void write_schedule(kv::Transaction& txn, const Keys& keys, const ScheduleInfo& info) {
  txn.set(keys.schedule(info.name), encode_schedule(info));
}

// A schedule's occurrences from `first` that are due by `now`, as far as one transaction goes
// (at most kMaxCountedPerTransaction of them), and the occurrence after those: past now when
// they are all the due ones.
struct DueOccurrences {
  std::vector<int64_t> times;  // ascending; all <= now
  int64_t after = 0;           // the next occurrence after times.back(); 0 if none
};

DueOccurrences due_occurrences(const CronSchedule& cron, int64_t first, int64_t now) {
  DueOccurrences due;
  int64_t t = first;
  while (t != 0 && t <= now && due.times.size() < kMaxCountedPerTransaction) {
    due.times.push_back(t);
    t = occurrence_after(cron, t);
  }
  due.after = t;
  return due;
}

// Whether an error from an occurrence's add is the schedule's own problem (its type was
// deleted, its data is over a lowered limit), recorded on it, rather than the store's, retried.
bool is_schedule_error(const Status& status) { return !status.ok() && !status.retryable(); }

// What one scheduler transaction did for one schedule.
struct ScheduleTick {
  size_t enqueued = 0;
  bool more = false;  // occurrences due by `now` remain for another transaction
};

// One transaction of the scheduler for schedule `name` at wall time `now`, as the header of
// put_schedule promises: the row is read without snapshot, so two processes ticking the same
// schedule conflict and the retry finds next_run_ms advanced, past now, and does nothing.
Result<ScheduleTick> tick_schedule(Jobs& jobs, kv::Transaction& txn, const Keys& keys,
                                   const std::string& name, int64_t now) {
  ScheduleTick tick;
  KVQ_ASSIGN_OR_RETURN(auto stored, txn.get(keys.schedule(name)));
  if (!stored) return tick;
  KVQ_ASSIGN_OR_RETURN(ScheduleInfo row, decode_schedule(name, *stored));
  if (row.paused || row.next_run_ms == 0 || row.next_run_ms > now) return tick;
  auto cron = CronSchedule::parse(row.spec.cron, row.spec.timezone);
  if (!cron.ok()) {
    // The expression was valid when put; the tz database may have changed since. Look again in
    // a minute rather than never.
    row.last_error = cron.status().message();
    row.next_run_ms = now + kMaxGraceMs;
    write_schedule(txn, keys, row);
    return tick;
  }
  const DueOccurrences due = due_occurrences(*cron, row.next_run_ms, now);
  const bool complete = due.after == 0 || due.after > now;
  std::vector<int64_t> to_enqueue;
  size_t left_out = 0;
  int64_t next_run = due.after;
  if (row.spec.catch_up == CatchUp::kAll) {
    const size_t n = std::min(due.times.size(), kMaxEnqueuedPerTransaction);
    to_enqueue.assign(due.times.begin(), due.times.begin() + static_cast<ptrdiff_t>(n));
    if (n < due.times.size()) next_run = due.times[n];
    tick.more = n < due.times.size() || !complete;
  } else if (!complete) {
    // Not the latest due: all of these are left out, and the count goes on next transaction.
    left_out = due.times.size();
    tick.more = true;
  } else {
    const int64_t latest = due.times.back();
    left_out = due.times.size() - 1;
    const int64_t gap = due.after == 0 ? kMaxGraceMs : due.after - latest;
    const bool on_time = now - latest <= std::min(kMaxGraceMs, gap);
    if (row.spec.catch_up == CatchUp::kOne || on_time) {
      to_enqueue.push_back(latest);
    } else {
      ++left_out;
    }
  }
  row.skipped += left_out;
  for (int64_t occurrence : to_enqueue) {
    // A replaced schedule never goes back to what its earlier form enqueued (put_schedule).
    if (occurrence <= row.last_run_ms) continue;
    const std::string id = Jobs::occurrence_job_id(name, occurrence);
    Result<AddResult> added = jobs.add(txn, row.spec.type, id, row.spec.data,
                                       {.scheduled_time_ms = occurrence,
                                        .priority = row.spec.priority,
                                        .if_exists = IfExists::kKeep});
    if (!added.ok() && !is_schedule_error(added.status())) return added.status();
    if (!added.ok()) {
      row.last_error = "occurrence " + id + ": " + added.status().to_string();
      ++row.skipped;
      continue;
    }
    row.last_error.clear();
    row.last_run_ms = occurrence;
    row.last_job_id = id;
    if (added->added) {
      ++row.enqueued;
      ++tick.enqueued;
    }
  }
  row.next_run_ms = next_run;
  write_schedule(txn, keys, row);
  return tick;
}

}  // namespace

Result<ScheduleInfo> Jobs::put_schedule(std::string_view name, const ScheduleSpec& spec) {
  KVQ_RETURN_IF_ERROR(validate_schedule_name(name));
  KVQ_ASSIGN_OR_RETURN(auto checked, validate_spec(spec, options_.max_data_bytes));
  // Named references, not a structured binding: clang 14 cannot capture those in a lambda.
  const ScheduleSpec& normalized = checked.first;
  const CronSchedule& cron = checked.second;
  const Keys& keys = impl_->keys;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<ScheduleInfo> {
        KVQ_ASSIGN_OR_RETURN(auto stored,
                             txn.get_many({keys.timeout(normalized.type), keys.schedule(name)}));
        if (!stored[0]) {
          return NotFound("type '" + normalized.type +
                          "' does not exist; set its timeout before scheduling its jobs");
        }
        const int64_t now = now_ms();
        ScheduleInfo info;
        if (stored[1]) {
          KVQ_ASSIGN_OR_RETURN(info, decode_schedule(name, *stored[1]));
        } else {
          info.name = std::string(name);
          info.created_at_ms = now;
        }
        info.spec = normalized;
        info.updated_at_ms = now;
        info.next_run_ms = occurrence_after(cron, std::max(now, info.last_run_ms));
        write_schedule(txn, keys, info);
        txn.set(keys.schedules_token(), util::random_hex(8));
        return info;
      },
      options_.retry);
}

Result<ScheduleInfo> Jobs::get_schedule(std::string_view name) {
  KVQ_RETURN_IF_ERROR(validate_schedule_name(name));
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<ScheduleInfo> {
        KVQ_ASSIGN_OR_RETURN(auto stored, txn.get(impl_->keys.schedule(name), {.snapshot = true}));
        if (!stored) return NotFound("no schedule '" + std::string(name) + "'");
        return decode_schedule(name, *stored);
      },
      options_.retry);
}

Result<std::vector<ScheduleInfo>> read_schedules(kv::Transaction& txn, const Keys& keys) {
  auto [begin, end] = keys.schedules();
  KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end, {.snapshot = true}));
  std::vector<ScheduleInfo> out;
  out.reserve(rows.size());
  for (const auto& kv : rows) {
    KVQ_ASSIGN_OR_RETURN(std::string name, keys.parse_schedule_name(kv.key));
    KVQ_ASSIGN_OR_RETURN(ScheduleInfo info, decode_schedule(name, kv.value));
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::vector<ScheduleInfo>> Jobs::schedules() {
  return kv::run(
      *store_, [&](kv::Transaction& txn) { return read_schedules(txn, impl_->keys); },
      options_.retry);
}

Status Jobs::remove_schedule(std::string_view name) {
  KVQ_RETURN_IF_ERROR(validate_schedule_name(name));
  // An attempt that got as far as removing it may have committed with its result unknown: then
  // the retry finds it gone, and that is this call's doing.
  bool removing = false;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Status {
        const std::string key = impl_->keys.schedule(name);
        KVQ_ASSIGN_OR_RETURN(auto stored, txn.get(key));
        if (!stored && removing) return Status::OK();
        if (!stored) return NotFound("no schedule '" + std::string(name) + "'");
        removing = true;
        txn.clear(key);
        txn.set(impl_->keys.schedules_token(), util::random_hex(8));
        return Status::OK();
      },
      options_.retry);
}

namespace {

// pause_schedule (`paused` true) or resume_schedule: one transaction, which wakes every
// scheduler (the token) so that none sleeps on a paused schedule's time or past a resumed one's.
// A resumed schedule's next run is its first occurrence after now (and after its last run), as
// a put's is: what came due while it was paused is not enqueued.
Result<ScheduleInfo> set_schedule_paused(kv::Store& store, const kv::RetryOptions& retry,
                                         const Keys& keys, std::string_view name, bool paused) {
  KVQ_RETURN_IF_ERROR(validate_schedule_name(name));
  return kv::run(
      store,
      [&](kv::Transaction& txn) -> Result<ScheduleInfo> {
        KVQ_ASSIGN_OR_RETURN(auto stored, txn.get(keys.schedule(name)));
        if (!stored) return NotFound("no schedule '" + std::string(name) + "'");
        KVQ_ASSIGN_OR_RETURN(ScheduleInfo info, decode_schedule(name, *stored));
        if (info.paused == paused) return info;
        const int64_t now = now_ms();
        if (!paused) {
          KVQ_ASSIGN_OR_RETURN(CronSchedule cron,
                               CronSchedule::parse(info.spec.cron, info.spec.timezone));
          info.next_run_ms = occurrence_after(cron, std::max(now, info.last_run_ms));
        }
        info.paused = paused;
        info.updated_at_ms = now;
        write_schedule(txn, keys, info);
        txn.set(keys.schedules_token(), util::random_hex(8));
        return info;
      },
      retry);
}

}  // namespace

Result<ScheduleInfo> Jobs::pause_schedule(std::string_view name) {
  return set_schedule_paused(*store_, options_.retry, impl_->keys, name, true);
}

Result<ScheduleInfo> Jobs::resume_schedule(std::string_view name) {
  return set_schedule_paused(*store_, options_.retry, impl_->keys, name, false);
}

Result<std::vector<int64_t>> Jobs::next_runs(const ScheduleSpec& spec, int64_t after_ms,
                                             size_t count) {
  if (count == 0 || count > kMaxNextRuns)
    return InvalidArgument("next_runs takes a count of 1.." + std::to_string(kMaxNextRuns));
  KVQ_ASSIGN_OR_RETURN(auto checked, validate_spec(spec, kMaxDataBytesLimit));
  const CronSchedule& cron = checked.second;
  std::vector<int64_t> out;
  int64_t t = after_ms;
  while (out.size() < count) {
    t = occurrence_after(cron, t);
    if (t == 0) break;
    out.push_back(t);
  }
  return out;
}

std::string Jobs::occurrence_job_id(std::string_view name, int64_t occurrence_ms) {
  return std::string(name) + "@" +
         absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(occurrence_ms),
                          absl::UTCTimeZone());
}

Result<size_t> Jobs::run_due_schedules() {
  KVQ_ASSIGN_OR_RETURN(std::vector<ScheduleInfo> all, schedules());
  const int64_t now = now_ms();
  size_t enqueued = 0;
  // A schedule that cannot be ticked (the store failing it) holds up none of the others.
  Status first_error;
  for (const ScheduleInfo& info : all) {
    if (info.paused || info.next_run_ms == 0 || info.next_run_ms > now) continue;
    for (bool more = true; more;) {
      Result<ScheduleTick> tick = kv::run(
          *store_,
          [&](kv::Transaction& txn) {
            return tick_schedule(*this, txn, impl_->keys, info.name, now);
          },
          options_.retry);
      if (!tick.ok()) {
        if (first_error.ok()) first_error = tick.status().with_context("schedule " + info.name);
        break;
      }
      enqueued += tick->enqueued;
      more = tick->more;
    }
  }
  if (!first_error.ok()) return first_error;
  return enqueued;
}

}  // namespace kvq::jobs
