// kvq/jobs.h — durable background jobs on any kv::Store (after CouchDB's couch_jobs).
//
// A job has a type (a short name), an id unique within its type, JSON-object data, a scheduled
// time (wall-clock milliseconds since the Unix epoch; default: now) and a priority (lower runs
// first; default 0). Its state is pending, running or finished, and a finished job has an
// outcome — succeeded, dead or cancelled — that says how it ended:
//
//   add ──► pending ──accept──► running ──finish──────────────► finished (succeeded)
//            ▲  ▲                │ │ │ ▲ update (heartbeat,       ▲   │
//            │  │                │ │ │ └─ progress)              │   └─ rerun / add ─► pending
//            │  └─ fail, at the  │ │ └── fail, attempts used up, ─┤      (attempts start over)
//            │     retry policy's│ │     or retry: false          │ (dead)
//            │     time (retry)  │ └──── lost run (activity timeout or worker death) past
//            │                   │       max_attempts or max_lost_runs ───────┘ (dead)
//            └─ snooze, lost run, finish after resubmit
//   cancel: pending or running ──► finished (cancelled)
//
// Every attempt a job makes is one accept; an attempt ends by finish (succeeded), fail (an
// error the worker reports), a lost run (the worker went silent past the type's timeout, or
// died), or snooze (handed back for later, not counted). A failed or lost attempt is kept in
// the job's errors (the last kMaxErrorsKept); the job is retried (fail: at the time the type's
// RetryPolicy gives; lost run: at once) until it has made max_attempts attempts, then ends dead.
// The job's data is its input and stays as it was added; finish's result and update's progress
// are kept beside it (FinishOptions, UpdateOptions).
//
// Audiences, as in couch_jobs:
//   * type timeouts — a type exists while it has an activity timeout; add requires one (else
//                     kNoTimeout), and accept, list and the counts answer kNotFound naming a
//                     type that does not exist, so a misspelt type is reported, not idle.
//   * producers     — add, remove, get, list, pending_count.
//   * workers       — accept a due job (highest priority first, then earliest scheduled time),
//                     then update (heartbeat) / finish / fail / snooze / resubmit it. Every
//                     worker call checks the
//                     job's lock in its own transaction and fails with kFailedPrecondition
//                     ("halt") once the worker has been fenced out — the job was removed,
//                     re-enqueued by the activity monitor, or accepted by someone else. A worker
//                     that writes its own results in the same transaction as update or finish can
//                     therefore never commit after being fenced out.
//   * watchers      — subscribe to a job and receive its state changes; wait for a state.
//
// Every operation that only touches the store has two forms: one runs in its own transaction
// (with kv::run's retries), one joins the caller's open transaction so that job changes commit
// atomically with the caller's own data (and the caller retries). Calls are idempotent under
// retries, including after an unknown commit result.
//
// Background work runs in every process that opens a Jobs, and is safe to run in any number of
// processes at once: an activity monitor re-enqueues running jobs whose worker has not called
// update within the type's timeout (judged from the store's commit order between the monitor's
// own checks, never by comparing clocks of different machines); every local waiting accept of a
// type is woken through one store watch per type, and every local subscriber of a type through
// another.
//
// Limits: type 1..200 bytes, id 1..256 bytes (any bytes but NUL); data a JSON object of at most
// JobsOptions::max_data_bytes (default 256 KiB) once compacted, or as many bytes of a job whose
// data format is bytes (AddOptions::data_format). Violations get kInvalidArgument and change
// nothing. Every key of a job must also fit in kv::kMaxKeySize (511) bytes with the key prefix:
// a 200-byte type with a 256-byte id does, but the longest type, group and id together, or the
// longest worker name with them, do not, and the call that would write such a key fails with
// kInvalidArgument at its commit, changing nothing.
//
// Thread-safety: a Jobs is safe to use from many threads. Subscription handles are used by one
// thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/kv.h"
#include "kvq/status.h"

namespace kvq::jobs {

using Millis = std::chrono::milliseconds;

// 200: beanstalkd's longest tube name, which a type of the same name holds (docs/beanstalk.md).
inline constexpr size_t kMaxTypeBytes = 200;
inline constexpr size_t kMaxIdBytes = 256;

enum class State { kPending, kRunning, kFinished };
std::string_view state_name(State state);  // "pending", "running", "finished"
// kInvalidArgument for anything else.
Result<State> parse_state(std::string_view name);

// How a finished job ended; kNone while it has not (pending or running). Rows written before
// outcomes existed read as kSucceeded, or kDead when they had given up (max_lost_runs).
enum class Outcome { kNone, kSucceeded, kDead, kCancelled };
std::string_view outcome_name(Outcome outcome);  // "", "succeeded", "dead", "cancelled"
// "succeeded", "dead" or "cancelled"; kInvalidArgument for anything else.
Result<Outcome> parse_outcome(std::string_view name);

// Which jobs list() and the front ends' `state` filters select, by one name: a state
// ("pending", "running", "finished"), part of one — "scheduled" (pending, not yet due), "due"
// (pending and due) — or an outcome ("succeeded", "dead", "cancelled": finished that way).
// Front ends take these names as they are, so every one of them filters the same way.
struct JobFilter {
  std::optional<State> state;
  std::optional<Outcome> outcome;  // implies state kFinished
  std::optional<bool> due;         // implies state kPending: true due by now, false not yet due
};
// kInvalidArgument naming the accepted names for anything else.
Result<JobFilter> parse_job_filter(std::string_view name);

struct JobsOptions {
  // Every key kvq writes starts with this prefix, so several deployments (or the host
  // application's own data) can share one store.
  std::string key_prefix = "kvq";
  size_t max_data_bytes = 256 * 1024;
  // A retried accept (after a conflict with an accept of another process) picks at random
  // among this many of the first due jobs, so that the acceptors that collided rarely collide
  // again (couch_jobs uses up to 1024); a first try takes them in order (see "Order" at
  // Jobs::accept).
  size_t accept_spread = 64;
  // Run the activity monitor in this process (every process may; turning it off is for tests
  // and tools that must not re-enqueue anything). It also removes expired finished jobs
  // (set_finished_retention).
  bool run_activity_monitor = true;
  // The monitor checks each type about this many times per timeout (jittered).
  int monitor_checks_per_timeout = 4;
  // The most running jobs one monitor transaction re-enqueues; the batch adapts below it.
  size_t monitor_max_batch = 500;
  // A job's data, an update's progress and a finish's result are each at most max_data_bytes,
  // so with kMaxErrorsKept errors a job row stays under kv::kMaxValueSize: open() refuses a
  // max_data_bytes above kMaxDataBytesLimit.
  kv::RetryOptions retry;
  // Run the scheduler in this process: it enqueues the due occurrences of every schedule
  // (put_schedule). Every process may, at once: each occurrence is enqueued exactly once.
  bool run_scheduler = true;
};

inline constexpr uint32_t kMaxAttemptsLimit = 1'000'000;

// What a type does with a failed attempt (Jobs::fail, or a lost run): retry it, after a delay
// for a failure, until the job has made max_attempts attempts in all; then the job is dead.
//
// The delay after the n-th failed attempt (n = 1, 2, ...) is
//     d(n) = min(backoff_cap, backoff_base * backoff_factor^(n-1)),
// drawn uniformly from [d(n) * (1 - jitter), d(n)]: never later than d(n), and spread so that
// jobs failing together (a dependency was down) do not all come back at once. With the
// defaults: about 1, 2, 4, ... seconds, capped at one hour; the 25th failure ends the job,
// about 14 hours after its first.
struct RetryPolicy {
  uint32_t max_attempts = 25;     // 1..kMaxAttemptsLimit; 1: never retried
  Millis backoff_base{1000};      // > 0
  double backoff_factor = 2.0;    // 1.0..100.0
  Millis backoff_cap{3'600'000};  // >= backoff_base
  double jitter = 0.2;            // 0.0..1.0
};
// d(n) of the policy as above before jitter; `n` >= 1.
Millis backoff_delay(const RetryPolicy& policy, uint32_t n);
// The delay with jitter applied for `unit_random` in [0, 1): d(n) * (1 - jitter * unit_random).
Millis jittered_backoff_delay(const RetryPolicy& policy, uint32_t n, double unit_random);
// kInvalidArgument naming the first field out of range.
Status validate_retry_policy(const RetryPolicy& policy);

// At most `limit` accepts of a type in any window of `period` (a sliding window, not fixed
// buckets: no burst of 2 * limit across a boundary), counted over every process sharing the
// store by the accepting transactions' wall clocks.
struct RateLimit {
  uint32_t limit = 0;  // 1..kMaxRateLimit
  Millis period{0};    // 1 ms..kMaxRatePeriod
  friend bool operator==(const RateLimit&, const RateLimit&) = default;
};

// What a type is: its activity timeout, how long its finished jobs are kept, and its retry
// policy.
struct TypeSettings {
  Millis timeout{0};
  // Finished jobs are removed once this long has passed since they finished; nullopt keeps
  // them until someone removes them (the default).
  std::optional<Millis> finished_retention;
  // A job whose runs were lost this many times in a row (its worker went silent past the
  // timeout, or died) ends dead even if it has attempts left; nullopt: only max_attempts
  // limits lost runs (the default).
  std::optional<uint32_t> max_lost_runs;
  RetryPolicy retry;
  // Flow control (pause_type, set_max_running, set_rate_limit). Each is decided in the accept
  // transaction itself, so it holds exactly across every process sharing the store; a type
  // with none of them set pays nothing for them.
  bool paused = false;                     // accepts get nothing; adds and running jobs go on
  std::optional<int64_t> paused_until_ms;  // while paused: resumes by itself then (wall clock)
  std::optional<uint32_t> max_running;     // at most this many of its jobs run at once
  std::optional<RateLimit> rate;           // at most rate->limit accepts per rate->period
  // At most this many jobs of any one group (AddOptions::group) run at once, across the
  // cluster; jobs without a group are not limited by it. nullopt: no limit (the default).
  std::optional<uint32_t> max_running_per_group;
  // Set by the first add of a job with a group, never cleared while the type exists: only then
  // does an accept of the type look at its groups, so a type that never had one pays nothing.
  bool has_groups = false;
};

inline constexpr uint32_t kMaxLostRunsLimit = 1'000'000;
inline constexpr uint32_t kMaxRunningLimit = 1'000'000;
// Group keys (AddOptions::group): 1..kMaxGroupBytes bytes, no ASCII control characters.
inline constexpr size_t kMaxGroupBytes = 128;
inline constexpr uint32_t kMaxRateLimit = 1000;
inline constexpr Millis kMaxRatePeriod{24 * 3600 * 1000};
// kInvalidArgument naming the field out of range (limit 1..kMaxRateLimit, period
// 1 ms..kMaxRatePeriod).
Status validate_rate_limit(const RateLimit& rate);

// A change to some of a type's settings (Jobs::change_type_settings): a field left unset keeps
// the type's current value; an inner nullopt clears the setting.
struct RetryPolicyChange {
  std::optional<uint32_t> max_attempts;
  std::optional<Millis> backoff_base;
  std::optional<double> backoff_factor;
  std::optional<Millis> backoff_cap;
  std::optional<double> jitter;
  bool any() const {
    return max_attempts || backoff_base || backoff_factor || backoff_cap || jitter;
  }
  // `policy` with the fields given here replaced.
  RetryPolicy applied_to(RetryPolicy policy) const;
};
struct TypeSettingsChange {
  std::optional<Millis> timeout;  // set_type_timeout: creates the type if it does not exist
  std::optional<std::optional<Millis>> finished_retention;       // set_finished_retention
  std::optional<std::optional<uint32_t>> max_lost_runs;          // set_max_lost_runs
  std::optional<std::optional<uint32_t>> max_running;            // set_max_running
  std::optional<std::optional<RateLimit>> rate;                  // set_rate_limit
  std::optional<std::optional<uint32_t>> max_running_per_group;  // set_max_running_per_group
  // Merged into the type's current policy (the library's defaults where it never set one),
  // then set_retry_policy: the merged policy is what is validated.
  RetryPolicyChange retry;
  // true: pause_type(paused_until_ms); false: resume_type. paused_until_ms only with true.
  std::optional<bool> paused;
  std::optional<int64_t> paused_until_ms;
};

// What an add does to a job that already exists (in any state).
enum class IfExists {
  kUpdate,  // as add() describes: replace a pending job, resubmit a running one, rerun a finished
            // one
  kKeep,    // leave it exactly as it is: a producer retrying an add never runs a job twice
};
// "update" or "keep"; kInvalidArgument for anything else.
Result<IfExists> parse_if_exists(std::string_view name);

// How a job's data is kept: a JSON object (the default), or bytes exactly as given, never
// parsed (the beanstalkd protocol's bodies: any bytes, NUL included). Update, finish and add
// keep a job's format unless they say otherwise; a finish's result is JSON either way.
enum class DataFormat { kJson, kBytes };
std::string_view data_format_name(DataFormat format);  // "json", "bytes"

// A job's own activity timeout (AddOptions::timeout): 1 ms..kMaxJobTimeout.
inline constexpr Millis kMaxJobTimeout{7 * 24 * 3600 * 1000};

struct AddOptions {
  std::optional<int64_t> scheduled_time_ms;  // default: now
  int64_t priority = 0;
  IfExists if_exists = IfExists::kUpdate;
  // The job's own activity timeout: a run of it with no update (heartbeat) for this long is
  // lost, exactly as with its type's timeout, which this replaces for this job only (the
  // beanstalkd protocol's TTR). The activity monitor judges it by the store's commit order, as
  // it does the type's. nullopt: the type's timeout. REQUIRES: 1 ms..kMaxJobTimeout.
  std::optional<Millis> timeout;
  // kBytes: `data` is any bytes (at most JobsOptions::max_data_bytes), kept as given.
  DataFormat data_format = DataFormat::kJson;
  // The id is unique across every type among jobs added with global_id: the add fails with
  // kAlreadyExists (changing nothing) when such a job of another type has this id (jobs added
  // without global_id are not indexed, so they do not clash), and type_of(id) finds the job's
  // type until it is removed. For protocols whose job ids name no type
  // (beanstalkd's `delete <id>`); see next_job_number for ids no one else will take. An add
  // that changes an existing job keeps the job's global_id as it was.
  bool global_id = false;
  // The job's group ("" for none): a tenant, a customer, an account. Accepts take turns
  // between the groups that have due jobs (round-robin, highest priority first), so one group
  // with a million pending jobs cannot starve one with ten; a type can also cap the running
  // jobs of each group (TypeSettings::max_running_per_group). An add to a pending or finished
  // job sets its group; a running job keeps its group for this run and the resubmitted next
  // one. REQUIRES: "" or 1..kMaxGroupBytes bytes without ASCII control characters.
  std::string group;
  // When the type does not exist, the add creates it with these settings (as ensure_type does,
  // in the add's own transaction) instead of failing with kNoTimeout: for front ends whose
  // protocol makes a queue by naming it (a beanstalkd tube deleted over HTTP meanwhile).
  // An existing type is left as it is. REQUIRES: settings ensure_type accepts.
  std::optional<TypeSettings> create_type;
};

struct AddResult {
  // False only when if_exists was kKeep and the job existed, so nothing was changed.
  bool added = true;
};

struct AddManyResult {
  size_t added = 0;               // jobs of the batch added (or changed)
  std::vector<std::string> kept;  // ids if_exists kKeep left alone, in batch order
};

// One job of an add_many.
struct NewJob {
  std::string id;
  std::string data = "{}";  // a JSON object
  AddOptions options;
};

inline constexpr size_t kMaxAddMany = 1000;
// accept_any and finish_and_accept take at most this many types.
inline constexpr size_t kMaxAcceptTypes = 64;

// A failed or lost attempt, as the job keeps it (the last kMaxErrorsKept, oldest first).
struct JobError {
  uint32_t attempt = 0;  // the attempt that failed (JobInfo::attempts at the time)
  int64_t at_ms = 0;     // when (the failing call's wall clock)
  std::string worker;    // who held it ("" if not named)
  // What kind of failure: the worker's own word (FailOptions::kind, default "error"), or, for
  // lost runs, "timeout" (no update within the type's timeout) or "worker_lost" (its
  // registered worker left or was declared dead).
  std::string kind;
  std::string message;
  std::string details;  // JSON text (any JSON value), "" for none
};

inline constexpr size_t kMaxErrorsKept = 10;
inline constexpr size_t kMaxErrorKindBytes = 64;
// Longer messages are cut at a UTF-8 boundary and end with "…"; details whose compact JSON is
// longer are replaced by {"truncated": "<their first bytes>"}: a failure is always recorded.
inline constexpr size_t kMaxErrorMessageBytes = 4096;
inline constexpr size_t kMaxErrorDetailsBytes = 8192;
inline constexpr size_t kMaxDataBytesLimit = 300 * 1024;
struct JobInfo {
  std::string type;
  std::string id;
  State state = State::kPending;
  std::string data;  // JSON object text, or the bytes of a job whose data_format is kBytes
  int64_t scheduled_time_ms = 0;
  int64_t priority = 0;
  bool resubmitted = false;  // running, and set to run again after this run
  std::string worker;        // who holds it while running ("" if not named)
  std::string worker_type;   // the workers-layer type `worker` is registered under ("" if none)
  // Attempts made since it was last added anew or rerun: accepts, less the runs it snoozed.
  uint32_t attempts = 0;
  // Runs lost in a row (activity timeout or worker death) since it was last added or finished.
  uint32_t lost_runs = 0;
  Outcome outcome = Outcome::kNone;  // how it ended, once finished
  // Deprecated (kept for readers of the older field): outcome is kDead because of lost runs.
  bool gave_up = false;
  std::optional<std::string> result;    // JSON text of finish's result, while finished
  std::optional<std::string> progress;  // JSON text of the latest update's progress, this run
  std::vector<JobError> errors;         // the last failed or lost attempts, oldest first
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  int64_t started_at_ms = 0;      // when its current or last run was accepted; 0 if never
  int64_t ended_at_ms = 0;        // when it finished, while finished
  std::string group;              // AddOptions::group; "" for none
  std::optional<Millis> timeout;  // AddOptions::timeout: its own; nullopt: its type's
  DataFormat data_format = DataFormat::kJson;
  bool global_id = false;  // AddOptions::global_id
  uint32_t snoozes = 0;    // runs handed back by snooze since it was last added or rerun
  // Times kick, kick_job, rerun_some or make_due moved it (beanstalkd's `kicks`), since it was
  // added anew.
  uint32_t kicks = 0;
};

inline constexpr uint64_t kGroupPendingCountLimit = 10'000;
// A group of a type as Jobs::groups lists it.
struct GroupInfo {
  std::string group;
  uint32_t running = 0;  // its running jobs
  uint64_t pending = 0;  // its pending jobs, due or not, counted up to kGroupPendingCountLimit
  // Waiting for one of its runs to end: it holds max_running_per_group running jobs.
  bool full = false;
  // When it is next in turn (its first pending job's scheduled time, or its last accept's
  // time if later), while it has pending jobs and is not full; nullopt otherwise.
  std::optional<int64_t> in_turn_at_ms;
};

// A running job as its worker holds it. Copyable; the lock is what fences.
struct Job {
  std::string type;
  std::string id;
  std::string lock;
  std::string data;
  std::string worker;
  std::string worker_type;
  uint32_t attempt = 0;  // which attempt this run is (1 for the first); 0 in a rebuilt handle
  DataFormat data_format = DataFormat::kJson;
  int64_t priority = 0;
  // The run's activity timeout (the job's own, else its type's at the accept): a run with no
  // update for this long is lost. 0 in a rebuilt handle.
  Millis timeout{0};
};

struct AcceptOptions {
  std::optional<int64_t> max_scheduled_time_ms;  // default: now (only due jobs)
  std::optional<int64_t> max_priority;           // default: any
  Millis timeout{0};                             // 0: never block
  std::string worker;  // recorded on the job (at most 256 bytes); "" for none
  // The workers-layer type (kvq/workers.h) `worker` is registered under, recorded with it, so
  // that the departure of a worker of another type with the same id leaves this job alone
  // (release_worker). "" for a name not registered as a worker. REQUIRES: "" or a valid type
  // name, and then a non-empty `worker`.
  std::string worker_type;
};

struct UpdateResult {
  bool resubmitted = false;  // someone asked for another run after this one
};

// What update writes besides the heartbeat.
struct UpdateOptions {
  std::optional<std::string> progress;  // any JSON value: the run's progress (JobInfo::progress)
  // A JSON object that replaces the job's data: for workers that keep, as couch_jobs does, the
  // job's state in its data. Default: keep the data.
  std::optional<std::string> data;
};

struct FinishOptions {
  std::optional<std::string> result;  // any JSON value: the job's result (JobInfo::result)
  std::optional<std::string> data;    // replaces the job's data, as in UpdateOptions
};

// A worker's report that this attempt failed (Jobs::fail).
struct FailOptions {
  std::string message;                 // REQUIRES: not empty
  std::string kind = "error";          // 1..kMaxErrorKindBytes
  std::optional<std::string> details;  // any JSON value, e.g. {"stack": "..."}
  // When to retry instead of the type's backoff (>= 0); the attempt limit still applies.
  std::optional<Millis> retry_in;
  bool retry = true;  // false: the job ends dead now, whatever attempts it has left
  // The job's priority from now on: that of its retry, or, when it ends dead, that of a later
  // rerun (beanstalkd's `bury <id> <pri>`). Default: keep it.
  std::optional<int64_t> priority;
};

struct FailResult {
  bool dead = false;        // the job ended dead; otherwise it is pending for a retry
  int64_t retry_at_ms = 0;  // when it is due again, if not dead
  uint32_t attempt = 0;     // the attempt that failed
};

// When a snoozed job is due again: at scheduled_time_ms if given, else after `delay`.
struct SnoozeOptions {
  std::optional<int64_t> scheduled_time_ms;
  Millis delay{0};                  // >= 0
  std::optional<int64_t> priority;  // the job's priority from now on; default: keep it
};

// What Jobs::reschedule changes of a pending job (each: default keep).
struct RescheduleOptions {
  std::optional<int64_t> scheduled_time_ms;
  std::optional<int64_t> priority;
};

struct RemoveOptions {
  // Refuse (kWrongState, changing nothing) when the job is running: only its worker may then
  // remove it, with remove(Job&) (beanstalkd's `delete` of a job another client reserved).
  bool unless_running = false;
};

// Which job Jobs::peek shows.
enum class Peek {
  kDue,        // the due job an accept would take next (ignoring flow control and spread)
  kScheduled,  // the pending job not yet due that is due soonest
  kDead,       // the first dead job, as rerun_all takes them
};

struct RerunOptions {
  std::optional<int64_t> scheduled_time_ms;  // default: now
  std::optional<int64_t> priority;           // default: the job's
};

struct ResubmitOptions {
  std::optional<int64_t> scheduled_time_ms;  // default: now
  std::optional<std::string> data;           // default: keep
};

struct ListOptions {
  std::optional<State> state;
  std::optional<Outcome> outcome;          // only finished jobs that ended this way
  std::optional<bool> due;                 // only pending jobs due by now (true) or not yet (false)
  std::optional<std::string> worker;       // only jobs running on this worker
  std::optional<std::string> worker_type;  // only jobs whose worker has this worker type
  size_t limit = 100;
  std::string cursor;  // "" for the first page; JobPage::next_cursor for the next
};

struct JobPage {
  std::vector<JobInfo> jobs;
  std::string next_cursor;  // "" when there is nothing more
};

struct PendingCountOptions {
  std::optional<int64_t> max_scheduled_time_ms;  // default: now (due jobs only)
  // Only jobs of this priority or better (lower); default: any (beanstalkd's urgent jobs are
  // those under 1024).
  std::optional<int64_t> max_priority;
  size_t limit = 100'000;
};

// One observation of a subscribed job. `found` is false once the job is gone (removed).
struct JobEvent {
  std::string type;
  std::string id;
  bool found = true;
  State state = State::kPending;
  std::string data;
  uint64_t seq = 0;                   // grows with every change of the job
  Outcome outcome = Outcome::kNone;   // once finished
  std::optional<std::string> result;  // once finished with one
  uint32_t attempts = 0;
  bool gave_up = false;  // deprecated: outcome kDead because of lost runs
  DataFormat data_format = DataFormat::kJson;
};

// What a schedule does with occurrences that came due while no process ran the scheduler
// (downtime), found late: enqueue none of them, only the latest (the default), or all of them.
// When the scheduler finds occurrences o1 < ... < ok all due by now:
//   kAll   enqueues every one (at most 100 per transaction, the rest in the next ones);
//   kOne   enqueues ok and counts the others as skipped;
//   kNone  enqueues ok only if it is on time — at most a grace late, the grace being the
//          shorter of 60 s and the gap from ok to the occurrence after it — and skips the rest.
//          Since ok is the latest due, it is always within that gap: kNone differs from kOne
//          only for an occurrence found more than a minute late.
// Either way the schedule's next_run_ms becomes the first occurrence after now.
enum class CatchUp { kNone, kOne, kAll };
std::string_view catch_up_name(CatchUp catch_up);  // "none", "one", "all"
// kInvalidArgument for anything else.
Result<CatchUp> parse_catch_up(std::string_view name);

inline constexpr size_t kMaxScheduleNameBytes = 128;

// A schedule (put_schedule): a job of `type` at every time its cron expression names.
//
// `cron` is five fields — minute hour day-of-month month day-of-week — as crontab(5) has them
// (lists, ranges, steps, month and day names, day-of-week 0 or 7 for Sunday, `?` for `*` in the
// day fields, and when both day fields are restricted — neither starts with `*` or `?`, as
// crontab(5) has it, so `*/2` leaves its field unrestricted — a day matching either), or six with a
// seconds field first, or one of
// @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly. The times are wall times
// in `timezone` (an IANA name from the system's tz database, such as "Europe/Paris"): when
// clocks go forward, an occurrence whose wall time does not exist that day runs at the instant
// the gap ends; when they go back, a wall time that comes twice runs once, the first time.
struct ScheduleSpec {
  std::string type;  // a type that exists
  std::string cron;
  std::string timezone = "UTC";
  std::string data = "{}";  // each occurrence's job data: a JSON object
  int64_t priority = 0;     // each occurrence's job priority
  CatchUp catch_up = CatchUp::kOne;
};

// A schedule as stored, with where it stands.
struct ScheduleInfo {
  std::string name;
  ScheduleSpec spec;
  int64_t next_run_ms = 0;  // the next occurrence to enqueue; 0 if the expression names no more
  int64_t last_run_ms = 0;  // the latest occurrence enqueued; 0 if none yet
  std::string last_job_id;  // its job's id ("" if none yet)
  uint64_t enqueued = 0;    // occurrences enqueued since the schedule was created
  uint64_t skipped = 0;     // occurrences its catch_up left out, or whose add failed
  std::string last_error;   // why the latest occurrence could not be enqueued ("" if it was)
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

class Subscription;

struct SubscribeOptions {
  // Keep following the job once it finishes — it may be added again (pending, and on), or be
  // removed — so that the subscription ends only when the job is gone. By default it ends
  // with the finished event.
  bool follow = false;
};

class Jobs {
 public:
  // Starts the background work lazily (on first use of a type). Jobs shares ownership of the
  // store, so the caller may drop its own pointer.
  static Result<std::unique_ptr<Jobs>> open(std::shared_ptr<kv::Store> store,
                                            JobsOptions options = {});
  ~Jobs();
  Jobs(const Jobs&) = delete;
  Jobs& operator=(const Jobs&) = delete;

  // ---- Types ----
  // Creates the type or changes its timeout, keeping its finished_retention. REQUIRES: timeout > 0.
  Status set_type_timeout(std::string_view type, Millis timeout);
  Status set_type_timeout(kv::Transaction& txn, std::string_view type, Millis timeout);
  // kNotFound if the type has no timeout.
  Result<Millis> get_type_timeout(std::string_view type);
  // Creates the type with `settings` (timeout, retention, max_lost_runs, retry policy and
  // max_running; the others are left at their defaults) unless it exists, in one transaction:
  // true if it created it, false if it existed (then nothing changes). For front ends whose
  // protocol creates a queue by naming it (a beanstalkd tube). REQUIRES: settings.timeout > 0;
  // kInvalidArgument naming a setting out of range.
  Result<bool> ensure_type(std::string_view type, const TypeSettings& settings);
  Result<TypeSettings> get_type(std::string_view type);
  Result<TypeSettings> get_type(kv::Transaction& txn, std::string_view type);
  // Removes the type. kNotFound if it has no timeout; kTypeHasJobs (naming how many it has in
  // each state) while it has any job, in any state: without its type a job would escape
  // retention and the counts, and come back when the type did. remove_all_jobs removes them.
  Status clear_type_timeout(std::string_view type);
  // Removes every job of `type` in any state, each as remove() does (every index entry goes,
  // subscribers hear not-found, a running job's worker is halted at its next call), in
  // transactions of at most 256 jobs each (fewer when JobsOptions::max_data_bytes is large),
  // until one finds fewer left than it could take. Returns how many it removed. Not atomic:
  // after an error the batches already committed stay removed (calling again removes the
  // rest); jobs added while it runs may remain; after an unknown commit result (kv.h) the
  // count can miss that batch's jobs. Works whether or not the type exists, so it also removes
  // jobs an older build left behind when it deleted their type.
  Result<uint64_t> remove_all_jobs(std::string_view type);
  Result<std::vector<std::string>> types();
  // Finished jobs of `type` are removed (as remove() does, so subscribers hear not-found) once
  // `retention` has passed since they finished; nullopt keeps them (the default). Every
  // process's activity monitor removes them, about retention/4 (at least 0.25 s, at most 60 s)
  // late at most, jittered. The time a job finished is the finishing machine's wall clock, so
  // clock skew between machines shifts it. Jobs finished by a build older than the finished
  // index (2026-11-30, docs/design/data-model.md) are not found, so not removed. kNotFound if
  // the type has no timeout; REQUIRES: retention > 0.
  Status set_finished_retention(std::string_view type, std::optional<Millis> retention);
  Status set_finished_retention(kv::Transaction& txn, std::string_view type,
                                std::optional<Millis> retention);
  // After `max_lost_runs` runs of a job of `type` are lost in a row — its worker stopped calling
  // update for the type's timeout, or was declared dead (release_worker) — the job is finished
  // with gave_up set, its data as it was, instead of going back to pending: a job that crashes
  // or hangs every worker that takes it stops doing so. A finish resets the count, and so does
  // an add that changes a pending or finished job (an add while it runs only asks for another
  // run). nullopt re-enqueues lost runs for ever (the default). The
  // count of a job already past a new, lower limit is checked at its next lost run. kNotFound if
  // the type has no timeout; REQUIRES: 1 <= max_lost_runs <= kMaxLostRunsLimit.
  Status set_max_lost_runs(std::string_view type, std::optional<uint32_t> max_lost_runs);
  Status set_max_lost_runs(kv::Transaction& txn, std::string_view type,
                           std::optional<uint32_t> max_lost_runs);
  // Sets what the type does with failed attempts (RetryPolicy); jobs already waiting for a
  // retry keep the time they were given. kNotFound if the type has no timeout;
  // kInvalidArgument (validate_retry_policy) for a policy out of range.
  Status set_retry_policy(std::string_view type, const RetryPolicy& policy);
  Status set_retry_policy(kv::Transaction& txn, std::string_view type, const RetryPolicy& policy);
  // Applies every field `change` gives, in one transaction, in the order the struct lists them
  // (so a timeout given creates the type before the rest apply to it), and returns the type's
  // settings as that transaction left them. Each field has its setter's outcomes; after an error
  // the form with its own transaction has changed nothing. With no field given it only reads the
  // type: kNotFound if it has no timeout. kInvalidArgument for paused_until_ms without paused =
  // true.
  Result<TypeSettings> change_type_settings(std::string_view type,
                                            const TypeSettingsChange& change);
  Result<TypeSettings> change_type_settings(kv::Transaction& txn, std::string_view type,
                                            const TypeSettingsChange& change);

  // ---- Flow control ----
  // Each of these is read by every accept of the type in its own transaction, so it holds
  // from the commit that sets it on, in every process sharing the store. kNotFound if the type
  // does not exist.
  //
  // Pauses the type: accepts — waiting ones included — get nothing until resume_type, or until
  // `until_ms` (wall clock) when given; adds are still taken and running jobs go on and end as
  // usual. Pausing a paused type replaces its until_ms.
  Status pause_type(std::string_view type, std::optional<int64_t> until_ms = std::nullopt);
  Status pause_type(kv::Transaction& txn, std::string_view type,
                    std::optional<int64_t> until_ms = std::nullopt);
  // Ends a pause (nothing if not paused) and wakes the type's waiting accepts.
  Status resume_type(std::string_view type);
  Status resume_type(kv::Transaction& txn, std::string_view type);
  // At most `max_running` jobs of the type run at once across the cluster: an accept that
  // would exceed it takes nothing (or fewer), and waits, if it may, until a run ends. nullopt:
  // no limit (the default). Lowering it below what runs now stops accepts until enough end.
  // REQUIRES: 1 <= max_running <= kMaxRunningLimit.
  Status set_max_running(std::string_view type, std::optional<uint32_t> max_running);
  Status set_max_running(kv::Transaction& txn, std::string_view type,
                         std::optional<uint32_t> max_running);
  // At most rate->limit accepts of the type in any window of rate->period (RateLimit), across
  // the cluster; an accept over it takes nothing (or fewer) and waits, if it may, until the
  // window has room. nullopt: no limit (the default). kInvalidArgument (validate_rate_limit).
  Status set_rate_limit(std::string_view type, std::optional<RateLimit> rate);
  Status set_rate_limit(kv::Transaction& txn, std::string_view type, std::optional<RateLimit> rate);
  // At most `max_running` jobs of each group (AddOptions::group) of the type run at once,
  // across the cluster, enforced in the accept transaction like set_max_running; a group at
  // its limit is passed over (its jobs wait, other groups' are taken) until one of its runs
  // ends. nullopt: no limit (the default). 1 gives "one at a time per customer".
  // REQUIRES: 1 <= max_running <= kMaxRunningLimit.
  Status set_max_running_per_group(std::string_view type, std::optional<uint32_t> max_running);
  Status set_max_running_per_group(kv::Transaction& txn, std::string_view type,
                                   std::optional<uint32_t> max_running);
  // The groups of the type that have pending or running jobs, by name, `limit` (1..1000) at a
  // time after `after` (exclusive; "" from the start). Each with its running jobs, its pending
  // ones (counted up to kGroupPendingCountLimit), and when it is next in turn. kNotFound if
  // the type does not exist.
  Result<std::vector<GroupInfo>> groups(std::string_view type, size_t limit = 100,
                                        std::string_view after = "");

  // ---- Schedules ----
  // Creates or replaces the schedule `name` (1..kMaxScheduleNameBytes, the characters of a
  // type name). Every process that runs the scheduler (JobsOptions::run_scheduler) enqueues its
  // occurrences, and each occurrence exactly once however many do: its job's id is
  // occurrence_job_id(name, time), and enqueuing it (an add with IfExists::kKeep, scheduled
  // at the occurrence's time) advances the schedule's next_run_ms in the same transaction.
  // A new schedule's first occurrence is the first after now; a replaced one keeps its counts
  // and never re-enqueues an occurrence at or before its last_run_ms. kInvalidArgument naming
  // the problem (a bad cron expression or one that never matches, an unknown timezone, data that
  // is not a JSON object); kNotFound if spec.type does not exist.
  Result<ScheduleInfo> put_schedule(std::string_view name, const ScheduleSpec& spec);
  // kNotFound if there is no such schedule.
  Result<ScheduleInfo> get_schedule(std::string_view name);
  // Every schedule, by name.
  Result<std::vector<ScheduleInfo>> schedules();
  // Deletes the schedule (jobs it enqueued stay). kNotFound if absent.
  Status remove_schedule(std::string_view name);
  // The first `count` (1..1000) times after `after_ms` that `spec` names, without storing
  // anything: what put_schedule would do, for previews. kInvalidArgument as put_schedule.
  static Result<std::vector<int64_t>> next_runs(const ScheduleSpec& spec, int64_t after_ms,
                                                size_t count);
  // The id of the job an occurrence at `occurrence_ms` of schedule `name` is enqueued as:
  // "<name>@<the time in UTC, ISO 8601 to the second>", e.g. "nightly@2026-12-01T02:00:00Z".
  static std::string occurrence_job_id(std::string_view name, int64_t occurrence_ms);
  // Runs this process's scheduler once, now: enqueues whatever is due. Returns how many
  // occurrences it enqueued. For tools and tests; the scheduler runs by itself otherwise.
  Result<size_t> run_due_schedules();

  // ---- Producers ----
  // new -> pending; pending -> data, time and priority replaced; running -> marked resubmitted
  // (data, data format, group and own timeout unchanged, for this run and the next; time and
  // priority apply to the next run); finished -> pending with `data`.
  // An add that would change nothing writes nothing. A finished job added again starts over:
  // its attempts, errors, result and outcome are cleared. With options.if_exists kKeep, an
  // existing job (in any state) is left as it is and the result says added = false.
  // kNoTimeout if the type has no timeout (does not exist).
  Result<AddResult> add(std::string_view type, std::string_view id, std::string_view data,
                        AddOptions options = {});
  // add() for a caller that must not block, such as an event loop: `done` gets add's outcome,
  // on this thread or later on another. On a store that is nonblocking() (LMDB) this thread is
  // never held up by a commit (kv::run_async); on one that replays_bodies() (etcd with
  // EtcdOptions::async_transactions) it is held up by no call to the store either, and `done`
  // comes on the store's threads; elsewhere it blocks like add. `done` must not block (a
  // blocking commit there fails, kv.h). REQUIRES: this Jobs outlives the call to `done`.
  void add_async(std::string_view type, std::string_view id, std::string_view data,
                 AddOptions options, std::function<void(Result<AddResult>)> done);
  Result<AddResult> add(kv::Transaction& txn, std::string_view type, std::string_view id,
                        std::string_view data, AddOptions options = {});
  // add() of every job of `jobs` (1..kMaxAddMany, in order; a repeated id is added twice, the
  // later add seeing the earlier) in one transaction: all of them or none. Like add, a retry
  // after an unknown commit result recognises its own earlier commit, so a job accepted since
  // is not marked resubmitted (it runs once). kInvalidArgument, naming the job, if any input is
  // bad; kNoTimeout if the type has no timeout. Each job's options.if_exists applies to it.
  Result<AddManyResult> add_many(std::string_view type, const std::vector<NewJob>& jobs);
  // add_many() for a caller that must not block, like add_async.
  void add_many_async(std::string_view type, std::vector<NewJob> jobs,
                      std::function<void(Result<AddManyResult>)> done);
  Result<AddManyResult> add_many(kv::Transaction& txn, std::string_view type,
                                 const std::vector<NewJob>& jobs);
  // A finished job (any outcome) -> pending at options' time and priority, with its attempts
  // starting over; its data stays, its result and outcome are cleared, its errors are kept (a
  // rerun dead job shows why it died). kWrongState if the job is not finished; kNotFound if
  // absent. A retry after an unknown commit result that finds its own rerun applied succeeds.
  Status rerun(std::string_view type, std::string_view id, const RerunOptions& options = {});
  Status rerun(kv::Transaction& txn, std::string_view type, std::string_view id,
               const RerunOptions& options = {});
  // rerun() of every finished job of `type` that ended with `outcome` (kDead, or kCancelled),
  // in transactions of at most 256 jobs, until one finds fewer left; returns how many. Not
  // atomic, like remove_all_jobs. kNotFound if the type does not exist; kInvalidArgument for
  // kNone or kSucceeded (rerun those one by one: they are not indexed by outcome).
  Result<uint64_t> rerun_all(std::string_view type, Outcome outcome = Outcome::kDead);
  // rerun() of at most `limit` (1..1000) finished jobs of `type` that ended with `outcome` (and
  // at most as many as one of rerun_all's transactions takes: 128 with the default
  // max_data_bytes), in one transaction, in the order rerun_all takes them; returns how many.
  // Each counts a kick (JobInfo::kicks). kNotFound if the type does not exist;
  // kInvalidArgument as rerun_all.
  Result<uint64_t> rerun_some(std::string_view type, Outcome outcome, size_t limit);
  // A pending job gets a new scheduled time and/or priority (its data, attempts and errors
  // stay). kWrongState if it is not pending; kNotFound if absent.
  Status reschedule(std::string_view type, std::string_view id, const RescheduleOptions& options);
  // Makes at most `limit` (1..1000) pending jobs of `type` that are not yet due due now, those
  // due soonest first, in one transaction; returns how many. Each counts a kick
  // (JobInfo::kicks). kNotFound if the type does not exist.
  Result<uint64_t> make_due(std::string_view type, size_t limit);
  // beanstalkd's `kick <limit>`: reruns up to `limit` dead jobs of `type` (rerun_some) or, when
  // it has none, makes up to `limit` pending jobs not yet due due now (make_due), those due
  // soonest first; returns how many it moved (0 for a limit of 0). In as many transactions of
  // at most 1000 jobs (fewer for dead ones, as rerun_some) as it takes, so not atomic: after
  // an error the batches already committed stay moved. Each counts a kick on its job.
  // kNotFound if the type does not exist.
  Result<uint64_t> kick(std::string_view type, uint64_t limit);
  // beanstalkd's `kick-job`: a dead job is rerun (as rerun), a pending job not yet due is made
  // due now (its priority kept), in one transaction; either counts a kick on it. kWrongState
  // for a job that is due, running, or finished otherwise than dead; kNotFound if absent. A
  // retry after an unknown commit result that finds its own kick applied succeeds.
  Status kick_job(std::string_view type, std::string_view id);
  // A pending or running job -> finished with outcome kCancelled; a running job's worker is
  // halted at its next call, and its run counts as neither lost nor failed. kWrongState if it
  // is already finished; kNotFound if absent.
  Status cancel(std::string_view type, std::string_view id);
  Status cancel(kv::Transaction& txn, std::string_view type, std::string_view id);
  // Deletes the job in any state; a running worker is halted at its next call. kNotFound if
  // absent at the first attempt (a retry that finds it gone reports success).
  Status remove(std::string_view type, std::string_view id);
  Status remove(kv::Transaction& txn, std::string_view type, std::string_view id);
  Status remove(std::string_view type, std::string_view id, const RemoveOptions& options);
  // The job, by its id alone, of a job added with AddOptions::global_id: its type. kNotFound if
  // no such job exists (any more).
  Result<std::string> type_of(std::string_view id);
  // A number no call of any process sharing the store has returned or will return, for front
  // ends that name jobs by number (beanstalkd's ids; use its decimal form with global_id).
  // Taken in blocks from one counter key, so it costs a store transaction once per block, not
  // per call, and two processes do not contend on it per job; increasing within a process,
  // not across processes. Numbers start at 1.
  Result<uint64_t> next_job_number();
  // The job `which` names in `type` (Peek), as get() shows it. kNotFound if there is none, or
  // the type does not exist (the message says which).
  Result<JobInfo> peek(std::string_view type, Peek which);
  // kNotFound if absent.
  Result<JobInfo> get(std::string_view type, std::string_view id);
  Result<JobInfo> get(kv::Transaction& txn, std::string_view type, std::string_view id);
  // Jobs in id order, a page at a time. kNotFound if the type does not exist.
  Result<JobPage> list(std::string_view type, const ListOptions& options = {});
  // Pending jobs due by options.max_scheduled_time_ms, counting at most options.limit.
  // kNotFound if the type does not exist. For a type that had jobs with a group, counting
  // walks its groups: a read or two per group and priority (O(groups)); count() likewise for
  // `scheduled`.
  Result<uint64_t> pending_count(std::string_view type, const PendingCountOptions& options = {});

  // Pending (due or not), running and finished jobs of `type`, each counted up to `limit`,
  // from the indexes (not counting jobs finished by a build older than the finished index,
  // 2026-11-30). For dashboards and metrics. kNotFound if the type does not exist.
  struct StateCounts {
    uint64_t pending = 0;    // scheduled + due
    uint64_t scheduled = 0;  // pending, not yet due
    uint64_t running = 0;
    uint64_t finished = 0;  // of which:
    uint64_t dead = 0;
    uint64_t cancelled = 0;
  };
  Result<StateCounts> count(std::string_view type, size_t limit = 100'000);

  // ---- Workers ----
  // Order: every accept call takes the due jobs of the best (lowest) priority first. Within a
  // priority, an accept's transaction takes, on its first try, the first due jobs in scheduled
  // time (then id) order, passing over those that other accepts of this process (accept_any
  // and finish_and_accept included) are taking at that moment — so one consumer, or one
  // process's waiting accepts (served in arrival order), get the due jobs of a priority in
  // exactly that order, and concurrent accepts of one process stay near it (16 threads: mean
  // displacement 1-2 places). A retried try (after a conflict with an accept of another
  // process, or another retryable failure) picks at random among the first
  // JobsOptions::accept_spread due jobs of that priority instead, so that the acceptors that
  // collided rarely collide again; a job can then be handed out before up to
  // accept_spread - 1 that were due before it (bench/accept_order measures it:
  // docs/performance.md). Priorities are never inverted among jobs due at the look.
  //
  // Passing over is a hint: an accept whose look finds every due job it read being taken by
  // other accepts here looks again a moment later (kv::run's backoff), so it is never told
  // that nothing is due, nor waits for a new job, while their commits may yet fail.
  // (finish_and_accept's look without a wait is the exception: it gives nullopt, as it does
  // when accepts wait here.)
  //
  // Groups (AddOptions::group): a group stands in line as one entry, at the priority of its
  // first pending job (by priority, then scheduled time) and at its turn: that job's scheduled
  // time, or the time a job of the group was last accepted if later. So a group just served
  // goes to the back of its priority's line, behind every group (and every job without a
  // group) that was due before, and one group with a million jobs takes one turn in each
  // round. Jobs without a group keep their place by scheduled time, and each accept takes the
  // better of the first job without a group and the first group in turn — by priority, then
  // by scheduled time against turn (on a tie, the job without a group). Within a priority,
  // groups are taken in turn order as jobs are in time order above (at random among the first
  // accept_spread when spread). A group at max_running_per_group is passed over until one of
  // its runs ends. One group's job not yet due holds back the group's due jobs of a worse
  // priority until it is due (a group has one place in line, that of its first job).
  //
  // Hands one due job to the caller with a fresh lock. Waits (on a store watch, never polling)
  // until one is due or options.timeout passes — a deadline that wake-ups do not restart —
  // then kDeadlineExceeded. A delayed job wakes the waiter when it becomes due. kNotFound if
  // the type does not exist — checked when nothing is due, before waiting, as are all the
  // accept calls below. A type can only be deleted once it has no jobs, so an accept waiting
  // when its type is deleted waits out its timeout (kDeadlineExceeded) unless the type is
  // created again and gets a due job first; the next accept then gets kNotFound.
  Result<Job> accept(std::string_view type, const AcceptOptions& options = {});
  // The same without a blocked thread: `done` is called exactly once — at once (on this thread)
  // when the input is bad, options.timeout is 0, or a job is due and no other accept of the
  // type waits in this process; otherwise later, from the jobs layer's acceptor thread (it must
  // not block). On a store that is nonblocking() (LMDB), an accept with a timeout never blocks
  // this thread: its own look commits asynchronously (kv::run_async), so `done` may then come
  // from the thread that settles that commit, which it must not block either. Any number of accepts
  // may wait this way; per type they are served in arrival order (a new accept queues behind those
  // already waiting), and a burst of adds reaches all waiters with the same options in one
  // transaction. Returns a ticket for cancel_accept (0 if `done` has already been called; a ticket
  // may also be returned for an accept whose `done` is under way, and cancelling it then does
  // nothing).
  uint64_t accept_async(std::string_view type, const AcceptOptions& options,
                        std::function<void(Result<Job>)> done);
  // Ends a waiting accept_async with kCancelled; false if it had already completed.
  bool cancel_accept(uint64_t ticket);
  // accept() from several types at once (1..kMaxAcceptTypes distinct ones): of the jobs due in
  // any of them, the best priority, then the earliest scheduled time (then the first type
  // given); each type's flow control and groups decide its own candidates as accept's do.
  // Waits, as accept does, for a job due in any of them. The Job names its type. kNotFound
  // naming the first type that does not exist.
  Result<Job> accept_any(const std::vector<std::string>& types, const AcceptOptions& options = {});
  // accept_async() over several types, as accept_any; cancel_accept takes its ticket.
  uint64_t accept_any_async(const std::vector<std::string>& types, const AcceptOptions& options,
                            std::function<void(Result<Job>)> done);
  // Takes the job `id` of `type` whatever its turn — pending (due or not, flow control
  // notwithstanding) or finished dead (then as a rerun would, its attempts starting over) — with
  // a fresh lock, as accept does (beanstalkd's `reserve-job`). kWrongState if it is running or
  // finished otherwise than dead; kNotFound if absent.
  Result<Job> accept_job(std::string_view type, std::string_view id,
                         const AcceptOptions& options = {});
  // Up to `max_count` due jobs (1..1000), each with its own lock, taken in one transaction:
  // waits like accept for the first (options.timeout), then takes whatever else is due at once.
  Result<std::vector<Job>> accept_many(std::string_view type, size_t max_count,
                                       const AcceptOptions& options = {});
  // Up to `max_count` (1..1000) jobs due now, taken in one transaction, without waiting for any
  // (options.timeout is not used) and without a blocked thread, like add_async: `done` gets them,
  // or kDeadlineExceeded when none was due.
  void accept_due_async(std::string_view type, size_t max_count, const AcceptOptions& options,
                        std::function<void(Result<std::vector<Job>>)> done);
  // accept_many without a blocked thread, for an event loop: up to `max_count` (1..1000) jobs —
  // whatever is due now, taken in one transaction; only when nothing is and options.timeout > 0,
  // a wait for the first like accept_async's, then whatever else is due, taken at once in a
  // second transaction. `done` is called exactly once: with 1..max_count jobs; kDeadlineExceeded
  // when none was due in time; kCancelled after cancel_accept; or another error (once the first
  // job is taken, a failure to take more still hands it over, alone). It never blocks this
  // thread or a commit's where accept_async and accept_due_async do not: on a store that is
  // nonblocking() every look commits asynchronously, and `done` may come from the thread that
  // settles a commit or from the acceptor's; elsewhere the looks block this thread, or one of
  // the jobs layer's own. `done` must not block. Returns a ticket for cancel_accept while the
  // call may wait (cancelling it once `done` is under way does nothing), 0 when it never waits
  // (options.timeout is 0, bad input).
  uint64_t accept_batch_async(std::string_view type, size_t max_count, const AcceptOptions& options,
                              std::function<void(Result<std::vector<Job>>)> done);
  // One non-blocking attempt inside the caller's transaction; kNotFound when nothing is due or
  // the type does not exist (the message says which).
  Result<Job> accept(kv::Transaction& txn, std::string_view type,
                     const AcceptOptions& options = {});
  // Heartbeat, optionally recording progress or replacing the data. kFailedPrecondition
  // ("halt") if fenced out.
  Result<UpdateResult> update(Job& job, const UpdateOptions& options = {});
  // update() for a caller that must not block, like add_async.
  void update_async(Job job, UpdateOptions options, std::function<void(Result<UpdateResult>)> done);
  Result<UpdateResult> update(kv::Transaction& txn, Job& job, const UpdateOptions& options = {});
  // update(job, {.data = data}): the couch_jobs form, which replaces the job's data.
  Result<UpdateResult> update(Job& job, std::optional<std::string_view> data);
  Result<UpdateResult> update(kv::Transaction& txn, Job& job, std::optional<std::string_view> data);
  // running -> finished (outcome kSucceeded) with options.result, or -> pending if resubmitted
  // (then its attempts start over: the add that resubmitted it asked for a new run).
  // Finishing again with the same lock after an unknown commit result succeeds.
  Status finish(Job& job, const FinishOptions& options = {});
  // finish() for a caller that must not block, like add_async.
  void finish_async(Job job, FinishOptions options, std::function<void(Status)> done);
  Status finish(kv::Transaction& txn, Job& job, const FinishOptions& options = {});
  // finish(job, {.data = data}): the couch_jobs form, which replaces the job's data.
  Status finish(Job& job, std::optional<std::string_view> data);
  Status finish(kv::Transaction& txn, Job& job, std::optional<std::string_view> data);
  // finish(job, finish) and, in the same transaction, an accept of the next due job of
  // `types` (job's own type when empty; as accept_any): one commit where a worker would spend
  // two, for a worker that takes jobs one after another. On a store whose transactions run
  // locally (kv::Store::nonblocking(): LMDB), in one transaction while no accept waits on the
  // type in this process. On a store that is not nonblocking (etcd), where workers' combined
  // transactions would conflict over the head of the queue, a call that takes from one type
  // joins that type's waiting accepts, behind those that came first, and the round that serves
  // them commits its finish with the jobs it takes (the finishes of every worker the round
  // serves, and their next jobs, in one commit); a call over several types there commits its
  // finish first, then accepts as accept_any would. On LMDB while accepts of the one type wait
  // here, the finish commits first and what is due is theirs: with no time left the result is
  // nullopt, with time left the call waits behind them. (A waiter whose options exclude the job
  // due, max_priority say, still makes a call with no time left give nullopt.) On a finish
  // error nothing changed and nothing was accepted. Otherwise the job is finished, and the
  // result holds the next job, or nullopt when none was due by accept.timeout (with a timeout
  // > 0 and none due at the commit, it waits after the commit as accept_any does; that wait
  // cannot be cancelled, and any failure of it, a closing Jobs included, gives nullopt too: the
  // finish has committed, so an error would mislead). A type in `types` that does not exist
  // gets kNotFound before anything is done.
  Result<std::optional<Job>> finish_and_accept(Job& job, const FinishOptions& finish,
                                               const std::vector<std::string>& types,
                                               const AcceptOptions& accept);
  // finish_and_accept() for a caller that must not block, like accept_any_async.
  void finish_and_accept_async(Job job, FinishOptions finish, std::vector<std::string> types,
                               AcceptOptions accept,
                               std::function<void(Result<std::optional<Job>>)> done);
  // This attempt failed: the error is kept (JobInfo::errors), and the job goes back to pending
  // at now + options.retry_in or its type's backoff delay for this attempt — or, when
  // options.retry is false or the job has made its type's max_attempts attempts, ends dead
  // (finished, outcome kDead). A resubmitted job goes back to pending for the run the
  // resubmit asked for instead, its attempts starting over. Fenced like finish
  // (kFailedPrecondition); failing again with the same lock after an unknown commit result
  // returns what the first call decided, and counts the attempt once.
  Result<FailResult> fail(Job& job, const FailOptions& options);
  // fail() for a caller that must not block, like add_async.
  void fail_async(Job job, FailOptions options, std::function<void(Result<FailResult>)> done);
  Result<FailResult> fail(kv::Transaction& txn, Job& job, const FailOptions& options);
  // Hands the job back for later: running -> pending at the time options give, with this run
  // not counted as an attempt and no error recorded (for "not now": a rate limit, a resource
  // busy). Fenced like finish.
  Status snooze(Job& job, const SnoozeOptions& options = {});
  // snooze() for a caller that must not block, like add_async.
  void snooze_async(Job job, SnoozeOptions options, std::function<void(Status)> done);
  Status snooze(kv::Transaction& txn, Job& job, const SnoozeOptions& options = {});
  // Asks for another run at options.scheduled_time_ms once this run finishes.
  Status resubmit(Job& job, const ResubmitOptions& options = {});
  // resubmit() for a caller that must not block, like add_async.
  void resubmit_async(Job job, ResubmitOptions options, std::function<void(Status)> done);
  Status resubmit(kv::Transaction& txn, Job& job, const ResubmitOptions& options = {});
  // Deletes the job its worker holds (beanstalkd's `delete` of a reserved job): the run ends
  // and the job is gone, as remove() does. Fenced like finish (kFailedPrecondition); a retry
  // after an unknown commit result that finds the job gone succeeds.
  Status remove(Job& job);
  // remove() for a caller that must not block, like add_async.
  void remove_async(Job job, std::function<void(Status)> done);
  Status remove(kv::Transaction& txn, Job& job);

  // Re-enqueues, at once, every job that the worker `worker` of workers-layer type
  // `worker_type` holds, clearing their locks so its later calls halt. The workers layer calls
  // this (WorkersOptions::on_departure) in the transaction that removes a worker that
  // unregistered or was declared dead. Each such run counts as lost (set_max_lost_runs), so a
  // job past its type's limit is finished with gave_up set instead. Returns how many jobs it
  // took back either way (the form with its own transaction counts, after an unknown commit
  // result, the jobs its applied try took back).
  //
  // Which jobs: those accepted with AcceptOptions{.worker = worker, .worker_type = worker_type},
  // and also those accepted under the bare name `worker` (worker_type ""), which may be this
  // worker's: so are rows written before worker types existed (docs/design/data-model.md). A
  // job accepted as the same id under another worker type is never touched, nor is a job
  // accepted without a worker name. With worker_type "", only bare-name jobs are released.
  // REQUIRES: a non-empty worker; worker_type "" or a valid type name.
  Result<size_t> release_worker(std::string_view worker_type, std::string_view worker);
  Result<size_t> release_worker(kv::Transaction& txn, std::string_view worker_type,
                                std::string_view worker);

  // ---- Watchers ----
  // The job's current state, then every later change (see Subscription). kNotFound if absent.
  Result<std::unique_ptr<Subscription>> subscribe(std::string_view type, std::string_view id,
                                                  SubscribeOptions options = {});

  // Blocks until any of `subscriptions` reports `state` (or, with no state, any event), its
  // job disappears, or `deadline`. Returns the index of the subscription and the event.
  static Result<std::pair<size_t, JobEvent>> wait_any(
      const std::vector<Subscription*>& subscriptions, std::optional<State> state,
      kv::Clock::time_point deadline);

  kv::Store& store() { return *store_; }
  const JobsOptions& options() const { return options_; }

  // Counters of what this process's background work did, for metrics and tests.
  struct Stats {
    uint64_t reenqueued_by_monitor = 0;
    uint64_t monitor_checks = 0;
    // Finished jobs this process's monitor removed. Like reenqueued_by_monitor, it counts what
    // the monitor saw commit: a removal whose commit result was unknown (kv.h) and that did
    // apply is not counted, as its retry finds nothing left to remove.
    uint64_t removed_by_retention = 0;
    // Lost runs this process's monitor ended by giving up (max_lost_runs) rather than
    // re-enqueueing; counted as reenqueued_by_monitor is. Not included in it.
    uint64_t gave_up_by_monitor = 0;
  };
  Stats stats() const;

  // What this process's calls saw happen to the jobs of each type since open, for metrics:
  // counted when the call's commit succeeded (a commit whose result was unknown and that did
  // apply is counted once, by the retry that recognises it). Latencies are wall-clock.
  struct Histogram {
    // Upper bounds in seconds of every bucket but the last (+Inf), shared by all histograms.
    static const std::vector<double>& bounds();
    std::vector<uint64_t> counts;  // per bucket, not cumulative: bounds().size() + 1 of them
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  struct TypeStats {
    uint64_t succeeded = 0;  // finish, not resubmitted
    uint64_t failed = 0;     // fail calls (each a failed attempt)
    uint64_t lost = 0;       // lost runs this process re-enqueued or ended (monitor, departures)
    uint64_t retried = 0;    // failed or lost attempts that went back to pending
    uint64_t dead = 0;       // jobs that ended dead
    uint64_t cancelled = 0;
    uint64_t removed = 0;     // runs ended by their worker removing the job (remove(Job&))
    Histogram queue_latency;  // due (scheduled time) -> accepted, per accept
    Histogram run_time;  // accepted -> ended (finish, fail, snooze, lost, cancel, remove), per run
  };
  std::map<std::string, TypeStats> type_stats() const;

  struct Impl;
  // How the jobs layer's own files (and its white-box tests) reach a Jobs's parts (jobs_impl.h).
  friend Impl& impl_of(Jobs& jobs);

 private:
  Jobs(std::shared_ptr<kv::Store> store, JobsOptions options);
  // release_worker at wall time `now`, adding to `released_ids` (when given) each (type, id)
  // it released.
  Result<size_t> release_worker_at(kv::Transaction& txn, std::string_view worker_type,
                                   std::string_view worker, int64_t now,
                                   std::vector<std::pair<std::string, std::string>>* released_ids);
  // accept_async; `look_async`: its own look must not block this thread.
  uint64_t queue_accept(std::string_view type, const AcceptOptions& options,
                        std::function<void(Result<Job>)> done, bool look_async);
  std::shared_ptr<kv::Store> store_;
  JobsOptions options_;
  std::unique_ptr<Impl> impl_;
};

// A live view of one job. Events arrive in commit order: first the state at subscribe time,
// then each change the notifier observes (a state change, or new data from update while
// running). Changes that land between two observations coalesce into the latest one, but the
// final event is always delivered, after which the subscription ends: not-found (the job is
// gone) always; `finished` too unless it follows (SubscribeOptions::follow).
// Events are taken one way per handle: by next / wait, or pushed by on_event / wait_async.
// Destroying the handle unsubscribes and drops anything queued; after it returns no callback
// of the handle starts (one under way on another thread may still be finishing).
// REQUIRES: a Subscription does not outlive the Jobs that made it.
class Subscription {
 public:
  ~Subscription();
  const std::string& type() const;
  const std::string& id() const;
  // The state at subscribe time.
  const JobEvent& initial() const;
  // The next event; kDeadlineExceeded if none by `deadline`; kNotFound after the final event.
  Result<JobEvent> next(kv::Clock::time_point deadline);
  // Returns once the job is in `state` (any state if none) — at once if the latest event seen
  // (initially the state at subscribe time) is — skipping other events; or when the job is
  // gone (an event with found = false, so callers see why the wait ended); or at `deadline`.
  Result<JobEvent> wait(std::optional<State> state, kv::Clock::time_point deadline);
  // Calls `callback` (from the notifier's thread) whenever an event is queued; used to
  // integrate with event loops. The callback must not block.
  void set_listener(std::function<void()> callback);
  // The event feed, for a caller that must not block: hands `callback` every event next()
  // would return (not initial()), one call at a time and in order, until the final one — those
  // already queued at once on this thread, later ones from the notifier's thread. It must not
  // block. Replaces any listener.
  void on_event(std::function<void(const JobEvent&)> callback);
  // wait() without a blocked thread: `done` is called once, with the first event (the latest
  // seen, initially the state at subscribe time, included) in which the job is in `state`
  // (any if none) or gone — at once on this thread if the latest is — or with kNotFound when
  // the subscription ends without one (it does not follow, and the job finished). Never at a
  // deadline: the caller gives up by destroying the handle. Uses on_event.
  void wait_async(std::optional<State> state, std::function<void(Result<JobEvent>)> done);
  bool ended() const;

  struct State_;
  explicit Subscription(std::shared_ptr<State_> state);

 private:
  friend class Jobs;
  std::shared_ptr<State_> state_;
};

}  // namespace kvq::jobs
