// jobs/schema.cc — the encodings of the rows of schema.h (job, type, group); where they live is
// keys.cc.
#include "jobs/schema.h"

#include <cmath>
#include <limits>

namespace kvq::jobs {

namespace {

constexpr int64_t kRowFormat = 1;
constexpr size_t kRowFieldsBeforeLostRuns = 16;
constexpr size_t kRowFieldsBeforeWorkerType = 18;
constexpr size_t kRowFieldsBeforeOutcome = 19;
constexpr size_t kRowFieldsBeforeGroup = 24;
constexpr size_t kRowFieldsBeforeProtocol = 25;
constexpr size_t kRowFieldsBeforeKicks = 29;
constexpr size_t kRowFieldsBeforeTraceparent = 30;
constexpr size_t kRowFieldsBeforeDependencies = 31;
constexpr size_t kRowFieldsBeforeBatch = 35;
constexpr size_t kRowFieldsBeforeWindows = 36;
constexpr size_t kRowFields = 38;
constexpr size_t kErrorFields = 6;
// Tuple has no double: a type's backoff factor and jitter are stored in millionths.
constexpr double kMillionths = 1'000'000.0;
constexpr size_t kTypeFieldsBeforeRetry = 3;
constexpr size_t kTypeFieldsBeforeFlow = 8;
constexpr size_t kTypeFieldsBeforeGroups = 13;
constexpr size_t kTypeFields = 15;
constexpr size_t kGroupFields = 5;

// The outcome a row written before outcomes existed has: finished, and dead if it gave up.
Outcome implied_outcome(const JobRow& r) {
  if (!r.finished) return Outcome::kNone;
  return r.gave_up ? Outcome::kDead : Outcome::kSucceeded;
}

// Whether the row needs the fields outcomes brought (else it encodes as before them).
bool has_outcome_fields(const JobRow& r) {
  return r.outcome != implied_outcome(r) || r.result || r.progress || !r.errors.empty() ||
         r.started != 0;
}

Element optional_text(const std::optional<std::string>& text) {
  if (!text) return nullptr;
  return *text;
}

Tuple encode_errors(const std::vector<JobError>& errors) {
  Tuple out;
  for (const JobError& e : errors) {
    Tuple one{static_cast<int64_t>(e.attempt), e.at_ms, e.worker, e.kind, e.message};
    if (e.details.empty()) {
      one.append(nullptr);
    } else {
      one.append(e.details);
    }
    out.append(std::move(one));
  }
  return out;
}

Result<std::vector<JobError>> decode_errors(const Tuple& t) {
  std::vector<JobError> out;
  for (const Element& element : t.elements()) {
    if (!element.is_tuple()) return Internal("job row has an error of the wrong kind");
    const Tuple& e = element.as_tuple();
    if (e.size() != kErrorFields || !e[0].is_int() || !e[1].is_int() || !e[2].is_string() ||
        !e[3].is_string() || !e[4].is_string() || !(e[5].is_string() || e[5].is_null())) {
      return Internal("job row has an error of the wrong shape");
    }
    out.push_back(JobError{static_cast<uint32_t>(e[0].as_int()), e[1].as_int(), e[2].as_string(),
                           e[3].as_string(), e[4].as_string(),
                           e[5].is_null() ? std::string() : e[5].as_string()});
  }
  return out;
}

// Whether the row needs the fields of add windows (add_windows.h); they come after the batch,
// so a row with them writes it too ("" allowed).
bool has_window_fields(const JobRow& r) { return r.debounce_since != 0 || r.unique_until != 0; }

// Whether the row needs the fields dependencies brought (workflows.h). A batch (workflows.h)
// and the add windows come after them, so a row with either writes them too.
bool has_dependency_fields(const JobRow& r) {
  return r.waiting_on != 0 || r.dependencies != 0 || r.has_dependents ||
         r.on_dependency_failure != OnDependencyFailure::kCancel || !r.batch.empty() ||
         has_window_fields(r);
}

// Whether the row needs the fields the beanstalkd protocol brought (else it encodes as before).
bool has_protocol_fields(const JobRow& r) {
  return r.timeout || r.data_format != DataFormat::kJson || r.global_id || r.snoozes != 0 ||
         r.kicks != 0 || !r.traceparent.empty() || has_dependency_fields(r);
}

bool is_text_or_null(const Element& e) { return e.is_string() || e.is_null(); }

std::optional<std::string> text_or_none(const Element& e) {
  if (e.is_null()) return std::nullopt;
  return e.as_string();
}

}  // namespace

State state_of(const JobRow& row) {
  if (!row.lock.empty()) return State::kRunning;
  if (row.finished) return State::kFinished;
  return row.waiting_on > 0 ? State::kWaiting : State::kPending;
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
  // And the fields of outcomes only on a row that has any of them: a finished row whose
  // outcome is the one its older fields imply (succeeded, or dead having given up) needs none.
  // A group comes after them all, so a job with a group writes every field.
  // The protocol's fields come after the group, so a row with them writes every field.
  const bool protocol_fields = has_protocol_fields(r);
  const bool outcome_fields = has_outcome_fields(r) || !r.group.empty() || protocol_fields;
  if (r.lost_runs != 0 || r.gave_up || !r.worker_type.empty() || outcome_fields) {
    t.append(static_cast<int64_t>(r.lost_runs));
    t.append(r.gave_up);
  }
  if (!r.worker_type.empty() || outcome_fields) t.append(r.worker_type);
  if (outcome_fields) {
    t.append(static_cast<int64_t>(r.outcome));
    t.append(optional_text(r.result));
    t.append(optional_text(r.progress));
    t.append(encode_errors(r.errors));
    t.append(r.started);
  }
  if (!r.group.empty() || protocol_fields) t.append(r.group);
  if (protocol_fields) {
    if (r.timeout) {
      t.append(static_cast<int64_t>(r.timeout->count()));
    } else {
      t.append(nullptr);
    }
    t.append(static_cast<int64_t>(r.data_format));
    t.append(r.global_id);
    t.append(static_cast<int64_t>(r.snoozes));
    const bool dependency_fields = has_dependency_fields(r);
    if (r.kicks != 0 || !r.traceparent.empty() || dependency_fields)
      t.append(static_cast<int64_t>(r.kicks));
    if (!r.traceparent.empty() || dependency_fields) t.append(r.traceparent);
    if (dependency_fields) {
      t.append(static_cast<int64_t>(r.waiting_on));
      t.append(static_cast<int64_t>(r.dependencies));
      t.append(r.has_dependents);
      t.append(static_cast<int64_t>(r.on_dependency_failure));
    }
    if (!r.batch.empty() || has_window_fields(r)) t.append(r.batch);
    if (has_window_fields(r)) {
      t.append(r.debounce_since);
      t.append(r.unique_until);
    }
  }
  return t.pack();
}

Result<JobRow> decode_row(std::string_view bytes) {
  KVQ_ASSIGN_OR_RETURN(Tuple t, Tuple::unpack(bytes));
  const bool known_size =
      t.size() == kRowFields || t.size() == kRowFieldsBeforeWindows ||
      t.size() == kRowFieldsBeforeBatch || t.size() == kRowFieldsBeforeDependencies ||
      t.size() == kRowFieldsBeforeTraceparent || t.size() == kRowFieldsBeforeKicks ||
      t.size() == kRowFieldsBeforeProtocol || t.size() == kRowFieldsBeforeGroup ||
      t.size() == kRowFieldsBeforeOutcome || t.size() == kRowFieldsBeforeWorkerType ||
      t.size() == kRowFieldsBeforeLostRuns;
  if (!known_size || !t[0].is_int() || t[0].as_int() != kRowFormat) {
    return Internal("job row has an unknown format");
  }
  const bool shaped =
      t[1].is_int() && t[2].is_string() && t[3].is_string() && t[4].is_bool() && t[5].is_bool() &&
      t[6].is_int() && t[7].is_int() && t[8].is_int() && t[9].is_int() && t[10].is_string() &&
      t[11].is_int() && t[12].is_int() && t[13].is_int() && t[14].is_string() && t[15].is_int() &&
      (t.size() == kRowFieldsBeforeLostRuns || (t[16].is_int() && t[17].is_bool())) &&
      (t.size() < kRowFieldsBeforeOutcome || t[18].is_string()) &&
      (t.size() < kRowFieldsBeforeGroup ||
       (t[19].is_int() && t[19].as_int() >= static_cast<int64_t>(Outcome::kNone) &&
        t[19].as_int() <= static_cast<int64_t>(Outcome::kCancelled) && is_text_or_null(t[20]) &&
        is_text_or_null(t[21]) && t[22].is_tuple() && t[23].is_int())) &&
      (t.size() != kRowFieldsBeforeProtocol || (t[24].is_string() && !t[24].as_string().empty())) &&
      (t.size() < kRowFieldsBeforeKicks ||
       (t[24].is_string() && ((t[25].is_int() && t[25].as_int() > 0) || t[25].is_null()) &&
        t[26].is_int() && t[26].as_int() >= static_cast<int64_t>(DataFormat::kJson) &&
        t[26].as_int() <= static_cast<int64_t>(DataFormat::kBytes) && t[27].is_bool() &&
        t[28].is_int() && t[28].as_int() >= 0)) &&
      (t.size() != kRowFieldsBeforeTraceparent || (t[29].is_int() && t[29].as_int() > 0)) &&
      (t.size() != kRowFieldsBeforeDependencies ||
       (t[29].is_int() && t[29].as_int() >= 0 && t[30].is_string() &&
        !t[30].as_string().empty())) &&
      (t.size() < kRowFieldsBeforeBatch ||
       (t[29].is_int() && t[29].as_int() >= 0 && t[30].is_string() && t[31].is_int() &&
        t[31].as_int() >= 0 && t[32].is_int() && t[32].as_int() >= 0 && t[33].is_bool() &&
        t[34].is_int() && t[34].as_int() >= static_cast<int64_t>(OnDependencyFailure::kCancel) &&
        t[34].as_int() <= static_cast<int64_t>(OnDependencyFailure::kRun))) &&
      (t.size() != kRowFieldsBeforeWindows || (t[35].is_string() && !t[35].as_string().empty())) &&
      (t.size() != kRowFields || (t[35].is_string() && t[36].is_int() && t[36].as_int() >= 0 &&
                                  t[37].is_int() && t[37].as_int() >= 0));
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
  if (t.size() >= kRowFieldsBeforeOutcome) r.worker_type = t[18].as_string();
  if (t.size() >= kRowFieldsBeforeGroup) {
    r.outcome = static_cast<Outcome>(t[19].as_int());
    r.result = text_or_none(t[20]);
    r.progress = text_or_none(t[21]);
    KVQ_ASSIGN_OR_RETURN(r.errors, decode_errors(t[22].as_tuple()));
    r.started = t[23].as_int();
  } else {
    r.outcome = implied_outcome(r);
  }
  if (t.size() >= kRowFieldsBeforeProtocol) r.group = t[24].as_string();
  if (t.size() >= kRowFieldsBeforeKicks) {
    if (t[25].is_int()) r.timeout = Millis(t[25].as_int());
    r.data_format = static_cast<DataFormat>(t[26].as_int());
    r.global_id = t[27].as_bool();
    r.snoozes = static_cast<uint32_t>(t[28].as_int());
  }
  if (t.size() >= kRowFieldsBeforeTraceparent) r.kicks = static_cast<uint32_t>(t[29].as_int());
  if (t.size() >= kRowFieldsBeforeDependencies) r.traceparent = t[30].as_string();
  if (t.size() >= kRowFieldsBeforeBatch) {
    r.waiting_on = static_cast<uint32_t>(t[31].as_int());
    r.dependencies = static_cast<uint32_t>(t[32].as_int());
    r.has_dependents = t[33].as_bool();
    r.on_dependency_failure = static_cast<OnDependencyFailure>(t[34].as_int());
  }
  if (t.size() >= kRowFieldsBeforeWindows) r.batch = t[35].as_string();
  if (t.size() == kRowFields) {
    r.debounce_since = t[36].as_int();
    r.unique_until = t[37].as_int();
  }
  return r;
}

namespace {

bool is_default(const RetryPolicy& p) {
  const RetryPolicy d;
  return p.max_attempts == d.max_attempts && p.backoff_base == d.backoff_base &&
         p.backoff_factor == d.backoff_factor && p.backoff_cap == d.backoff_cap &&
         p.jitter == d.jitter;
}

int64_t to_millionths(double x) { return static_cast<int64_t>(std::llround(x * kMillionths)); }

}  // namespace

std::string encode_type(const TypeSettings& settings) {
  Tuple t{static_cast<int64_t>(settings.timeout.count())};
  // Flow control comes after the retry policy, so a type using it writes every field before it.
  // Groups come after flow control, so a type with them writes flow control's fields too.
  const bool groups = settings.has_groups || settings.max_running_per_group;
  const bool flow = settings.paused || settings.max_running || settings.rate || groups;
  const bool retry = flow || !is_default(settings.retry);
  if (settings.finished_retention || settings.max_lost_runs || retry) {
    if (settings.finished_retention) {
      t.append(static_cast<int64_t>(settings.finished_retention->count()));
    } else {
      t.append(nullptr);
    }
  }
  if (settings.max_lost_runs) {
    t.append(static_cast<int64_t>(*settings.max_lost_runs));
  } else if (retry) {
    t.append(nullptr);
  }
  if (retry) {
    const RetryPolicy& p = settings.retry;
    t.append(static_cast<int64_t>(p.max_attempts));
    t.append(static_cast<int64_t>(p.backoff_base.count()));
    t.append(to_millionths(p.backoff_factor));
    t.append(static_cast<int64_t>(p.backoff_cap.count()));
    t.append(to_millionths(p.jitter));
  }
  if (flow) {
    auto optional_int = [&](std::optional<int64_t> v) {
      if (v) {
        t.append(*v);
      } else {
        t.append(nullptr);
      }
    };
    t.append(settings.paused);
    // A pause's end means nothing once it is not paused.
    optional_int(settings.paused ? settings.paused_until_ms : std::nullopt);
    optional_int(settings.max_running);
    optional_int(settings.rate ? std::optional<int64_t>(settings.rate->limit) : std::nullopt);
    optional_int(settings.rate ? std::optional<int64_t>(settings.rate->period.count())
                               : std::nullopt);
  }
  if (groups) {
    if (settings.max_running_per_group) {
      t.append(static_cast<int64_t>(*settings.max_running_per_group));
    } else {
      t.append(nullptr);
    }
    t.append(settings.has_groups);
  }
  return t.pack();
}

Result<TypeSettings> decode_type(std::string_view bytes) {
  auto t = Tuple::unpack(bytes);
  if (!t.ok() || t->empty() ||
      (t->size() > kTypeFieldsBeforeRetry && t->size() != kTypeFieldsBeforeFlow &&
       t->size() != kTypeFieldsBeforeGroups && t->size() != kTypeFields))
    return Internal("corrupt type settings");
  const auto& e = t->elements();
  auto int_or_null = [](const Element& x) { return x.is_int() || x.is_null(); };
  // max_lost_runs is null only when a retry policy follows it; limit and period of a rate are
  // both there or both null.
  const bool shaped =
      e[0].is_int() && (e.size() < 2 || int_or_null(e[1])) &&
      (e.size() < 3 || (e[2].is_int() && e[2].as_int() > 0) ||
       (e[2].is_null() && e.size() >= kTypeFieldsBeforeFlow)) &&
      (e.size() < kTypeFieldsBeforeFlow ||
       (e[3].is_int() && e[4].is_int() && e[5].is_int() && e[6].is_int() && e[7].is_int())) &&
      (e.size() < kTypeFieldsBeforeGroups ||
       (e[8].is_bool() && int_or_null(e[9]) &&
        (e[10].is_null() || (e[10].is_int() && e[10].as_int() > 0)) && int_or_null(e[11]) &&
        e[11].is_int() == e[12].is_int() && int_or_null(e[12]))) &&
      (e.size() < kTypeFields ||
       ((e[13].is_null() || (e[13].is_int() && e[13].as_int() > 0)) && e[14].is_bool()));
  if (!shaped) return Internal("corrupt type settings");
  TypeSettings settings;
  settings.timeout = Millis(e[0].as_int());
  if (e.size() >= 2 && e[1].is_int()) settings.finished_retention = Millis(e[1].as_int());
  if (e.size() >= 3 && e[2].is_int()) settings.max_lost_runs = static_cast<uint32_t>(e[2].as_int());
  if (e.size() >= kTypeFieldsBeforeFlow) {
    RetryPolicy& p = settings.retry;
    p.max_attempts = static_cast<uint32_t>(e[3].as_int());
    p.backoff_base = Millis(e[4].as_int());
    p.backoff_factor = static_cast<double>(e[5].as_int()) / kMillionths;
    p.backoff_cap = Millis(e[6].as_int());
    p.jitter = static_cast<double>(e[7].as_int()) / kMillionths;
  }
  if (e.size() >= kTypeFieldsBeforeGroups) {
    settings.paused = e[8].as_bool();
    if (e[9].is_int()) settings.paused_until_ms = e[9].as_int();
    if (e[10].is_int()) settings.max_running = static_cast<uint32_t>(e[10].as_int());
    if (e[11].is_int())
      settings.rate = RateLimit{static_cast<uint32_t>(e[11].as_int()), Millis(e[12].as_int())};
  }
  if (e.size() == kTypeFields) {
    if (e[13].is_int()) settings.max_running_per_group = static_cast<uint32_t>(e[13].as_int());
    settings.has_groups = e[14].as_bool();
  }
  return settings;
}

std::string encode_group(const GroupRow& row) {
  Tuple t{static_cast<int64_t>(row.running)};
  if (row.queued) {
    t.append(row.queued->first);
    t.append(row.queued->second);
  } else {
    t.append(nullptr);
    t.append(nullptr);
  }
  t.append(row.last_accept_us);
  t.append(row.full);
  return t.pack();
}

Result<GroupRow> decode_group(std::string_view bytes) {
  auto t = Tuple::unpack(bytes);
  if (!t.ok() || t->size() != kGroupFields) return Internal("corrupt group row");
  const auto& e = t->elements();
  const bool shaped = e[0].is_int() && e[0].as_int() >= 0 && e[1].is_int() == e[2].is_int() &&
                      (e[1].is_int() || e[1].is_null()) && (e[2].is_int() || e[2].is_null()) &&
                      e[3].is_int() && e[4].is_bool();
  if (!shaped) return Internal("corrupt group row");
  GroupRow row;
  row.running = static_cast<uint32_t>(e[0].as_int());
  if (e[1].is_int()) row.queued = std::pair{e[1].as_int(), e[2].as_int()};
  row.last_accept_us = e[3].as_int();
  row.full = e[4].as_bool();
  return row;
}

}  // namespace kvq::jobs
