#include "jobs/accept/pending_picks.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "jobs/accept/index_levels.h"
#include "jobs/accept/takes.h"
#include "jobs/flow_control.h"
#include "jobs/group_queue.h"
#include "jobs/job_store.h"
#include "jobs/own_timeouts.h"
#include "util/mutex.h"
#include "util/random.h"
#include "util/secret.h"

namespace kvq::jobs {
namespace {

// A lock is what lets a worker change its job, so it is a secret: 128 random bits from the
// kernel, then the type tag. Rows keep the locks of earlier builds (24 hex digits), which still
// compare as they did.
constexpr size_t kLockBytes = util::kMinSecretBytes;

}  // namespace

Status give_back(kv::Transaction& txn, const Keys& keys, const Job& job) {
  KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, job.type, job.id));
  if (!before || !util::secret_equal(before->lock, job.lock)) return Status::OK();
  JobRow after = *before;
  after.lock.clear();
  after.worker.clear();
  after.worker_type.clear();
  after.progress.reset();
  if (after.attempts > 0) --after.attempts;
  return save_job(txn, keys, job.type, job.id, before, std::move(after));
}

std::string type_tag(std::string_view type) {
  uint32_t h = 2166136261u;  // FNV-1a: a stable tag, not a secret
  for (unsigned char c : type) h = (h ^ c) * 16777619u;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string tag(8, '0');
  for (int i = 7; i >= 0; --i, h >>= 4) tag[i] = kHex[h & 15];
  return tag;
}

std::string new_lock(std::string_view type) {
  return util::secret_hex(kLockBytes) + "-" + type_tag(type);
}

Result<std::optional<Candidate>> peek_candidate(kv::Transaction& txn, const AcceptScope& scope,
                                                std::string_view type, const AcceptOptions& accept,
                                                std::optional<int64_t>* next_due, HeldBack* held) {
  const Keys& keys = scope.keys;
  const int64_t now = now_ms();
  const int64_t max_time = accept.max_scheduled_time_ms.value_or(now);
  KVQ_ASSIGN_OR_RETURN(FlowGate gate, open_flow_gate(txn, keys, type, 1, now));
  auto note_due = [&](std::optional<int64_t> at) {
    if (next_due && at && (!*next_due || *at < **next_due)) *next_due = at;
  };
  if (gate.allowed == 0) {
    if (held) *held = HeldBack{true, gate.full};
    note_due(gate.reopens_ms);
    return std::optional<Candidate>();
  }
  const size_t spread = std::max<size_t>(scope.options.accept_spread, 1);
  DueLevels ungrouped(txn, keys.pending_index(type), max_time, accept.max_priority, 1,
                      2 * kMaxPriorityLevels, kPendingHeadWindow, &scope.local.heads);
  std::optional<DueLevels> groups;
  if (gate.has_groups) {
    groups.emplace(txn, keys.group_queue(type), end_of_ms(max_time), accept.max_priority, spread,
                   2 * kMaxPriorityLevels + 1, ms_to_us(kPendingHeadWindow), &scope.local.heads);
  }
  // The loop of try_accept_many, stopping where it would take: a group found full is marked so
  // (it leaves the queue, as try_accept_many would leave it), and the next in turn is looked at.
  std::optional<Candidate> found;
  size_t full_groups = 0;
  while (!found) {
    KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry* job, ungrouped.head());
    const OrderedIndex::Entry* turn = nullptr;
    if (groups) {
      KVQ_ASSIGN_OR_RETURN(turn, groups->head());
    }
    if (!job && !turn) break;
    if (!turn || (job && !turn_first(*turn, *job))) {
      found = Candidate{job->priority, ms_to_us(job->time)};
      break;
    }
    KVQ_ASSIGN_OR_RETURN(auto row, load_group(txn, keys, type, turn->name));
    if (!row || row->queued != std::pair{turn->priority, turn->time})
      return Internal("queue entry of group '" + turn->name + "' does not match its row");
    const auto& limit = gate.max_running_per_group;
    if (!limit || row->running < *limit) {
      found = Candidate{turn->priority, turn->time};
      break;
    }
    KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry full, groups->take(false));
    KVQ_RETURN_IF_ERROR(mark_group_full(txn, keys, type, full.name, *row));
    if (++full_groups >= spread) {
      note_due(groups->earliest_not_due() ? std::optional(us_to_ms(*groups->earliest_not_due()))
                                          : std::nullopt);
      groups.reset();
    }
  }
  note_due(ungrouped.earliest_not_due());
  if (groups && groups->earliest_not_due()) note_due(us_to_ms(*groups->earliest_not_due()));
  return found;
}

Result<Job> take_named(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                       std::string_view id, const Taker& taker) {
  const Keys& keys = scope.keys;
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
  const std::string named = "job '" + std::string(id) + "' of type '" + std::string(type) + "'";
  if (!row) return NotFound(named + " does not exist");
  const State state = state_of(*row);
  if (state == State::kRunning) return WrongState(named + " is running");
  if (state == State::kWaiting) return WrongState(named + " is waiting on its dependencies");
  const int64_t now = now_ms();
  if (state == State::kFinished) {
    if (row->outcome != Outcome::kDead) {
      return WrongState(named + " is finished (" + std::string(outcome_name(row->outcome)) +
                        "); only a pending or dead job can be taken");
    }
    // As rerun would: its attempts start over, at its place as of now.
    JobRow rerun = row_after_rerun(*row, {}, now);
    KVQ_ASSIGN_OR_RETURN(rerun.add_seq, txn.read_version());
    KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, id, row, rerun));
    KVQ_ASSIGN_OR_RETURN(row, load_job(txn, keys, type, id));  // as save_job left it
    if (!row) return Internal(named + " lost its row to its rerun");
  }
  // Flow control does not stop it, but what it counts stays true: the rate window records the
  // accept, and a group it fills leaves the queue of groups.
  KVQ_ASSIGN_OR_RETURN(FlowGate gate, open_flow_gate(txn, keys, type, 1, now));
  KVQ_ASSIGN_OR_RETURN(Job job, take_job(txn, scope, type, std::string(id), row->priority,
                                         row->scheduled, row->group, taker, gate));
  if (gate.rate) record_flow(txn, keys, type, gate, 1);
  const auto& limit = gate.max_running_per_group;
  if (!row->group.empty() && limit) {
    KVQ_ASSIGN_OR_RETURN(auto group, load_group(txn, keys, type, row->group));
    if (!group) return Internal("group '" + row->group + "' lost its row to an accept");
    if (group->running >= *limit && !group->full)
      KVQ_RETURN_IF_ERROR(mark_group_full(txn, keys, type, row->group, *group));
  }
  return job;
}

Result<std::vector<Job>> find_accepted(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, uint64_t version,
                                       const std::vector<Taker>& takers) {
  std::vector<std::optional<Job>> by_taker(takers.size());
  KVQ_ASSIGN_OR_RETURN(auto settings, type_settings_of(txn, keys, type));
  const Millis type_timeout = settings ? settings->timeout : Millis(0);
  KVQ_ASSIGN_OR_RETURN(auto entries, runs_started_at(txn, keys, type, version));
  for (const std::string& id : entries) {
    KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
    for (size_t i = 0; row && i < takers.size(); ++i) {
      if (util::secret_equal(row->lock, takers[i].lock))
        by_taker[i] = job_of_run(type, id, *row, type_timeout);
    }
  }
  std::vector<Job> found;  // in takers' order, as try_accept_many returns them
  for (auto& job : by_taker) {
    if (job) found.push_back(std::move(*job));
  }
  return found;
}

namespace {

// One accept attempt in its own transactions: its takers, and what its tries carry from one to
// the next. An earlier try's commit result may have been unknown: it may have taken jobs
// already, which attempt_version_ (its read version) finds. (Until a commit's result was
// unknown, no earlier try took anything: kv::run says so, and a retry after conflicts alone
// reads nothing for it.) The first try takes the due jobs in order, passing over those that
// other attempts here claimed; a retry (after a conflict, with an acceptor of another process
// that took the same head) spreads its pick. Counted in flight here until settle().
class AcceptAttempt {
 public:
  // `watch`: a caller that will wait, whose watch the last try arms as `arm` says (kNone:
  // none). `round_trips`: the store's reads are round trips (it is not nonblocking), so a try's
  // first reads are worth fetching in one.
  AcceptAttempt(const AcceptScope& scope, std::string type, AcceptOptions accept,
                std::vector<Taker> takers, ArmWatch arm, std::shared_ptr<LookRiders> riders,
                bool round_trips)
      : scope_(scope),
        type_(std::move(type)),
        accept_(std::move(accept)),
        takers_(std::move(takers)),
        arm_(arm),
        riders_(std::move(riders)),
        round_trips_(round_trips),
        in_flight_(std::in_place, scope.local.in_flight, type_),
        claims_(scope.local.claims) {}

  // One try, in its transaction: kv::run's body.
  Result<std::vector<Job>> try_once(kv::Transaction& txn);
  // Of the last try.
  const std::optional<int64_t>& next_due() const { return next_due_; }
  kv::Watch take_watch() { return std::move(watch_); }
  // Its tries are over: no longer in flight, and its claims let go.
  void settle() {
    in_flight_.reset();
    claims_.let_go();
  }

 private:
  bool watching() const { return arm_ != ArmWatch::kNone; }
  // The look's first reads in one (on etcd one round trip; nothing on LMDB): the token the
  // watch starts from, what the riders read, the type's settings and the queue's head.
  void prefetch_first_reads(kv::Transaction& txn, bool arm_pending);
  // The takers this try looks for: those whose riders' part let them take a job.
  Result<std::vector<Taker>> run_riders(kv::Transaction& txn, bool stale);
  // What the try answers after its look took `taken` (kNotFound: nothing).
  Result<std::vector<Job>> after_look(kv::Transaction& txn, Result<std::vector<Job>> taken,
                                      const HeldBack& held);

  const AcceptScope& scope_;
  const std::string type_;
  const AcceptOptions accept_;
  const std::vector<Taker> takers_;
  const ArmWatch arm_;
  const std::shared_ptr<LookRiders> riders_;
  const bool round_trips_;
  std::optional<uint64_t> attempt_version_;
  bool tried_ = false;
  std::optional<int64_t> next_due_;
  kv::Watch watch_;
  std::optional<AcceptInFlight> in_flight_;
  PickClaims claims_;
};

Result<std::vector<Job>> AcceptAttempt::try_once(kv::Transaction& txn) {
  const Keys& keys = scope_.keys;
  const Pick pick = tried_ ? Pick::kSpread : Pick::kInOrder;
  claims_.new_try();
  const bool first_try = !tried_;
  tried_ = true;
  if (attempt_version_ && txn.earlier_commit_unknown()) {
    KVQ_ASSIGN_OR_RETURN(auto taken, find_accepted(txn, keys, type_, *attempt_version_, takers_));
    if (!taken.empty()) return taken;
  }
  next_due_.reset();
  bool stale = false;
  const bool arm_pending = arm_ == ArmWatch::kAlways;
  // A look whose caller will wait may read a state a little behind the latest commit: what it
  // takes its commit checks, and whatever it missed changed the pending token after its read.
  // Armed here, the watch starts at the look's own read version, so it fires for that. Not
  // armed here (kWhenFull), the caller waits on the type's live pending watch, armed by an
  // earlier look of this store handle: a stale read is never older than what the handle has
  // seen (kv::Transaction::allow_stale_reads), so not older than that watch's start, and a
  // watch still live has seen no change since. A look whose caller will not wait (kNone)
  // reads the latest commit: it answers "nothing due" at once.
  if (watching() && (!riders_ || !riders_->wants_current_reads())) stale = txn.allow_stale_reads();
  // (Where reads are local, planning that read twice would only cost a second look at the
  // process's heads.)
  if (round_trips_) prefetch_first_reads(txn, arm_pending);
  watch_ = kv::Watch();  // an earlier try's
  if (arm_pending) {
    KVQ_ASSIGN_OR_RETURN(watch_, txn.watch(keys.pending_token(type_)));
  }
  KVQ_ASSIGN_OR_RETURN(const std::vector<Taker> lookers, run_riders(txn, stale));
  HeldBack held;
  auto taken = lookers.empty()
                   ? Result<std::vector<Job>>(NotFound("no taker left"))
                   : try_accept_many(txn, scope_, type_, accept_, lookers, &next_due_, pick, &held,
                                     /*guess_rows=*/stale && first_try, &claims_);
  return after_look(txn, std::move(taken), held);
}

void AcceptAttempt::prefetch_first_reads(kv::Transaction& txn, bool arm_pending) {
  const Keys& keys = scope_.keys;
  std::vector<std::string> first_keys;
  if (riders_) first_keys = riders_->reads(keys);
  if (arm_pending) first_keys.push_back(keys.pending_token(type_));
  first_keys.push_back(keys.timeout(type_));
  const int64_t max_time = accept_.max_scheduled_time_ms.value_or(now_ms());
  txn.prefetch(
      first_keys,
      {ungrouped_levels(txn, scope_, type_, accept_, takers_.size(), max_time).next_read()});
}

Result<std::vector<Taker>> AcceptAttempt::run_riders(kv::Transaction& txn, bool stale) {
  if (!riders_) return takers_;
  // The riders' work first; the takers whose part failed take nothing.
  KVQ_ASSIGN_OR_RETURN(auto takes, riders_->before_look(txn, scope_.keys, stale));
  std::vector<Taker> taking;
  for (size_t i = 0; i < takers_.size(); ++i) {
    if (takes[i]) taking.push_back(takers_[i]);
  }
  return taking;
}

Result<std::vector<Job>> AcceptAttempt::after_look(kv::Transaction& txn,
                                                   Result<std::vector<Job>> taken,
                                                   const HeldBack& held) {
  const Keys& keys = scope_.keys;
  const bool nothing = !taken.ok() && taken.status().code() == Code::kNotFound;
  const bool riders_wrote = riders_ && riders_->wrote();
  // Nothing taken because other attempts here are taking every due job it read: the look is
  // tried again after kv::run's backoff, by when their commits are done. Answering "nothing
  // due" could be wrong should one of them fail, and waiting for a watch or a timer (a first
  // version) held the caller up for longer than that backoff. Unless the riders wrote: their
  // work commits, and the takers look again a millisecond on (try_accept_many's next_due).
  if (nothing && !riders_wrote)
    KVQ_RETURN_IF_ERROR(claims_.after_nothing_taken("type '" + type_ + "'"));
  // Nothing due, but the riders wrote: the try commits that.
  if (nothing && riders_wrote) taken = std::vector<Job>();
  if (held.by_running && watching()) {
    // Full: a slot frees only when a run ends, which rewrites the activity token, not the
    // pending one. Watching it also fires on every other change of the type's jobs (adds,
    // updates of running ones), each a look that finds it full again: a cost that only types
    // with max_running pay, where run ends writing the pending token instead would cost every
    // type's run ends a read of its settings.
    KVQ_ASSIGN_OR_RETURN(watch_, txn.watch(keys.activity_token(type_)));
  }
  if (held.any && !watching()) scope_.local.held_back.note(type_);
  // Read after the look, whose first read fixed it: on etcd asking first would cost a round trip.
  KVQ_ASSIGN_OR_RETURN(attempt_version_, txn.read_version());
  return taken;
}

}  // namespace

Result<std::vector<Job>> attempt_accept_many(kv::Store& store, const AcceptScope& scope,
                                             std::string_view type, const AcceptOptions& accept,
                                             const std::vector<Taker>& takers,
                                             std::optional<int64_t>* next_due, kv::Watch* watch,
                                             ArmWatch arm, std::shared_ptr<LookRiders> riders) {
  AcceptAttempt attempt(scope, std::string(type), accept, takers, watch ? arm : ArmWatch::kNone,
                        std::move(riders), !store.nonblocking());
  auto jobs = kv::run(
      store, [&](kv::Transaction& txn) { return attempt.try_once(txn); }, scope.options.retry);
  if (next_due) *next_due = attempt.next_due();
  if (watch) *watch = attempt.take_watch();
  return jobs;
}

void attempt_accept_many_async(kv::Store& store, const AcceptScope& scope, std::string type,
                               AcceptOptions accept, std::vector<Taker> takers, ArmWatch arm,
                               std::function<void(AcceptOutcome)> done,
                               std::shared_ptr<LookRiders> riders) {
  auto attempt =
      std::make_shared<AcceptAttempt>(scope, std::move(type), std::move(accept), std::move(takers),
                                      arm, std::move(riders), !store.nonblocking());
  kv::run_async(
      store, [attempt](kv::Transaction& txn) { return attempt->try_once(txn); },
      [attempt, done = std::move(done)](Result<std::vector<Job>> jobs) {
        attempt->settle();
        done(AcceptOutcome{std::move(jobs), attempt->next_due(), attempt->take_watch()});
      },
      scope.options.retry);
}

Result<Job> attempt_accept(kv::Store& store, const AcceptScope& scope, std::string_view type,
                           const AcceptOptions& accept, const std::string& lock,
                           std::optional<int64_t>* next_due) {
  KVQ_ASSIGN_OR_RETURN(auto jobs,
                       attempt_accept_many(store, scope, type, accept,
                                           {{lock, accept.worker, accept.worker_type}}, next_due));
  return std::move(jobs.front());
}

}  // namespace kvq::jobs
