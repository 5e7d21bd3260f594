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
//   add with depends_on ──► waiting ──last dependency ended──► pending (kvq/workflows.h)
//                              └── a dependency failed (on_dependency_failure cancel) ──►
//                                  finished (cancelled)
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
//                     worker call checks the job's lock in its own transaction and fails with
//                     kFailedPrecondition ("halt") once the worker has been fenced out — the
//                     job was removed, re-enqueued by the activity monitor, or accepted by
//                     someone else — so a worker that writes its own results in the same
//                     transaction as update or finish never commits after being fenced out.
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
// Limits: kvq/job_types.h. Thread-safety: a Jobs is safe to use from many threads; a
// Subscription handle is used by one thread at a time.
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

#include "kvq/job_stats.h"
#include "kvq/job_types.h"
#include "kvq/kv.h"
#include "kvq/status.h"
#include "kvq/subscription.h"

namespace kvq::jobs {

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
  // Pause or resume the schedule (ScheduleInfo::paused says what that means), returning it as
  // the call left it; either call on a schedule already so changes nothing. kNotFound if absent.
  Result<ScheduleInfo> pause_schedule(std::string_view name);
  Result<ScheduleInfo> resume_schedule(std::string_view name);
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
  // options.debounce and options.unique_for: kvq/add_windows.h. A retry after an unknown commit
  // result answers as the attempt that committed did.
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
  // Workflows: a job's dependencies, batches with a callback (kvq/workflows.h says what each
  // call promises).
  Result<std::vector<DependencyInfo>> dependencies(std::string_view type, std::string_view id);
  Result<std::vector<DependencyInfo>> dependencies(kv::Transaction& txn, std::string_view type,
                                                   std::string_view id);
  Result<BatchInfo> put_batch(std::string_view id, const BatchSpec& spec);
  Result<BatchInfo> put_batch(kv::Transaction& txn, std::string_view id, const BatchSpec& spec);
  Result<BatchInfo> seal_batch(std::string_view id);
  Result<BatchInfo> seal_batch(kv::Transaction& txn, std::string_view id);
  Result<BatchInfo> batch(std::string_view id);
  Result<BatchInfo> batch(kv::Transaction& txn, std::string_view id);
  Result<BatchTotals> batch_totals();
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
  using StateCounts = jobs::StateCounts;  // kvq/job_stats.h
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
  // Finishing again with the same lock after an unknown commit result succeeds. Once a run has
  // ended (finish, fail or snooze), its lock passes only a retry of that same call: any other
  // call with it is kFailedPrecondition ("halt") and changes nothing.
  Status finish(Job& job, const FinishOptions& options = {});
  // finish() for a caller that must not block, like add_async.
  void finish_async(Job job, FinishOptions options, std::function<void(Status)> done);
  Status finish(kv::Transaction& txn, Job& job, const FinishOptions& options = {});
  // finish(job, {.data = data}): the couch_jobs form, which replaces the job's data.
  Status finish(Job& job, std::optional<std::string_view> data);
  Status finish(kv::Transaction& txn, Job& job, std::optional<std::string_view> data);
  // finish() of 1..kMaxFinishMany held jobs (any types, none twice) in one transaction, with
  // `options` empty or one per job. Each job's outcome is at its index: OK, or the error
  // finish() would give it alone (kFailedPrecondition once fenced out, kNotFound once removed),
  // which leaves the others to commit. Bad input (kInvalidArgument) or a store error: nothing.
  Result<std::vector<Status>> finish_many(const std::vector<Job>& jobs,
                                          const std::vector<FinishOptions>& options = {});
  // finish_many() for a caller that must not block, like add_async.
  void finish_many_async(std::vector<Job> jobs, std::vector<FinishOptions> options,
                         std::function<void(Result<std::vector<Status>>)> done);
  // finish(job, finish) and an accept of the next due job of `types` (job's own when empty; as
  // accept_any): one commit where a worker would spend two. In one transaction on LMDB
  // (nonblocking()) while no accept of the type waits here; while some do, the finish commits
  // first and what is due is theirs (no time left: nullopt; time left: the call waits behind
  // them). On etcd a call of one type joins that type's waiting accepts, and the round that
  // serves them commits every served worker's finish with its next job; a call over several
  // types commits its finish first, then accepts. A finish error changes and accepts nothing;
  // a type of `types` that does not exist is kNotFound first. Otherwise the job is finished and
  // the result is the next job, or nullopt when none was due by accept.timeout (a wait after
  // the commit, as accept_any's, that cannot be cancelled: any failure of it gives nullopt).
  Result<std::optional<Job>> finish_and_accept(Job& job, const FinishOptions& finish,
                                               const std::vector<std::string>& types,
                                               const AcceptOptions& accept);
  // finish_and_accept() for a caller that must not block, like accept_any_async. Returns a
  // ticket for cancel_accept (0 when accept.timeout is 0: there is no wait to cancel), which
  // ends the wait for the next job, whenever it comes: the finish commits or fails all the same
  // (it is the worker's), and `done` then gets the finish's error or nullopt — a job the call
  // took meanwhile goes back to pending, never left accepted for nobody.
  uint64_t finish_and_accept_async(Job job, FinishOptions finish, std::vector<std::string> types,
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
  // busy). Fenced like finish; snoozing again with the same lock after an unknown commit
  // result succeeds.
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

  // Counters of what this process's background work did (kvq/job_stats.h).
  using Stats = jobs::Stats;
  Stats stats() const;

  // What this process's calls saw happen to each type's jobs since open (kvq/job_stats.h).
  using Histogram = jobs::Histogram;
  using TypeStats = jobs::TypeStats;
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
  // `(this->*call)(txn, args...)` in a transaction of its own, retried as options_.retry says:
  // how a call above that takes a transaction is offered without one (defined in jobs_impl.h).
  template <typename R, typename... Params, typename... Args>
  R in_own_transaction(R (Jobs::*call)(kv::Transaction&, Params...), Args&&... args);
  // accept_async; `look_async`: its own look must not block this thread. `reserved`: a ticket
  // of the accept waiters' (AcceptWaiters::reserve) the caller handed out already, which this
  // accept then uses (0: none).
  uint64_t queue_accept(std::string_view type, const AcceptOptions& options,
                        std::function<void(Result<Job>)> done, bool look_async,
                        uint64_t reserved = 0);
  // accept_any_async, with queue_accept's `reserved`.
  uint64_t queue_accept_any(const std::vector<std::string>& types, const AcceptOptions& options,
                            std::function<void(Result<Job>)> done, uint64_t reserved);
  std::shared_ptr<kv::Store> store_;
  JobsOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvq::jobs
