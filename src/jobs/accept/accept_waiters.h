// jobs/accept/accept_waiters.h — serves every accept that has to wait, from one thread per Jobs.
//
// A waiting accept is a queued callback, not a blocked thread, so a server can hold many
// thousands of long-polls. Per type, waiters are served in arrival order. Waiters with the same
// options share a round: they are served together, up to kMaxBatch at a time, by one
// transaction that takes a job for each (so a burst of adds reaches many waiting workers at the
// cost of one commit), and one that finds nothing due stands for them all.
//
// Wake-ups, as in couch_jobs: a round's transaction that finds the type without a live watch
// arms one on the type's pending token (which every add, resubmit and return to pending
// changes) in the same transaction as its look, so an add either was seen by the look or fires
// the watch, and the fire starts the next round directly (no other thread in between). One watch
// per type serves every waiter in this process. A caller that looked for itself reads
// watch_generation() before its look; if that watch is still live when it submits, every add
// after its look will fire it, else the acceptor looks for it in its next round. Rounds also run
// when the earliest delayed job falls due, and waiters expire at their deadlines.
//
// Flow control (flow_control.h) changes what a round waits for. A paused type's rounds wait on
// the pending token, which resume writes, or until the pause's end; a rate-limited one's until
// its window has room (both as a delayed job's due time). A type that max_running holds back
// waits for a run to end, which rewrites the activity token but not the pending one: its round
// arms the watch there instead (ArmWatch). A caller's own look held back by flow control has
// arranged none of this, so it is not covered by the watch it read before (HeldBackLooks).
// A look that found only groups at max_running_per_group needs neither: the end of a run of a
// group that still has pending jobs rewrites the pending token (group_queue.h), whether or not
// the look's marking the group full committed, so the pending watch covers it.
//
// A batch with a waiter that came through an asynchronous accept on a nonblocking store commits
// asynchronously, like its caller's own look: the thread does not wait for that commit (with
// fsync, for a disk), so rounds of different types run side by side and share group commits,
// and the commit joins the caller's asynchronous ones instead of being handed their leadership.
// Blocking accepts keep blocking commits, which lead their own group commits. One attempt per
// type is in flight at a time. On a store that is not nonblocking (etcd), where an attempt
// waits on round trips, attempts of different types run side by side on a few threads of
// their own, and a type's next round waits a little for the workers its last one served
// (round_hold.h).
//
// A waiter may carry its worker's finish (finish_and_accept on a store that is not
// nonblocking: round_finishes.h). It always gets a round (its submit starts one), and its
// kind's batch in that round takes it whatever the waiters ahead of it (up to kMaxBatch
// finishes a batch); the round commits the finish with the jobs it takes, in arrival order as
// always. Its deadline does not end it before the finish committed.
//
// An accept over several types (accept_any) waits as one waiter of all of them: not batched,
// and not in any type's queue (so not ordered with that type's own waiters). Each of its looks
// (attempt_accept_any_async) arms watches of its own on every type's pending token (and the
// activity token of a type max_running holds back); a fire, the earliest delayed job falling
// due, or its deadline ends its wait, and it looks again over all its types.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "jobs/accept/any_picks.h"
#include "jobs/accept/pending_picks.h"
#include "jobs/accept/round_finishes.h"
#include "jobs/accept/round_hold.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::util {
class ThreadPool;
}

namespace kvq::jobs {

class AcceptWaiters {
 public:
  using Callback = std::function<void(Result<Job>)>;

  // REQUIRES: `scope` (its Jobs) outlives the AcceptWaiters.
  AcceptWaiters(kv::Store& store, const AcceptScope& scope);
  // Ends every waiter with kCancelled; waits for attempts in flight.
  ~AcceptWaiters();

  // How an attempt for a waiter commits.
  enum class Commit { kBlocking, kAsync };
  // The generation of `type`'s live pending watch, 0 when it has none. Read before a look of
  // the caller's own, and passed to submit.
  uint64_t watch_generation(const std::string& type) KVQ_EXCLUDES(mu_);
  // Queues a waiter. `generation` is watch_generation() read before the caller's own last look;
  // nullopt when the caller made none (it queued behind waiters). Unless that watch is still
  // live, the acceptor looks for the waiter in its next round. Returns a ticket for cancel().
  // With `finish`, the round that serves the waiter commits that finish first (then pass no
  // generation); the callback's error is the finish's own if `finish->done` is still false.
  uint64_t submit(const std::string& type, const AcceptOptions& options, const std::string& lock,
                  kv::Clock::time_point deadline, std::optional<uint64_t> generation,
                  Callback callback, Commit commit, uint64_t reserved = 0,
                  std::shared_ptr<WaitingFinish> finish = nullptr) KVQ_EXCLUDES(mu_);
  // Queues a waiter of several types (Jobs::accept_any), whose own look found nothing due and
  // left `look` (its watches armed at that look). `takers[i]` takes a job of types[i]. Returns
  // a ticket for cancel(); `reserved` as submit's.
  uint64_t submit_any(std::vector<std::string> types, const AcceptOptions& options,
                      std::vector<Taker> takers, kv::Clock::time_point deadline, AnyLook look,
                      Callback callback, uint64_t reserved = 0) KVQ_EXCLUDES(mu_);
  // A ticket for an accept still making its own look elsewhere, before it may wait here:
  // cancel() of it then ends the submit that follows at once with kCancelled. The ticket goes
  // to that submit (`reserved`), or to forget() when the look ended the accept.
  uint64_t reserve() KVQ_EXCLUDES(mu_);
  void forget(uint64_t reserved) KVQ_EXCLUDES(mu_);
  // Whether accepts wait on `type` here now. A new accept then queues behind them without a
  // look of its own: it is served in arrival order, and its look cannot collide with theirs.
  bool has_waiters(const std::string& type) KVQ_EXCLUDES(mu_);
  // Ends the waiter with kCancelled if it has not completed; returns whether it did.
  bool cancel(uint64_t ticket) KVQ_EXCLUDES(mu_);

 private:
  struct Waiter {
    uint64_t ticket;
    AcceptOptions options;
    std::string lock;
    kv::Clock::time_point deadline;
    Callback callback;
    Commit commit;
    std::shared_ptr<WaitingFinish> finish;  // its worker's, until a round committed it
    // Cancelled while its finish waited for a round: it keeps its place for the finish, and
    // what the round takes for it goes back (cancel()).
    bool cancelled = false;
  };
  // What makes waiters interchangeable in a round: the options that choose which jobs are due.
  using Kind = std::pair<std::optional<int64_t>, std::optional<int64_t>>;  // max time, max priority
  static Kind kind_of(const AcceptOptions& o) { return {o.max_scheduled_time_ms, o.max_priority}; }
  struct Queue {
    std::deque<Waiter> waiters;
    std::map<Kind, size_t> kinds;  // how many waiters of each kind, so a round ends without a scan
    size_t finishing = 0;     // waiters whose finish waits for a round (RoundFinishes::pending)
    bool attempt = false;     // a new round is wanted
    bool round_open = false;  // a round is under way: its next batch is still to be tried
    bool in_flight = false;   // one of its batches is being attempted
    std::vector<Kind> found_nothing;  // kinds the open round found nothing due for
    std::optional<kv::Clock::time_point> next_due;
    RoundHold hold;  // the next round's wait for the waiters the last one served
  };
  // One transaction's worth of a round: waiters of one kind, in arrival order.
  struct Batch {
    AcceptOptions options;
    std::vector<uint64_t> tickets;
    std::vector<Taker> takers;
    Commit commit = Commit::kBlocking;
    // The generation of the watch its transaction arms: on the pending token when the type
    // has no live watch (arm_pending), and on the activity token when max_running holds it
    // back (ArmWatch).
    uint64_t arm = 0;
    bool arm_pending = false;
    uint64_t held_back_looks = 0;             // HeldBackLooks::count() before its look
    std::shared_ptr<RoundFinishes> finishes;  // of its waiters that carry one; else null
    kv::Clock::time_point started{};          // when it was taken off the queue
  };
  // The pending watch of a type: kept while the type has no waiters, so that the next waiter
  // needs no look of the acceptor's.
  struct PendingWatch {
    kv::Watch watch;
    uint64_t generation = 0;
    // HeldBackLooks::count() before the look that armed it: a caller's own look held back by flow
    // control since then saw nothing this watch may stand for (a run's end, a time to wake).
    uint64_t held_back_looks = 0;
    // Armed and not fired since (a fire marks the watch ready before its callback runs).
    bool live() const { return watch.valid() && !watch.ready(); }
  };
  // Where fired watches report: outlives the AcceptWaiters, whose destructor detaches it (under
  // `mu`, so a fire in progress finishes first).
  struct FireSink {
    util::Mutex mu;
    AcceptWaiters* acceptor KVQ_GUARDED_BY(mu) = nullptr;
  };
  using Done = std::vector<std::pair<Callback, Result<Job>>>;
  // A waiter of several types (submit_any).
  struct AnyWaiter {
    std::vector<std::string> types;
    AcceptOptions options;
    std::vector<Taker> takers;
    kv::Clock::time_point deadline;
    Callback callback;
    std::vector<kv::Watch> watches;  // armed by its latest look
    uint64_t generation = 0;         // of those watches: an older one's fire is ignored
    bool attempt = false;            // look again
    bool in_flight = false;          // a look is under way
    std::optional<kv::Clock::time_point> next_due;
  };
  // What run() starts for a waiter of several types.
  struct AnyStart {
    uint64_t ticket;
    std::vector<std::string> types;
    AcceptOptions options;
    std::vector<Taker> takers;
  };

  static ArmWatch arm_of(const Batch& batch);
  // Whether `queue`'s next round waits now for the waiters its last one served: only on a
  // store that is not nonblocking (round_hold.h).
  bool held(const Queue& queue, kv::Clock::time_point now) const {
    return !store_.nonblocking() && queue.hold.holds(queue.waiters.size(), now);
  }

  void run() KVQ_EXCLUDES(mu_);
  // The open round's next batch of `queue`, or nullopt when every kind waiting there found
  // nothing due.
  std::optional<Batch> next_batch(const std::string& type, Queue& queue) KVQ_REQUIRES(mu_);
  // Attempts `batch`, with a blocking or an asynchronous commit. Unlocked: the attempt may
  // finish on this thread, in finish_batch.
  void start_batch(const std::string& type, Batch batch) KVQ_EXCLUDES(mu_);
  // Hands out what the batch took and moves the round on. Any thread; takes mu_.
  void finish_batch(const std::string& type, const Batch& batch, AcceptOutcome outcome)
      KVQ_EXCLUDES(mu_);
  // What a batch's end hands out once mu_ is let go: the waiters' callbacks with their results,
  // and jobs taken for waiters cancelled meanwhile (given back).
  struct Handed {
    Done done;
    std::vector<Job> orphans;
  };
  // The waiter `ticket` of `queue` ends with `result`; one cancelled meanwhile leaves its job to
  // be given back.
  void complete(Queue& queue, uint64_t ticket, Result<Job> result, Handed& handed)
      KVQ_REQUIRES(mu_);
  // finish_batch's part for the batch's queue: its waiters' results, and the round's progress
  // (`looked`: the look ended with jobs or with nothing due, rather than an error).
  void hand_out(Queue& queue, const Batch& batch, bool looked, AcceptOutcome& outcome,
                Handed& handed) KVQ_REQUIRES(mu_);
  // A watch armed by a batch fired: the next round of its type starts.
  void on_fire(const std::string& type, uint64_t generation) KVQ_EXCLUDES(mu_);
  // `queue` is one of queues_, hence the lock.
  void expire(const std::string& type, Queue& queue, kv::Clock::time_point now, Done& done)
      KVQ_REQUIRES(mu_);
  kv::Clock::time_point next_wake(kv::Clock::time_point now) const KVQ_REQUIRES(mu_);
  // The waiters of several types: those past their deadline end (into `done`, their watches
  // into `retired`), and those due for a look are marked in flight and returned.
  std::vector<AnyStart> poll_any(kv::Clock::time_point now, Done& done,
                                 std::vector<kv::Watch>& retired) KVQ_REQUIRES(mu_);
  // Registers the fire of each of `look`'s watches for the waiter `ticket`, as `generation`.
  // Outside mu_: a watch already fired calls back at once.
  void arm_any(AnyLook& look, uint64_t ticket, uint64_t generation) KVQ_EXCLUDES(mu_);
  // Makes `look` (armed as `generation`) the waiter's; the watches it replaces go to `retired`,
  // to be cancelled outside mu_.
  void install_any(AnyWaiter& waiter, uint64_t generation, AnyLook look,
                   std::vector<kv::Watch>& retired) KVQ_REQUIRES(mu_);
  void on_any_fire(uint64_t ticket, uint64_t generation) KVQ_EXCLUDES(mu_);
  void start_any(AnyStart start) KVQ_EXCLUDES(mu_);
  void finish_any(uint64_t ticket, AnyOutcome outcome) KVQ_EXCLUDES(mu_);
  // Hands a job back (give_back) whose waiter was cancelled while its look took it.
  void give_back_orphan(Job job);
  static void push_waiter(Queue& queue, Waiter waiter);
  static std::deque<Waiter>::iterator erase_waiter(Queue& queue, std::deque<Waiter>::iterator it);
  // Erases an empty queue with no attempt in flight and no hold.
  void drop_if_empty(std::map<std::string, Queue>::iterator it) KVQ_REQUIRES(mu_);

  kv::Store& store_;
  const AcceptScope& scope_;
  std::shared_ptr<FireSink> sink_ = std::make_shared<FireSink>();
  util::Mutex mu_;
  util::CondVar cv_;  // signalled under mu_: new work for run(), or in_flight_ dropped
  std::map<std::string, Queue> queues_ KVQ_GUARDED_BY(mu_);
  std::map<std::string, PendingWatch> watches_ KVQ_GUARDED_BY(mu_);
  uint64_t next_watch_generation_ KVQ_GUARDED_BY(mu_) = 1;
  uint64_t next_ticket_ KVQ_GUARDED_BY(mu_) = 1;
  // Reserved tickets not yet submitted: cancelled?
  std::map<uint64_t, bool> reserved_ KVQ_GUARDED_BY(mu_);
  std::map<uint64_t, AnyWaiter> any_waiters_ KVQ_GUARDED_BY(mu_);  // by ticket
  std::atomic<uint64_t> next_any_generation_{1};
  int in_flight_ KVQ_GUARDED_BY(mu_) = 0;  // batches attempted and not yet finished
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  std::thread thread_;
  // Where batches run when the store is not nonblocking(): there each lasts round trips, and on
  // thread_ the batches of different types would wait for one another. Null elsewhere.
  std::unique_ptr<util::ThreadPool> batch_pool_;
};

}  // namespace kvq::jobs
