// Opening a Jobs and the producers' operations.
#include <algorithm>
#include <functional>
#include <limits>

#include "jobs/accept/accept.h"
#include "jobs/add_windows.h"
#include "jobs/adds.h"
#include "jobs/batches.h"
#include "jobs/dependencies.h"
#include "jobs/group_queue.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/own_timeouts.h"
#include "jobs/types.h"
#include "jobs/validation.h"
#include "jobs/worker_calls.h"

namespace kvq::jobs {

std::string_view state_name(State state) {
  switch (state) {
    case State::kPending: return "pending";
    case State::kRunning: return "running";
    case State::kFinished: return "finished";
    case State::kWaiting: return "waiting";
  }
  return "pending";
}

Result<State> parse_state(std::string_view name) {
  if (name == "pending") return State::kPending;
  if (name == "running") return State::kRunning;
  if (name == "finished") return State::kFinished;
  if (name == "waiting") return State::kWaiting;
  return InvalidArgument("unknown job state '" + std::string(name) +
                         "' (pending, running, finished or waiting)");
}

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kNone: return "";
    case Outcome::kSucceeded: return "succeeded";
    case Outcome::kDead: return "dead";
    case Outcome::kCancelled: return "cancelled";
  }
  return "";
}

Result<Outcome> parse_outcome(std::string_view name) {
  if (name == "succeeded") return Outcome::kSucceeded;
  if (name == "dead") return Outcome::kDead;
  if (name == "cancelled") return Outcome::kCancelled;
  return InvalidArgument("unknown job outcome '" + std::string(name) +
                         "' (succeeded, dead or cancelled)");
}

Result<JobFilter> parse_job_filter(std::string_view name) {
  if (auto state = parse_state(name); state.ok()) return JobFilter{.state = *state};
  if (name == "scheduled") return JobFilter{.state = State::kPending, .due = false};
  if (name == "due") return JobFilter{.state = State::kPending, .due = true};
  if (auto outcome = parse_outcome(name); outcome.ok())
    return JobFilter{.state = State::kFinished, .outcome = *outcome};
  return InvalidArgument("unknown job filter '" + std::string(name) +
                         "' (pending, running, finished, waiting, scheduled, due, succeeded, "
                         "dead or cancelled)");
}

std::string_view data_format_name(DataFormat format) {
  return format == DataFormat::kBytes ? "bytes" : "json";
}

Result<IfExists> parse_if_exists(std::string_view name) {
  if (name == "update") return IfExists::kUpdate;
  if (name == "keep") return IfExists::kKeep;
  return InvalidArgument("unknown if_exists '" + std::string(name) + "' (update or keep)");
}

Jobs::Jobs(std::shared_ptr<kv::Store> store, JobsOptions options)
    : store_(std::move(store)), options_(std::move(options)) {
  impl_ = std::make_unique<Impl>(*store_, options_);
  if (options_.run_scheduler) impl_->scheduler = std::make_unique<Scheduler>(*this, impl_->keys);
}

Jobs::~Jobs() = default;

Result<std::unique_ptr<Jobs>> Jobs::open(std::shared_ptr<kv::Store> store, JobsOptions options) {
  if (!store) return InvalidArgument("no store");
  // Data, progress and result are each up to max_data_bytes, beside kMaxErrorsKept errors: the
  // limit keeps the whole row under kv::kMaxValueSize.
  if (options.max_data_bytes == 0 || options.max_data_bytes > kMaxDataBytesLimit) {
    return InvalidArgument("max_data_bytes must be in 1.." + std::to_string(kMaxDataBytesLimit));
  }
  if (options.accept_spread == 0) return InvalidArgument("accept_spread must be at least 1");
  if (options.monitor_max_batch == 0)
    return InvalidArgument("monitor_max_batch must be at least 1");
  return std::unique_ptr<Jobs>(new Jobs(std::move(store), std::move(options)));
}

Jobs::Stats Jobs::stats() const {
  Stats s;
  if (impl_->monitor) {
    s.reenqueued_by_monitor = impl_->monitor->reenqueued();
    s.gave_up_by_monitor = impl_->monitor->gave_up();
    s.monitor_checks = impl_->monitor->checks();
    s.removed_by_retention = impl_->monitor->expired();
  }
  return s;
}

// ---- Producers ----

namespace {

// The row a job has after `add` (a new job's, or `before` changed as add changes it), or nullopt
// when the add would change nothing.
std::optional<JobRow> row_after_add(const std::optional<JobRow>& before, const std::string& data,
                                    const AddOptions& o, int64_t now) {
  if (!before) {
    JobRow row;
    row.data = data;
    row.scheduled = o.scheduled_time_ms.value_or(now);
    row.priority = o.priority;
    row.created = now;
    row.group = o.group;
    row.timeout = o.timeout;
    row.data_format = o.data_format;
    row.global_id = o.global_id;
    row.traceparent = o.traceparent;
    return row;
  }
  JobRow after = *before;
  switch (state_of(*before)) {
    case State::kWaiting:  // changed as a pending job is, and still waiting
    case State::kPending:
      // Without an explicit time a pending job keeps its place in the queue.
      after.scheduled = o.scheduled_time_ms.value_or(before->scheduled);
      after.priority = o.priority;
      after.data = data;
      after.group = o.group;
      after.timeout = o.timeout;
      after.data_format = o.data_format;
      if (after.scheduled == before->scheduled && after.priority == before->priority &&
          after.data == before->data && after.group == before->group &&
          after.timeout == before->timeout && after.data_format == before->data_format) {
        return std::nullopt;
      }
      after.lost_runs = 0;
      after.traceparent = o.traceparent;  // the trace of the add that set what will run
      return after;
    case State::kRunning:
      after.resubmit = true;
      after.next_scheduled =
          o.scheduled_time_ms.value_or(before->resubmit ? before->next_scheduled : now);
      after.next_priority = o.priority;
      if (before->resubmit && after.next_scheduled == before->next_scheduled &&
          after.next_priority == before->next_priority) {
        return std::nullopt;
      }
      return after;
    case State::kFinished:
      // Added anew: it starts over, as a new job with this data would.
      after.finished = false;
      after.gave_up = false;
      after.lost_runs = 0;
      after.attempts = 0;
      after.errors.clear();
      after.result.reset();
      after.progress.reset();
      after.outcome = Outcome::kNone;
      after.data = data;
      after.scheduled = o.scheduled_time_ms.value_or(now);
      after.priority = o.priority;
      after.group = o.group;
      after.timeout = o.timeout;
      after.data_format = o.data_format;
      after.snoozes = 0;
      after.kicks = 0;
      after.traceparent = o.traceparent;
      return after;
  }
  return std::nullopt;
}

}  // namespace

Result<AddResult> add_normalized(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                 std::string_view id, const std::string& data,
                                 const AddOptions& options, bool* wrote, bool guess) {
  std::vector<std::optional<std::string>> stored;
  if (guess) {
    KVQ_ASSIGN_OR_RETURN(auto settings, txn.get(keys.timeout(type), {.remembered = true}));
    KVQ_ASSIGN_OR_RETURN(auto row, txn.get(keys.job(type, id), {.assume_absent = true}));
    stored = {std::move(settings), std::move(row)};
  } else {
    // One read for both (on etcd, one round trip).
    KVQ_ASSIGN_OR_RETURN(stored, txn.get_many({keys.timeout(type), keys.job(type, id)}));
  }
  if (!stored[0]) {
    if (!options.create_type) {
      return NoTimeout("type '" + std::string(type) +
                       "' has no timeout; set the type's timeout before adding jobs");
    }
    // Read without snapshot: a creation of the type meanwhile conflicts, and the retry keeps it.
    KVQ_ASSIGN_OR_RETURN(stored[0], new_type_row(*options.create_type));
    create_type(txn, keys, type, *stored[0]);
  }
  if (stored[1] && options.if_exists == IfExists::kKeep) return AddResult{.added = false};
  std::optional<JobRow> before;
  if (stored[1]) {
    KVQ_ASSIGN_OR_RETURN(before, decode_row(*stored[1]));
  }
  const int64_t now = now_ms();
  if (before && unique_window_open(*before, now)) return kept_by_window(*before);
  if (!before && options.global_id) {
    // Not a snapshot read: an add of the same id to another type meanwhile conflicts.
    KVQ_ASSIGN_OR_RETURN(auto owner, txn.get(keys.global_id(id)));
    if (owner && *owner != type) {
      return AlreadyExists("a job '" + std::string(id) +
                           "' added with a global id exists in type '" + *owner + "'");
    }
  }
  const bool anew = !before || state_of(*before) == State::kFinished;
  if (!anew && !options.depends_on.empty()) {
    return WrongState("job '" + std::string(id) + "' of type '" + std::string(type) + "' is " +
                      std::string(state_name(state_of(*before))) +
                      "; depends_on applies only to a new job or a finished one added anew");
  }
  KVQ_RETURN_IF_ERROR(check_batch_of_add(type, id, before, options));
  std::optional<AddOptions> debounced;  // options, at the time the debounce gives
  if (options.debounce) {
    debounced = options;
    debounced->scheduled_time_ms = debounced_time(before, *options.debounce, now);
  }
  auto after = with_windows(
      before, row_after_add(before, data, debounced ? *debounced : options, now), options, now);
  if (!after) return add_result(before, after, options);
  if (anew) {
    KVQ_RETURN_IF_ERROR(add_dependencies(txn, keys, type, id, before, *after, options));
    KVQ_RETURN_IF_ERROR(join_batch(txn, keys, type, id, *after, options));
  }
  if (after->timeout && (!before || before->timeout != after->timeout))
    KVQ_RETURN_IF_ERROR(note_own_timeout(txn, keys, type, *after->timeout));
  if (!after->group.empty()) {
    // The type's first job with a group turns its accepts' look at groups on (only then).
    KVQ_ASSIGN_OR_RETURN(TypeSettings settings, decode_type(*stored[0]));
    if (!settings.has_groups) {
      settings.has_groups = true;
      txn.set(keys.timeout(type), encode_type(settings));
    }
  }
  KVQ_ASSIGN_OR_RETURN(after->add_seq, txn.read_version());
  AddResult result = add_result(before, after, options);
  KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, id, before, std::move(after)));
  if (wrote) *wrote = true;
  return result;
}

namespace {

Result<std::string> validate_add(std::string_view type, std::string_view id, std::string_view data,
                                 const AddOptions& options, size_t max_data_bytes) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  KVQ_RETURN_IF_ERROR(validate_group(options.group));
  KVQ_RETURN_IF_ERROR(validate_job_timeout(options.timeout));
  KVQ_RETURN_IF_ERROR(validate_traceparent(options.traceparent));
  KVQ_RETURN_IF_ERROR(validate_dependencies(type, id, options));
  KVQ_RETURN_IF_ERROR(validate_batch_of_add(options));
  KVQ_RETURN_IF_ERROR(validate_add_windows(options));
  if (options.create_type) KVQ_RETURN_IF_ERROR(new_type_row(*options.create_type).status());
  return normalize_data(data, options.data_format, max_data_bytes);
}

// What the attempts of one add share.
struct AddAttempts {
  // The read version of the last attempt that got as far as reading it (see add_attempt).
  std::optional<uint64_t> version;
  // Whether the next attempt confirms, on a current read, an answer given without a write.
  bool confirming = false;
  // Whether the next attempt may guess its reads (add_normalized): only the first. A guess that
  // failed its commit would fail the same way again; so would an answer drawn from one.
  bool guess = true;
  // What the attempt that read at `version` answered: the answer, should that attempt turn out
  // to have committed.
  AddResult result;
};

// One attempt of add. An earlier attempt may have committed (unknown result) and the job moved
// on since — even finished. Re-applying would run it again (and with if_exists kKeep answer
// "kept" for the job it had itself added), so it recognises its own earlier add by the read
// version that attempt recorded: only a write stamps add_seq, so that attempt added.
//
// Its reads may be a little behind the latest commit (kv::Transaction::allow_stale_reads: on
// etcd, no quorum round before the first): its commit fails if anything it read has changed
// since, and add_seq still grows with every add of a row (a commit over a row read at a
// revision is later than the row's last change). An answer it would give without a commit that
// vouches for it — no such type, kept, nothing to change, an id taken in another type — is
// confirmed on a current read first, as a worker's call confirms that it is fenced out
// (worker_calls.h).
Result<AddResult> add_attempt(kv::Transaction& txn, const Keys& keys, std::string_view type,
                              std::string_view id, const std::string& normalized,
                              const AddOptions& options, AddAttempts& attempts) {
  const bool stale = !attempts.confirming && txn.allow_stale_reads();
  std::optional<uint64_t>& attempt_version = attempts.version;
  if (attempt_version && txn.earlier_commit_unknown()) {
    KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
    if (row && row->add_seq == *attempt_version) return attempts.result;
  }
  // A producer that sets kKeep expects to find the job at times: a guess that it is new would
  // then cost a failed commit, where a read costs less. So does one that debounces or keeps a
  // unique window.
  const bool guess = stale && attempts.guess && options.if_exists == IfExists::kUpdate &&
                     !options.debounce && !options.unique_for && !txn.earlier_commit_unknown();
  bool wrote = false;
  Result<AddResult> added = add_normalized(txn, keys, type, id, normalized, options, &wrote, guess);
  // A run that stopped at a read not yet made decides nothing: kv::run_async runs it again,
  // as the same attempt, once the read is fetched (kv::RetryOptions::replayable).
  if (txn.has_deferred_reads()) return Unavailable("reads deferred");
  attempts.guess = false;
  if (stale && (!wrote || !added.ok())) return confirm_on_current_read(attempts.confirming);
  // Read after add's own reads fixed it: on etcd asking first would cost a round trip.
  KVQ_ASSIGN_OR_RETURN(attempt_version, txn.read_version());
  if (!added.ok()) return added.status();
  attempts.result = *added;
  return added;
}

}  // namespace

Result<AddResult> Jobs::add(std::string_view type, std::string_view id, std::string_view data,
                            AddOptions options) {
  KVQ_ASSIGN_OR_RETURN(std::string normalized,
                       validate_add(type, id, data, options, options_.max_data_bytes));
  AddAttempts attempts;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) {
        return add_attempt(txn, impl_->keys, type, id, normalized, options, attempts);
      },
      options_.retry);
}

void Jobs::add_async(std::string_view type, std::string_view id, std::string_view data,
                     AddOptions options, std::function<void(Result<AddResult>)> done) {
  auto normalized = validate_add(type, id, data, options, options_.max_data_bytes);
  if (!normalized.ok()) return done(normalized.status());
  struct Add {
    std::string type, id, data;
    AddOptions options;
    AddAttempts attempts;
  };
  auto add = std::make_shared<Add>(
      Add{std::string(type), std::string(id), std::move(*normalized), options, {}});
  kv::run_async(
      *store_,
      [add, &keys = impl_->keys](kv::Transaction& txn) {
        return add_attempt(txn, keys, add->type, add->id, add->data, add->options, add->attempts);
      },
      std::move(done), kv::replayable(options_.retry));
}

Result<AddResult> Jobs::add(kv::Transaction& txn, std::string_view type, std::string_view id,
                            std::string_view data, AddOptions options) {
  KVQ_ASSIGN_OR_RETURN(std::string normalized,
                       validate_add(type, id, data, options, options_.max_data_bytes));
  return add_normalized(txn, impl_->keys, type, id, normalized, options);
}

namespace {

// add_many's jobs, each validated and its data normalized; kInvalidArgument naming the first
// bad one.
Result<std::vector<NewJob>> validate_add_many(std::string_view type,
                                              const std::vector<NewJob>& jobs,
                                              size_t max_data_bytes) {
  if (jobs.empty() || jobs.size() > kMaxAddMany) {
    return InvalidArgument("add_many takes 1.." + std::to_string(kMaxAddMany) + " jobs");
  }
  std::vector<NewJob> normalized;
  normalized.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto data = validate_add(type, jobs[i].id, jobs[i].data, jobs[i].options, max_data_bytes);
    if (!data.ok()) {
      return Status(data.status().code(),
                    "job " + std::to_string(i) + ": " + data.status().message());
    }
    normalized.push_back({jobs[i].id, std::move(*data), jobs[i].options});
  }
  KVQ_RETURN_IF_ERROR(batch_order(type, normalized).status());  // a cycle, refused before a read
  return normalized;
}

// Every add of the batch in order, in `txn`; a repeated id sees the earlier add of it.
// `wrote` (if given) tells whether it wrote any job.
Result<AddManyResult> add_batch(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                const std::vector<NewJob>& jobs, bool* wrote = nullptr) {
  AddManyResult result;
  // Dependencies of the batch first (dependencies.h); kept stays in batch order.
  KVQ_ASSIGN_OR_RETURN(std::vector<size_t> order, batch_order(type, jobs));
  std::vector<bool> kept(jobs.size(), false);
  for (size_t i : order) {
    const auto& job = jobs[i];
    KVQ_ASSIGN_OR_RETURN(AddResult added,
                         add_normalized(txn, keys, type, job.id, job.data, job.options, wrote));
    if (added.added) {
      ++result.added;
    } else {
      kept[i] = true;
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i)
    if (kept[i]) result.kept.push_back(jobs[i].id);
  return result;
}

// What the tries of one add_many share: the read version of the latest try that got as far as
// writing, and what that try did; whether the next try confirms an answer given without a write.
struct BatchAttempt {
  std::optional<uint64_t> version;
  AddManyResult result;
  bool confirming = false;
};

// One attempt of add_many, guarded as add_attempt is. The batch commits whole, so one of its
// jobs still stamped with the earlier attempt's read version shows that attempt committed, and
// its answer stands; re-applying would mark a job accepted since then resubmitted, and run it
// again (or call kept a job the batch had itself added). Its reads may be behind the latest
// commit as add's: a batch that writes any job commits only if every row it read (the kept ones
// too) is unchanged, and one that would answer without committing confirms on a current read.
Result<AddManyResult> add_many_attempt(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, const std::vector<NewJob>& jobs,
                                       BatchAttempt& attempt) {
  const bool stale = !attempt.confirming && txn.allow_stale_reads();
  if (attempt.version) {
    std::vector<std::string> rows;
    rows.reserve(jobs.size());
    for (const auto& job : jobs) rows.push_back(keys.job(type, job.id));
    // One read for all (on etcd, one round trip).
    KVQ_ASSIGN_OR_RETURN(auto stored, txn.get_many(rows));
    for (const auto& bytes : stored) {
      if (!bytes) continue;
      KVQ_ASSIGN_OR_RETURN(JobRow row, decode_row(*bytes));
      if (row.add_seq == *attempt.version) return attempt.result;
    }
  }
  bool wrote = false;
  auto batch = add_batch(txn, keys, type, jobs, &wrote);
  if (txn.has_deferred_reads()) return Unavailable("reads deferred");  // as add_attempt
  if (stale && (!wrote || !batch.ok())) return confirm_on_current_read(attempt.confirming);
  KVQ_ASSIGN_OR_RETURN(AddManyResult result, std::move(batch));
  KVQ_ASSIGN_OR_RETURN(attempt.version, txn.read_version());
  attempt.result = result;
  return result;
}

}  // namespace

Result<AddManyResult> Jobs::add_many(std::string_view type, const std::vector<NewJob>& jobs) {
  KVQ_ASSIGN_OR_RETURN(auto normalized, validate_add_many(type, jobs, options_.max_data_bytes));
  BatchAttempt attempt;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) {
        return add_many_attempt(txn, impl_->keys, type, normalized, attempt);
      },
      options_.retry);
}

void Jobs::add_many_async(std::string_view type, std::vector<NewJob> jobs,
                          std::function<void(Result<AddManyResult>)> done) {
  auto normalized = validate_add_many(type, jobs, options_.max_data_bytes);
  if (!normalized.ok()) return done(normalized.status());
  // Shared by the tries of one transaction (a retry may run on another thread).
  struct AddMany {
    std::string type;
    std::vector<NewJob> jobs;
    BatchAttempt attempt;
  };
  auto add = std::make_shared<AddMany>(AddMany{std::string(type), std::move(*normalized), {}});
  kv::run_async(
      *store_,
      [add, &keys = impl_->keys](kv::Transaction& txn) {
        return add_many_attempt(txn, keys, add->type, add->jobs, add->attempt);
      },
      std::move(done), kv::replayable(options_.retry));
}

Result<AddManyResult> Jobs::add_many(kv::Transaction& txn, std::string_view type,
                                     const std::vector<NewJob>& jobs) {
  KVQ_ASSIGN_OR_RETURN(auto normalized, validate_add_many(type, jobs, options_.max_data_bytes));
  return add_batch(txn, impl_->keys, type, normalized);
}

Status Jobs::remove(std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  bool attempted = false;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Status {
        KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, impl_->keys, type, id));
        if (!before) {
          // Gone on a retry: our earlier attempt committed (an unknown result), or someone else
          // removed it meanwhile. Either way the caller's wish holds.
          if (attempted) return Status::OK();
          return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                          "' does not exist");
        }
        attempted = true;
        return save_job(txn, impl_->keys, type, id, before, std::nullopt);
      },
      options_.retry);
}

Status Jobs::remove(kv::Transaction& txn, std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, impl_->keys, type, id));
  if (!before)
    return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                    "' does not exist");
  return save_job(txn, impl_->keys, type, id, before, std::nullopt);
}

Result<JobInfo> Jobs::get(std::string_view type, std::string_view id) {
  return in_own_transaction(&Jobs::get, type, id);
}

Result<JobInfo> Jobs::get(kv::Transaction& txn, std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, impl_->keys, type, id));
  if (!row)
    return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                    "' does not exist");
  return to_info(type, id, *row);
}

Result<JobPage> Jobs::list(std::string_view type, const ListOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (options.limit == 0 || options.limit > 10'000)
    return InvalidArgument("list limit must be in 1..10000");
  if (options.outcome == Outcome::kNone)
    return InvalidArgument("list's outcome filter must be succeeded, dead or cancelled");
  const auto& keys = impl_->keys;
  const int64_t now = now_ms();
  // Filtering happens after reading, so bound the rows one page may scan.
  const size_t scan_budget = std::max<size_t>(options.limit * 10, 1000);
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<JobPage> {
        KVQ_RETURN_IF_ERROR(require_type(txn, keys, type));
        auto [begin, end] = keys.jobs_of(type);
        if (!options.cursor.empty()) begin = keys.job(type, options.cursor) + '\0';
        KVQ_ASSIGN_OR_RETURN(auto rows,
                             txn.get_range(begin, end, {.limit = scan_budget, .snapshot = true}));
        JobPage page;
        std::string last_id;
        for (const auto& kv : rows) {
          KVQ_ASSIGN_OR_RETURN(last_id, keys.parse_job_id(kv.key));
          KVQ_ASSIGN_OR_RETURN(JobRow row, decode_row(kv.value));
          const State state = state_of(row);
          if (options.state && state != *options.state) continue;
          // An outcome is had by finished jobs only (kNone otherwise), so this implies finished.
          if (options.outcome && row.outcome != *options.outcome) continue;
          if (options.due && (state != State::kPending || (row.scheduled <= now) != *options.due)) {
            continue;
          }
          if (options.worker && row.worker != *options.worker) continue;
          if (options.worker_type && row.worker_type != *options.worker_type) continue;
          page.jobs.push_back(to_info(type, last_id, row));
          if (page.jobs.size() == options.limit) break;
        }
        const bool more = page.jobs.size() == options.limit || rows.size() == scan_budget;
        if (more && !last_id.empty()) page.next_cursor = last_id;
        return page;
      },
      options_.retry);
}

}  // namespace kvq::jobs
