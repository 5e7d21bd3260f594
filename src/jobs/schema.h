// jobs/schema.h — the jobs data model: every key and value the jobs layer stores.
//
// All keys are tuples under JobsOptions::key_prefix (raw bytes) + a subspace id. The subspace
// ids are stored on disk: NEVER RENUMBER, only add.
//
//   (1, type, id)                       -> job row: Tuple(format=1, seq, lock, worker, finished,
//                                          resubmit, scheduled, priority, next_scheduled,
//                                          next_priority, finished_lock, attempts, created,
//                                          updated, data, add_seq[, lost_runs, gave_up
//                                          [, worker_type[, outcome, result|null,
//                                          progress|null, errors, started]]])
//                                          errors: a nested Tuple of Tuple(attempt, at_ms,
//                                          worker, kind, message, details|null), oldest first;
//                                          [, group] (25 fields) only on a job with a group or
//                                          the fields after it; [, timeout_ms|null, data_format,
//                                          global_id, snoozes] (29 fields, group then maybe "")
//                                          only on a job with one of them not at its default;
//                                          [, kicks] (30 fields) only on a job kicked since it
//                                          was added anew, or that has a traceparent;
//                                          [, traceparent] (31 fields, kicks then maybe 0) only
//                                          on a job added with one;
//                                          [, waiting_on, dependencies, has_dependents,
//                                          on_dependency_failure] (35 fields, traceparent then
//                                          maybe "") only on a job added with dependencies or
//                                          that another was added depending on, or with a batch;
//                                          [, batch] (36 fields) only on a job that is a member
//                                          of a batch (AddOptions::batch) and has not ended, or
//                                          that has a window;
//                                          [, debounce_since, unique_until] (38 fields, batch
//                                          then maybe "") only on a job with a debounce or
//                                          unique window (add_windows.h)
//   (2, type, priority, scheduled, id)  -> ""  pending index of jobs WITHOUT a group, in accept
//                                          order
//   (3, type, seq, id)                  -> ""  activity index of running jobs WITHOUT a timeout
//                                          of their own, by commit order
//   (4, type)                           -> Tuple(timeout_ms[, retention_ms|null[, max_lost_runs
//                                          |null[, max_attempts, backoff_base_ms,
//                                          backoff_factor_millionths, backoff_cap_ms,
//                                          jitter_millionths[, paused, paused_until_ms|null,
//                                          max_running|null, rate_limit|null,
//                                          rate_period_ms|null[, max_running_per_group|null,
//                                          has_groups]]]]])
//                                          a type exists while this does; retention_ms only when
//                                          finished jobs expire, max_lost_runs only when lost
//                                          runs give up (null only before a retry policy), the
//                                          retry policy only when not RetryPolicy's defaults
//                                          (Tuple has no double: factor and jitter * 10^6) or
//                                          flow control follows, flow control only when a type
//                                          is paused or limited (flow_control.h), the two of
//                                          groups only once a job of the type had a group or
//                                          its groups are limited
//   (5, type)                           -> random token, rewritten whenever a job of the type
//                                          becomes pending, a group gets back in line, or a run
//                                          of a group with pending jobs ends (accept waiters
//                                          watch it)
//   (6, type)                           -> random token, rewritten on every change of a job of
//                                          the type (the notifier watches it)
//   (7)                                 -> random token, rewritten when a type timeout is set or
//                                          cleared (the activity monitor watches it)
//   (8, worker, type, id)               -> ""  running jobs held by a worker named without a
//                                          worker type (a bare name, and every row written
//                                          before worker types), so a worker that leaves or dies
//                                          can have its jobs re-enqueued
//   (10, worker_type, worker, type, id) -> ""  the same for a worker named with its workers-layer
//                                          type: its id is unique only within that type
//   (9, type, finished_ms, id)          -> ""  finished jobs, in the order they finished (by the
//                                          row's `updated`), so expired ones are found at once
//   (11, type, outcome, id)             -> ""  finished jobs whose outcome is dead or cancelled
//                                          (Outcome as an integer), for rerun_all and the counts
//   (12, name)                          -> schedule row (schedules.cc; format in its encoder)
//   (13)                                -> random token, rewritten when a schedule is put or
//                                          removed (every process's scheduler watches it)
//   (14, type)                          -> the rate window of a type with a rate limit: the
//                                          accept times (ms) within its period, oldest first
//                                          (flow_control.cc)
//   (15, type, group, priority, scheduled, id) -> ""  pending index of the jobs of one group,
//                                          in accept order (group_queue.h)
//   (16, type, priority, in_turn_at, group) -> ""  the queue of groups ("queue of queues", as
//                                          QuiCK's on FoundationDB): one entry per group that
//                                          has pending jobs and is not full, at its first
//                                          pending job's priority; in_turn_at (microseconds) =
//                                          max(that job's scheduled time * 1000,
//                                          last_accept_us), so a group that was just served
//                                          goes to the back of its priority's line
//   (17, type, group)                   -> group row: Tuple(running, queued_priority|null,
//                                          queued_in_turn_at|null, last_accept_us, full):
//                                          where its (16) entry is (null: none), when a job of
//                                          it was last accepted, and whether it holds
//                                          max_running_per_group running jobs (an accept marks
//                                          it; the end of one of its runs clears it)
//   (18, type, timeout_ms, seq, id)     -> ""  activity index of running jobs WITH a timeout of
//                                          their own (AddOptions::timeout): per timeout, in
//                                          commit order, so the monitor stops at the first
//                                          entry not yet idle that long (own_timeouts.h)
//   (19, ...)                           -> small keys of the jobs layer, by a sub-id:
//   (19, 1, id)                         -> type: the job `id` added with AddOptions::global_id
//                                          (its id is unique across types); removed with it
//   (19, 2)                             -> the last job number handed out in a block
//                                          (next_job_number), as a Tuple(int)
//   (19, 3, type)                       -> Tuple(shortest_ms, longest_ms): the span of the own
//                                          timeouts jobs of the type were added with, widened by
//                                          add, cleared with the type; absent while none had
//                                          one, so such a type's monitor reads no (18) key
//   (19, 4, type, id, dep_type, dep_id) -> Tuple(resolved): a dependency the job (type, id) was
//                                          added with (AddOptions::depends_on), and how its edge
//                                          resolved: Outcome as an integer, 0 (kNone) while
//                                          unresolved; written by the add, cleared with the job
//                                          or when it is added anew (dependencies.h)
//   (19, 5, dep_type, dep_id, type, id) -> ""  the reverse of an unresolved (19, 4) edge: the
//                                          jobs waiting on (dep_type, dep_id), read and cleared
//                                          when it ends; one left behind by a dependent removed
//                                          or added anew is passed over then (its (19, 4) edge
//                                          is gone or resolved)
//   (19, 6, type, id)                   -> ""  waiting jobs (I10), for the counts
//   (19, 7, batch)                      -> batch row (batches.cc; format in its encoder): the
//                                          callback, whether sealed and settled, and its
//                                          members' counts by outcome (read and written by every
//                                          member's add and end, and the seal)
//   (19, 8, batch, type, id)            -> ""  the members of the batch that ended dead, for
//                                          the callback's data; written at the member's end
//   (19, 9)                             -> Tuple(fired, skipped): the batches settled in the
//                                          store, for /metrics
//
// in_turn_at and last_accept are microseconds, not milliseconds: a group served twice within
// one millisecond must still go behind the groups served in between, else the group whose name
// sorts first would win every tie of that millisecond and be drained.
//
// Subspace ids 1–19 belong to the jobs layer; the workers layer uses 20–39 of the same prefix.
//
// `seq` is the read version of the transaction that last changed the job. Every such
// transaction reads the job row without snapshot, so seq grows strictly with each change; it
// stands in for FoundationDB's versionstamps, which etcd lacks. Token keys are written blindly
// (never read inside a transaction that writes them), so they add no conflicts.
//
// Invariants, kept by every transaction that changes a job:
//   I1. pending  (lock "" and !finished) without a group <=> exactly one pending-index entry
//       (2), at the row's (priority, scheduled).
//   I2. running  (lock != "")            <=> exactly one activity-index entry, at the row's seq:
//       in (3) without an own timeout, in (18) at the row's timeout with one.
//   I3. finished (finished)              <=> exactly one finished-index entry, at the row's
//       updated (for jobs finished since subspace 9 exists; older ones have none).
//   I4. running with a worker named       <=> exactly one worker-index entry: at (8, worker, type,
//       id) when the row's worker_type is "", else at (10, worker_type, worker, type, id).
//   I5. finished with outcome dead or cancelled <=> exactly one outcome-index entry, at (11,
//       type, outcome, id) (for jobs finished since subspace 11 exists; older dead ones have none).
//   I6. pending with a group              <=> exactly one (15) entry, at (type, group, priority,
//       scheduled, id), and none in (2).
//   I7. a group row (17, type, group) exists <=> the group has pending or running jobs; its
//       `running` is the number of its running jobs.
//   I8. a (16) entry of a group exists     <=> the group has pending jobs and its row is not
//       `full`; it is where the row records (queued_priority, queued_in_turn_at): at the
//       priority of the group's first (15) entry, in turn at max(that entry's scheduled * 1000,
//       last_accept_us).
//   I9. a row with global_id              <=> a (19, 1, id) entry naming its type (kept by
//       save_job, which adds the entry with the row and clears it with the row).
//   I10. waiting (!finished, lock "", waiting_on > 0) <=> exactly one (19, 6, type, id) entry, and
//       none in (2) or (15).
//   I11. a (19, 5, d, j) entry exists for every (19, 4, j, d) edge with resolved 0 whose job j is
//       waiting; the row of d then has has_dependents.
//   I12. a batch's members = its members' rows with that batch (none of them finished) + its
//       counts by outcome; the dead count = its (19, 8) entries (batches.h).
//   I13. debounce_since != 0 only on a pending or waiting job (its run's window) or on a running
//       one marked resubmitted (the next run's window): save_job clears it when a run is
//       accepted and when the job finishes.
// I6–I8 are kept by save_job alone, for every job whose row has a group before or after; a type
// none of whose jobs ever had a group has no key in 15–17 and pays nothing for them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/jobs.h"
#include "kvq/tuple.h"

namespace kvq::jobs {

struct JobRow {
  uint64_t seq = 0;
  std::string lock;
  std::string worker;
  std::string worker_type;  // the workers-layer type `worker` is registered under; "" for none
  bool finished = false;
  bool resubmit = false;
  int64_t scheduled = 0;
  int64_t priority = 0;
  int64_t next_scheduled = 0;  // for the run after this one, when resubmit
  int64_t next_priority = 0;
  // The call that ended the last run a worker ended and that run's lock ("finish:", "fail:" or
  // "snooze:" + lock, held_job.h): a retry of that call after an unknown commit result
  // recognises its own commit by it; another call with the lock halts.
  std::string finished_lock;
  uint32_t attempts = 0;  // JobInfo::attempts
  int64_t created = 0;
  int64_t updated = 0;
  std::string data;
  uint64_t add_seq = 0;    // read version of the add that last changed it: makes add idempotent
  uint32_t lost_runs = 0;  // runs lost in a row since the last add or finish
  bool gave_up = false;    // finished by reaching the type's max_lost_runs (older rows only)
  Outcome outcome = Outcome::kNone;     // once finished
  std::optional<std::string> result;    // finish's result
  std::optional<std::string> progress;  // the latest update's progress, this run
  std::vector<JobError> errors;         // at most kMaxErrorsKept, oldest first
  int64_t started = 0;                  // when the current or last run was accepted
  std::string group;                    // AddOptions::group; "" for none
  std::optional<Millis> timeout;        // AddOptions::timeout: its own; nullopt: its type's
  DataFormat data_format = DataFormat::kJson;
  bool global_id = false;       // AddOptions::global_id: indexed at (19, 1, id) (I9)
  uint32_t snoozes = 0;         // JobInfo::snoozes
  uint32_t kicks = 0;           // JobInfo::kicks
  std::string traceparent;      // AddOptions::traceparent; "" for none
  uint32_t waiting_on = 0;      // unresolved dependencies: waiting while not 0 (I10)
  uint32_t dependencies = 0;    // the dependencies it was added with ((19, 4) edges)
  bool has_dependents = false;  // a job was added depending on it: its end reads (19, 5)
  OnDependencyFailure on_dependency_failure = OnDependencyFailure::kCancel;
  // The batch (AddOptions::batch) whose member the job is until it ends; "" for none. Cleared
  // by the end that counts it (I12), so that a rerun is no member and is not counted again.
  std::string batch;
  // Its windows (kvq/add_windows.h, I13): the first add of its open debounce window (0: none),
  // and the end of its unique window (0: none opened; one past ends nothing).
  int64_t debounce_since = 0;
  int64_t unique_until = 0;
};

// A group's row, the value of (17, type, group).
struct GroupRow {
  uint32_t running = 0;
  // Where its queue-of-groups entry (16) is: (priority, in_turn_at in microseconds).
  std::optional<std::pair<int64_t, int64_t>> queued;
  int64_t last_accept_us = 0;
  bool full = false;
  friend bool operator==(const GroupRow&, const GroupRow&) = default;
};
std::string encode_group(const GroupRow& row);
Result<GroupRow> decode_group(std::string_view bytes);

// An index whose keys are a prefix + (priority, time, name), in accept order: the pending index
// of jobs without a group (2, type) and of one group (15, type, group) (time: scheduled ms,
// name: the job's id), and the queue of groups (16, type) (time: in_turn_at µs, name: the
// group).
class OrderedIndex {
 public:
  explicit OrderedIndex(Subspace space) : space_(std::move(space)) {}
  std::string key(int64_t priority, int64_t time, std::string_view name) const;
  std::pair<std::string, std::string> all() const { return space_.range(); }
  // Entries of one priority whose time is at most `max_time`.
  std::pair<std::string, std::string> due(int64_t priority, int64_t max_time) const;
  // The first key of priority `priority` and above.
  std::string from_priority(int64_t priority) const;
  struct Entry {
    int64_t priority;
    int64_t time;
    std::string name;
  };
  // kInvalidArgument for a key of another shape.
  Result<Entry> parse(std::string_view key) const;

 private:
  Subspace space_;
};

// The one place a job's state is derived from its stored fields.
State state_of(const JobRow& row);

// lost_runs and gave_up are written only when not 0/false or a worker_type follows them, and
// worker_type only when not "" or the fields of outcomes follow it; a row without them decodes
// with 0, false and "". The fields of outcomes (outcome .. started) are written only when one
// differs from what a row without them decodes to: outcome kNone for an unfinished row,
// kDead for a finished one that gave up, kSucceeded for another finished one; no result,
// progress or errors; started 0. A group is written, as a 25th field, only when not "" or the
// four fields of the beanstalkd protocol follow (timeout, data_format, global_id, snoozes), which
// are written only when one is not at its default; kicks, as a 30th, only when not 0 or a
// traceparent follows; a traceparent, as a 31st, only when not "". So rows of 16, 18, 19, 24,
// 25, 29, 30 and 31 fields decode, and a row of the older kinds encodes byte for byte as
// before.
std::string encode_row(const JobRow& row);
Result<JobRow> decode_row(std::string_view bytes);

// A type's settings, the value of (4, type). Settings left at their defaults are not written,
// so a type with only a timeout encodes exactly as before retention existed.
std::string encode_type(const TypeSettings& settings);
Result<TypeSettings> decode_type(std::string_view bytes);

class Keys {
 public:
  explicit Keys(std::string prefix);

  std::string job(std::string_view type, std::string_view id) const;
  std::pair<std::string, std::string> jobs_of(std::string_view type) const;
  std::string pending(std::string_view type, int64_t priority, int64_t scheduled,
                      std::string_view id) const;
  std::pair<std::string, std::string> pending_of(std::string_view type) const;
  // Pending entries of one priority scheduled at or before `max_scheduled`.
  std::pair<std::string, std::string> pending_due(std::string_view type, int64_t priority,
                                                  int64_t max_scheduled) const;
  // The first key of priority `priority` and above.
  std::string pending_from_priority(std::string_view type, int64_t priority) const;
  std::string activity(std::string_view type, uint64_t seq, std::string_view id) const;
  // Activity entries with seq < `below`.
  std::pair<std::string, std::string> activity_before(std::string_view type, uint64_t below) const;
  std::pair<std::string, std::string> activity_at(std::string_view type, uint64_t seq) const;
  // The activity index of running jobs with an own timeout (18): an entry, the entries of one
  // timeout with seq < `below`, the entries of one timeout at `seq`, every entry of the type,
  // and the first key of timeouts of at least `timeout_ms`.
  std::string own_activity(std::string_view type, int64_t timeout_ms, uint64_t seq,
                           std::string_view id) const;
  std::pair<std::string, std::string> own_activity_before(std::string_view type, int64_t timeout_ms,
                                                          uint64_t below) const;
  std::pair<std::string, std::string> own_activity_at(std::string_view type, int64_t timeout_ms,
                                                      uint64_t seq) const;
  std::pair<std::string, std::string> own_activity_of(std::string_view type) const;
  std::string own_activity_from(std::string_view type, int64_t timeout_ms) const;
  // (19, 1, id), (19, 2) and (19, 3, type) (schema above), and every (19, 3) key.
  std::string global_id(std::string_view id) const;
  std::string job_numbers() const;
  std::string own_timeouts(std::string_view type) const;
  std::pair<std::string, std::string> all_own_timeouts() const;
  Result<std::string> parse_own_timeouts_type(std::string_view key) const;
  std::string timeout(std::string_view type) const;
  std::pair<std::string, std::string> timeouts() const;
  std::string pending_token(std::string_view type) const;
  std::string activity_token(std::string_view type) const;
  std::string types_token() const;
  // The worker-index entry of a job held by (worker_type, worker): subspace 8 for worker_type
  // "", 10 otherwise (I4).
  std::string held_by(std::string_view worker_type, std::string_view worker, std::string_view type,
                      std::string_view id) const;
  // Every entry of jobs held by exactly (worker_type, worker).
  std::pair<std::string, std::string> held_by(std::string_view worker_type,
                                              std::string_view worker) const;
  std::string finished(std::string_view type, int64_t finished_ms, std::string_view id) const;
  // Finished entries with finished_ms < `below`.
  std::pair<std::string, std::string> finished_before(std::string_view type, int64_t below) const;
  // The outcome-index entry of a finished job (I5), and every entry of one outcome.
  std::string ended(std::string_view type, Outcome outcome, std::string_view id) const;
  std::pair<std::string, std::string> ended_with(std::string_view type, Outcome outcome) const;
  std::string schedule(std::string_view name) const;
  std::pair<std::string, std::string> schedules() const;
  std::string schedules_token() const;
  // The name of a schedule key.
  Result<std::string> parse_schedule_name(std::string_view key) const;
  std::string rate_window(std::string_view type) const;
  // Dependencies (19, 4–6): an edge from a dependent to a dependency, every edge of a
  // dependent, the reverse entry of an unresolved edge, every reverse entry of a dependency,
  // a waiting job's entry and every one of a type; and the parts of such keys.
  std::string dependency(std::string_view type, std::string_view id, std::string_view dep_type,
                         std::string_view dep_id) const;
  std::pair<std::string, std::string> dependencies_of(std::string_view type,
                                                      std::string_view id) const;
  std::string dependent(std::string_view dep_type, std::string_view dep_id, std::string_view type,
                        std::string_view id) const;
  std::pair<std::string, std::string> dependents_of(std::string_view dep_type,
                                                    std::string_view dep_id) const;
  std::string waiting(std::string_view type, std::string_view id) const;
  std::pair<std::string, std::string> waiting_of(std::string_view type) const;
  // The last two elements of a (19, 4) or (19, 5) key: the (type, id) the edge points to.
  Result<std::pair<std::string, std::string>> parse_edge_end(std::string_view key) const;
  // Batches (19, 7–9): a batch's row, a dead member's entry and every one of a batch, the
  // store's totals of settled batches; and the (type, id) of a dead member's entry.
  std::string batch(std::string_view batch) const;
  std::string batch_dead(std::string_view batch, std::string_view type, std::string_view id) const;
  std::pair<std::string, std::string> batch_dead_of(std::string_view batch) const;
  std::string batch_totals() const;
  Result<std::pair<std::string, std::string>> parse_batch_dead(std::string_view key) const;

  // The pending index of the type's jobs without a group (2), of one group's (15), and the
  // queue of groups (16).
  OrderedIndex pending_index(std::string_view type) const;
  OrderedIndex group_pending_index(std::string_view type, std::string_view group) const;
  OrderedIndex group_queue(std::string_view type) const;
  // Every (15) entry of the type, of all its groups.
  std::pair<std::string, std::string> group_pending_of(std::string_view type) const;
  // The group row (17) of a group, every group row of a type, and the group of such a key.
  std::string group(std::string_view type, std::string_view group) const;
  std::pair<std::string, std::string> groups_of(std::string_view type) const;
  Result<std::string> parse_group_name(std::string_view key) const;

  // Decoders for index keys; kInvalidArgument for a key of another shape.
  struct PendingEntry {
    int64_t priority;
    int64_t scheduled;
    std::string id;
  };
  Result<PendingEntry> parse_pending(std::string_view key) const;
  struct ActivityEntry {
    uint64_t seq;
    std::string id;
  };
  Result<ActivityEntry> parse_activity(std::string_view key) const;
  struct OwnActivityEntry {
    int64_t timeout_ms;
    uint64_t seq;
    std::string id;
  };
  Result<OwnActivityEntry> parse_own_activity(std::string_view key) const;
  struct FinishedEntry {
    int64_t finished_ms;
    std::string id;
  };
  Result<FinishedEntry> parse_finished(std::string_view key) const;
  Result<std::string> parse_timeout_type(std::string_view key) const;
  Result<std::string> parse_job_id(std::string_view key) const;
  // The id of an outcome-index key.
  Result<std::string> parse_ended_id(std::string_view key) const;
  // (type, id) of a worker-index key, of either subspace.
  Result<std::pair<std::string, std::string>> parse_held(std::string_view key) const;

 private:
  enum Space : int64_t {
    kJobs = 1,
    kPending = 2,
    kActivity = 3,
    kTimeouts = 4,
    kPendingToken = 5,
    kActivityToken = 6,
    kTypesToken = 7,
    kHeldBy = 8,
    kFinished = 9,
    kHeldByTyped = 10,
    kEnded = 11,
    kSchedules = 12,
    kSchedulesToken = 13,
    kRateWindows = 14,
    kGroupPending = 15,
    kGroupQueue = 16,
    kGroups = 17,
    kOwnActivity = 18,
    kMisc = 19,
  };
  // Sub-ids of kMisc: NEVER RENUMBER either.
  enum Misc : int64_t {
    kGlobalIds = 1,
    kJobNumbers = 2,
    kOwnTimeouts = 3,
    kDependencies = 4,
    kDependents = 5,
    kWaiting = 6,
    kBatches = 7,
    kBatchDead = 8,
    kBatchTotals = 9,
  };
  static constexpr int64_t kLastSpace = kMisc;
  static constexpr int64_t kLastMisc = kBatchTotals;
  const Subspace& misc(Misc m) const { return misc_[m]; }
  const Subspace& space(Space s) const { return spaces_[s]; }

  Subspace root_;
  // Every subspace's prefix, packed once: each key is one of them plus its own elements, and
  // packing the prefix again for every key was about 5% of an in-process job's instructions.
  std::array<Subspace, kLastSpace + 1> spaces_;  // [0] unused
  std::array<Subspace, kLastMisc + 1> misc_;     // [0] unused
};

}  // namespace kvq::jobs
