// jobs/accept/pending_picks.h — taking due jobs off the pending index: the one place a job goes
// from pending to running, in a caller's transaction (try_*) or in one of its own with retries
// (attempt_*), and the locks the jobs are handed out with.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jobs/accept/local_accepts.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

// Who gets a job an accept takes: the lock it is handed out with and the worker (and its
// worker type) recorded on it.
struct Taker {
  std::string lock;
  std::string worker;
  std::string worker_type;
};

// A fresh random lock. Its suffix tags the type, so a handle used with another type is caught
// as invalid input rather than reported as a fenced-out worker.
std::string new_lock(std::string_view type);

// The tag new_lock ends a lock of `type` with.
std::string type_tag(std::string_view type);

// The parts of one Jobs that every accept works with: its key layout, its options, and what its
// accepts in this process share (local_accepts.h). The Jobs outlives every accept it starts.
struct AcceptScope {
  const Keys& keys;
  const JobsOptions& options;
  LocalAccepts& local;
};

// Whether, on a store that is not nonblocking (etcd), where a look is round trips, an accept of
// `type` is looking in this process now (AcceptInFlight): a look of another would read the same
// head of the queue and collide with it.
bool looking_here(const kv::Store& store, const AcceptScope& scope, std::string_view type);

// Whether an accept of `type` leaves its look to the accept waiters' next round (which looks for
// all its waiters in one transaction) instead of looking itself: on a store that is not
// nonblocking (etcd), where a look is round trips, when it may wait and another accept of its
// type is under way in this process (AcceptInFlight). Their looks would read the same head of
// the queue and collide, each collision a try more of reads and a commit.
bool joins_round(const kv::Store& store, const AcceptScope& scope, std::string_view type,
                 const AcceptOptions& options);

// How a look chooses among the due jobs of its best priority level.
enum class Pick {
  kInOrder,  // the first ones, in scheduled order (then id): FIFO within a priority
  kSpread,   // at random among the first JobsOptions::accept_spread, so that acceptors that
             // collided on one snapshot seldom collide again
};

// Whether the type's flow control (flow_control.h) let a look take fewer jobs than it had
// takers, and whether max_running was why (then only a run's end can free a slot).
struct HeldBack {
  bool any = false;
  bool by_running = false;
};

// The non-blocking heart of accept, in the caller's transaction: takes up to takers.size()
// distinct due jobs (highest priority first, then as `pick` says), the i-th for takers[i], and
// no more than the type's flow control lets it (a paused type gives none). On nothing due (or
// nothing allowed): kNotFound. When fewer jobs than takers were due, *next_due (if given)
// receives the earliest scheduled time of a pending job not yet due, if any, or the earlier
// time flow control lets more through by itself (a pause's end, room in the rate window);
// *held (if given) says whether flow control held it back. `guess_rows`: the rows of the jobs
// it takes without groups may be guessed (kv::ReadOptions::remembered; for an attempt that
// allowed stale reads and guessed nothing wrong before); a row found older than its index
// entry fails the attempt with kAborted, to be retried without guesses. With `claims` (the
// attempt's), it passes over due jobs another attempt in this process claimed, and claims those
// it takes; when all it read are claimed, it takes no more, notes so in `claims`, and counts
// the type due again a millisecond from now (*next_due).
Result<std::vector<Job>> try_accept_many(kv::Transaction& txn, const AcceptScope& scope,
                                         std::string_view type, const AcceptOptions& accept,
                                         const std::vector<Taker>& takers,
                                         std::optional<int64_t>* next_due, Pick pick,
                                         HeldBack* held = nullptr, bool guess_rows = false,
                                         PickClaims* claims = nullptr);
// try_accept_many for one taker (`lock`, accept.worker and accept.worker_type), in order.
Result<Job> try_accept(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                       const AcceptOptions& accept, const std::string& lock,
                       std::optional<int64_t>* next_due);
// Where the job try_accept_many would take first for `type` stands, for comparing types
// (accept_any): its priority, then its place — its scheduled time, or its group's turn — in
// microseconds.
struct Candidate {
  int64_t priority = 0;
  int64_t place_us = 0;
};
// The candidate try_accept_many would take first (in order) for one taker of `type`, without
// taking it: nullopt when flow control allows none or nothing is due. Like try_accept_many it
// marks full the groups it finds at max_running_per_group (which they are, whatever is taken),
// and fills *next_due and *held the same way.
Result<std::optional<Candidate>> peek_candidate(kv::Transaction& txn, const AcceptScope& scope,
                                                std::string_view type, const AcceptOptions& accept,
                                                std::optional<int64_t>* next_due, HeldBack* held);
// Takes the job `id` of `type` for `taker` whatever its turn (Jobs::accept_job): a pending one
// (due or not, flow control notwithstanding, though a rate-limited type's window counts it and
// its group is marked full when it reaches max_running_per_group), or a dead one, rerun first.
// kWrongState if running or finished otherwise; kNotFound if absent.
Result<Job> take_named(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                       std::string_view id, const Taker& taker);
// After an unknown commit result: the jobs an earlier attempt (at read version `version`) took
// for `takers`, if that attempt did commit (all of them, or none).
Result<std::vector<Job>> find_accepted(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, uint64_t version,
                                       const std::vector<Taker>& takers);

// Which watch an accept attempt arms for a caller that will wait, at its look's read version.
enum class ArmWatch {
  kNone,
  // Only when max_running held the look back: on the type's activity token, which every
  // change of one of its jobs rewrites — a run's end among them, and every add too.
  kWhenFull,
  // On the type's pending token (every add, resubmit and return to pending rewrites it), or
  // as kWhenFull when max_running held the look back.
  kAlways,
};

// Work that an accept attempt's transaction does for some of its takers before its look, on
// each try: the accept waiters' rounds carry the finishes of workers that wait for their next
// job (round_finishes.h), so that a finish and the accept after it cost one commit, shared by
// the whole round. A try whose look finds nothing still commits what the riders wrote.
class LookRiders {
 public:
  virtual ~LookRiders() = default;
  // In the try's transaction (`stale`: its reads may be behind the latest commit), before the
  // look: for each taker, whether it takes a job in this try (one whose own part failed takes
  // none). An error fails the try, as any error of its body.
  virtual Result<std::vector<bool>> before_look(kv::Transaction& txn, const Keys& keys,
                                                bool stale) = 0;
  // The keys before_look reads: fetched with the look's first read (on etcd, one round trip
  // for both). Empty when it reads nothing.
  virtual std::vector<std::string> reads(const Keys& keys) const = 0;
  // Whether the try's before_look wrote anything.
  virtual bool wrote() const = 0;
  // Whether the next try must read the latest commit (to confirm what a read that may be
  // behind decided): it then does not allow stale reads.
  virtual bool wants_current_reads() const { return false; }
};

// One accept attempt in its own transaction (with retries, recognising its own earlier commit
// after an unknown result): up to takers.size() due jobs, the i-th for takers[i], in order on
// the first try of an attempt that started while no other of its type was in flight in this
// process, else spread (Pick). kNotFound
// when nothing is due; when fewer than wanted were due, *next_due then holds the earliest
// scheduled time of a pending job not yet due, if any (or of flow control's reopening, as
// try_accept_many's). With `watch`, the last try also arms a watch there as `arm` says. An
// attempt that arms none and was held back by flow control is noted (note_held_back). With
// `riders`, each try first runs their work (LookRiders), and takes jobs only for the takers
// they let take one; the jobs taken are then in takers' order, with a job's lock naming its
// taker.
// A try that took nothing because other attempts here were taking every due job it read
// (PickClaims) is tried again (kAborted, kv::run's backoff), unless its riders wrote: its caller
// is never told "nothing due", nor waits for a new job, while their commits may yet fail.
Result<std::vector<Job>> attempt_accept_many(
    kv::Store& store, const AcceptScope& scope, std::string_view type, const AcceptOptions& accept,
    const std::vector<Taker>& takers, std::optional<int64_t>* next_due, kv::Watch* watch = nullptr,
    ArmWatch arm = ArmWatch::kAlways, std::shared_ptr<LookRiders> riders = nullptr);
// What attempt_accept_many_async hands its caller.
struct AcceptOutcome {
  Result<std::vector<Job>> jobs;
  std::optional<int64_t> next_due;  // as attempt_accept_many's
  kv::Watch watch;                  // armed when asked for (ArmWatch)
};
// attempt_accept_many for a caller that must not block (kv::run_async): `done` gets the outcome,
// perhaps on another thread. The Jobs behind `scope` must outlive the call.
void attempt_accept_many_async(kv::Store& store, const AcceptScope& scope, std::string type,
                               AcceptOptions accept, std::vector<Taker> takers, ArmWatch arm,
                               std::function<void(AcceptOutcome)> done,
                               std::shared_ptr<LookRiders> riders = nullptr);
// Undoes the accept of `job` for a caller that is gone — it cancelled while the accept's
// transaction committed — so that the job does not sit running until its activity timeout
// and then count a lost attempt: if `job.lock` still holds it, the job is pending again at its
// place in the queue, this attempt not counted. Nothing happens if it has moved on.
// Its queue latency's note is the caller's to drop (QueueLatencies::take).
Status give_back(kv::Transaction& txn, const Keys& keys, const Job& job);

// The same for one job, taken with `lock` for accept.worker.
Result<Job> attempt_accept(kv::Store& store, const AcceptScope& scope, std::string_view type,
                           const AcceptOptions& accept, const std::string& lock,
                           std::optional<int64_t>* next_due);

}  // namespace kvq::jobs
