// kvq/job_types.h — the values the jobs layer (kvq/jobs.h) takes and gives: job states and
// outcomes, the options of each call, a type's settings and retry policy, jobs as workers and
// producers see them, and schedules. Plain values, no behaviour beyond parsing and validating
// them; the contract of each call is in kvq/jobs.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/add_windows.h"
#include "kvq/kv.h"
#include "kvq/status.h"
#include "kvq/workflows.h"

namespace kvq::jobs {

using Millis = std::chrono::milliseconds;

// Limits: type 1..200 bytes, id 1..256 bytes (any bytes but NUL); data a JSON object of at most
// JobsOptions::max_data_bytes (default 256 KiB) once compacted, or as many bytes of a job whose
// data format is bytes (AddOptions::data_format). Violations get kInvalidArgument and change
// nothing. Every key of a job must also fit in kv::kMaxKeySize (511) bytes with the key prefix:
// a 200-byte type with a 256-byte id does, but the longest type, group and id together, or the
// longest worker name with them, do not, and the call that would write such a key fails with
// kInvalidArgument at its commit, changing nothing.

// 200: beanstalkd's longest tube name, which a type of the same name holds (docs/beanstalk.md).
inline constexpr size_t kMaxTypeBytes = 200;
inline constexpr size_t kMaxIdBytes = 256;

// kWaiting: not yet pending, for a dependency has not ended (kvq/workflows.h); never accepted.
enum class State { kPending, kRunning, kFinished, kWaiting };
std::string_view state_name(State state);  // "pending", "running", "finished", "waiting"
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
  // The producer's W3C trace context (util/trace_context.h), kept with the job so that its
  // worker continues the trace: "" for none. The job keeps the traceparent of the add that
  // last set its data (a new job, a pending one changed, a finished one added anew); an add
  // to a running job (a resubmit) and an add that changes nothing leave it as it was.
  // REQUIRES: "" or a valid traceparent (kInvalidArgument otherwise, changing nothing).
  std::string traceparent;
  // Jobs this one waits for (kvq/workflows.h): at most kMaxDependencies, no repeats, not the
  // job itself; each must exist (kNotFound naming the first that does not, changing nothing),
  // unless add_many adds it in the same batch (before or after this job). The job is added
  // waiting until they have ended; one that has ended already resolves at once. Only an add
  // that creates the job, or adds a finished one anew, may give dependencies: on a pending,
  // waiting or running job the add fails with kWrongState (if_exists kKeep keeps it, as ever).
  // A cycle (possible only within one add_many) is refused with kInvalidArgument naming it.
  std::vector<DependencyRef> depends_on;
  OnDependencyFailure on_dependency_failure = OnDependencyFailure::kCancel;
  // The batch (kvq/workflows.h) the job joins: "" for none. It must exist (kNotFound naming
  // it) and be open (kWrongState). Only an add that creates the job or adds a finished one
  // anew joins; on an unended job the add keeps its membership, and fails with kWrongState
  // naming another batch than the job's.
  std::string batch;
  // Debounce the job (kvq/add_windows.h): due at now + delay, a job not yet accepted pushed
  // out so, never past its window's first add + max_delay. REQUIRES: a valid Debounce, no
  // scheduled_time_ms (the debounce sets it) and if_exists kUpdate (kInvalidArgument naming the
  // problem otherwise, changing nothing).
  std::optional<Debounce> debounce;
  // Open a unique window of this long on the id if none is open (kvq/add_windows.h): until it
  // ends every add of the id keeps the job as it is. An open window keeps the job whether or
  // not the add gives unique_for. REQUIRES: 1 ms..kMaxAddWindow.
  std::optional<Millis> unique_for;
};

struct AddResult {
  // False when the job existed and the add kept it as it was: if_exists was kKeep, or the job's
  // unique window was open (then unique_until_ms says until when).
  bool added = true;
  // The end (wall-clock ms) of the job's unique window: the one this add opened
  // (AddOptions::unique_for), or the open one that kept the job; 0 for neither.
  int64_t unique_until_ms = 0;
  // With AddOptions::debounce, an add that was not kept: whether it found the job pending or
  // waiting and debounced it (false: it created the job, added a finished one anew, or
  // resubmitted a running one), and when the run it added or debounced is due (for a running
  // job, its next run's time).
  bool debounced = false;
  int64_t scheduled_time_ms = 0;
};

struct AddManyResult {
  size_t added = 0;               // jobs of the batch added (or changed)
  std::vector<std::string> kept;  // ids kept as they were (if_exists kKeep, a unique window)
};

// One job of an add_many.
struct NewJob {
  std::string id;
  std::string data = "{}";  // a JSON object
  AddOptions options;
};

inline constexpr size_t kMaxAddMany = 1000;
// finish_many takes at most this many jobs.
inline constexpr size_t kMaxFinishMany = 1000;
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
  std::string traceparent;  // AddOptions::traceparent; "" for none
  // Dependencies (kvq/workflows.h): how many it was added with, how many of them it still
  // waits on (state kWaiting while not 0), what it does when one fails, and whether any job
  // was ever added depending on it.
  uint32_t dependencies = 0;
  uint32_t waiting_on = 0;
  OnDependencyFailure on_dependency_failure = OnDependencyFailure::kCancel;
  bool has_dependents = false;
  std::string batch;  // the batch it is a member of until it ends (kvq/workflows.h); "" none
  // Its windows (kvq/add_windows.h): when the first add of its open debounce window came (0:
  // none open), and when its unique window ends or ended (0: none was opened).
  int64_t debounce_since_ms = 0;
  int64_t unique_until_ms = 0;
};

// A dependency of a job as Jobs::dependencies shows it: which job, how its edge resolved, and
// the job as get() shows it now (nullopt once removed).
struct DependencyInfo {
  DependencyRef dependency;
  // kNone while unresolved; otherwise how the dependency had ended when it resolved the edge
  // (kCancelled for one removed before it ended).
  Outcome resolved = Outcome::kNone;
  std::optional<JobInfo> job;
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
  // Which attempt this run is: the job's JobInfo::attempts as the accept left it. 1 for the
  // first run since the job was added (or added anew once finished), rerun, or began the run a
  // resubmit asked for; each failed or lost run counts, a snoozed run does not (nor a take
  // handed back because its waiting caller had gone). 0 in a rebuilt handle.
  uint32_t attempt = 0;
  DataFormat data_format = DataFormat::kJson;
  int64_t priority = 0;
  // The run's activity timeout (the job's own, else its type's at the accept): a run with no
  // update for this long is lost. 0 in a rebuilt handle.
  Millis timeout{0};
  std::string traceparent;  // AddOptions::traceparent of the job; "" for none
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
  std::string traceparent;  // AddOptions::traceparent; "" for none
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
  // Jobs::pause_schedule: no scheduler enqueues an occurrence of it until resume_schedule.
  // Occurrences that come due meanwhile are never enqueued (nor counted as skipped): a resumed
  // schedule goes on from its first occurrence after the resume. put_schedule keeps it paused.
  bool paused = false;
};

struct SubscribeOptions {
  // Keep following the job once it finishes — it may be added again (pending, and on), or be
  // removed — so that the subscription ends only when the job is gone. By default it ends
  // with the finished event.
  bool follow = false;
};

}  // namespace kvq::jobs
