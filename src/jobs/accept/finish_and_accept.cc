// finish_and_accept: a worker's finish and its next accept in one transaction (one commit where
// it would spend two), then, when nothing was due, a wait as accept_any's.
//
// Only on a store whose transactions run locally (nonblocking(): LMDB), and while no accept
// waits on the type here. Where each read is a round trip (etcd), workers that finish together
// all look for their next job at the head of the same queue, and their combined transactions
// conflict and start over, finish and all: on a 3-member etcd, kvq bench's 16 HTTP workers ran
// 129-170 jobs/s that way against 315-330 with a finish and a separate accept. There a worker
// that takes its next job from one type hands its finish to the accept waiters instead: the
// round that serves it commits the finishes of every worker it serves with the jobs it takes
// for them (round_finishes.h), one commit for both where a finish and an accept were two, each
// waiting for a Raft round. Elsewhere (several types; LMDB while accepts wait) the finish
// commits on its own (checking the types first, in its transaction) and the next job comes
// from accept_any, whose waiters share one look among the workers waiting on a type.
#include <algorithm>
#include <memory>
#include <utility>

#include "jobs/accept/any_picks.h"
#include "jobs/accept/round_finishes.h"
#include "jobs/jobs_impl.h"
#include "jobs/worker_calls.h"

namespace kvq::jobs {
namespace {

struct FinishedAndTaken {
  Finished finished;
  std::optional<Job> next;
};

// The function each try runs. It may run several times: after an unknown commit result, a try
// first looks for the job its predecessor took (then that try committed, its finish with it);
// failing that, finish_checked recognises a finish that committed without an accept, and the
// accept is made again.
class FinishThenAccept {
 public:
  // `take_next`: false finishes only (the two-step form above).
  FinishThenAccept(const AcceptScope& scope, Job job, Checked checked,
                   std::vector<std::string> types, AcceptOptions accept, bool take_next)
      : scope_(scope),
        job_(std::move(job)),
        checked_(std::move(checked)),
        accept_(std::move(accept)),
        attempt_(take_next ? &scope.local : nullptr, types, takers_for(types, accept_)),
        take_next_(take_next) {}

  Result<FinishedAndTaken> operator()(kv::Transaction& txn) {
    const Keys& keys = scope_.keys;
    attempt_.begin_try();
    KVQ_ASSIGN_OR_RETURN(auto recognised, attempt_.recognise(txn, keys));
    if (recognised) return FinishedAndTaken{last_finished_, std::move(recognised)};
    // The job's row and every type's settings are read next: on etcd in one round trip.
    std::vector<std::string> rows{keys.job(job_.type, job_.id)};
    for (const std::string& type : attempt_.types()) rows.push_back(keys.timeout(type));
    txn.prefetch(rows);
    // Every type first: a misspelt one changes nothing.
    KVQ_RETURN_IF_ERROR(require_types(txn, keys, attempt_.types()));
    KVQ_ASSIGN_OR_RETURN(Finished finished, finish_checked(txn, keys, job_, checked_));
    // As finish's counting: a commit recognised before any try of this call wrote was an
    // earlier call's.
    finished.counted = !finished.recognised || wrote_;
    if (!finished.recognised) wrote_ = true;
    if (!take_next_) return FinishedAndTaken{finished, std::nullopt};
    KVQ_ASSIGN_OR_RETURN(auto next,
                         try_accept_any(txn, scope_, attempt_.types(), accept_, attempt_.takers(),
                                        attempt_.next_pick(), attempt_.claims(), nullptr, false));
    KVQ_RETURN_IF_ERROR(attempt_.looked(txn));
    last_finished_ = finished;
    last_finished_.counted = true;  // if recognised by its job, this try's commit was ours
    return FinishedAndTaken{finished, std::move(next)};
  }

  // Its tries are over.
  void settle() { attempt_.settle(); }

  // Records in the types' stats what a committed call did.
  void record(TypeStatsRecorder& stats, const FinishedAndTaken& done) const {
    if (done.finished.counted) {
      stats.record_finished(job_.type, done.finished.succeeded,
                            run_time_since(done.finished.started));
    }
    for (const Taker& taker : attempt_.takers()) {
      const auto latency = scope_.local.latencies.take(taker.lock);
      if (done.next && done.next->lock == taker.lock && latency)
        stats.record_accepted(done.next->type, *latency);
    }
  }

 private:
  const AcceptScope& scope_;
  Job job_;
  Checked checked_;
  AcceptOptions accept_;
  AnyAttempt attempt_;
  Finished last_finished_;
  bool wrote_ = false;  // a try of this call got as far as writing its finish
  bool take_next_;
};

// The types finish_and_accept takes from: the job's own when none are given.
std::vector<std::string> types_or_own(const Job& job, const std::vector<std::string>& types) {
  return types.empty() ? std::vector<std::string>{job.type} : types;
}

// What is left of `accept.timeout` since `start`, for the wait after the commit; nullopt when
// the call does not wait (no timeout, or none left) and took its look in the commit already.
// The two-step form (`looked` false) always gets a look, without a wait when none is left.
std::optional<AcceptOptions> wait_after(const AcceptOptions& accept, kv::Clock::time_point start,
                                        bool looked) {
  const auto left = accept.timeout - std::chrono::duration_cast<Millis>(kv::Clock::now() - start);
  if (looked && left.count() <= 0) return std::nullopt;  // a timeout of 0 leaves none either
  AcceptOptions rest = accept;
  rest.timeout = std::max(left, Millis(0));
  return rest;
}

// Whether accepts of the one type in `names` wait here now: what is due is theirs, as they came
// first, and their shared look takes it; a look of this call's own would only collide with it
// (on LMDB relaxed, 16 HTTP workers ran 4.8-5.2k jobs/s with such looks against 6.2-6.6k without
// next; on etcd 137-149 against 273-305 for a finish then an accept).
bool waiters_first(Jobs::Impl& impl, const std::vector<std::string>& names) {
  return names.size() == 1 && impl.accept_waiters.has_waiters(names[0]);
}

// Whether the finish's own transaction looks for the next job.
bool takes_next(const kv::Store& store, Jobs::Impl& impl, const std::vector<std::string>& names) {
  return store.nonblocking() && !waiters_first(impl, names);
}

// After a finish that did not look, with no time left to wait: none when accepts of the one
// type wait here (what is due is theirs), or, on a store that is not nonblocking (etcd), when
// one is looking here now. A look of its own would read the same head of the queue as that one
// and collide with it; the worker's accept that follows joins the waiters' shared look instead
// (joins_round). On 3 etcd members over HTTP, runs where every finish with "next" looked on its
// own settled there: finishes took 52-59 ms against 27-29, 270-306 jobs/s against 491-526.
bool left_to_waiters(const kv::Store& store, Jobs::Impl& impl,
                     const std::vector<std::string>& names, const AcceptOptions& rest) {
  if (rest.timeout.count() != 0) return false;
  if (waiters_first(impl, names)) return true;
  return names.size() == 1 && looking_here(store, impl.accept_scope, names[0]);
}

// Whether the finish rides the accept waiters' round of the one type it takes from (above).
bool rides_round(const kv::Store& store, const std::vector<std::string>& names) {
  return !store.nonblocking() && names.size() == 1;
}

// Hands the finish to the waiters of `type`, whose round commits it and takes the next job (by
// accept.timeout after the finish commits); `done` gets the finish's error, or the next job or
// nullopt.
// `reserved`: the ticket the waiter takes (0: a new one).
void finish_in_round(Jobs::Impl& impl, Job job, Checked checked, const std::string& type,
                     const AcceptOptions& accept, AcceptWaiters::Commit commit,
                     std::function<void(Result<std::optional<Job>>)> done, uint64_t reserved = 0) {
  auto finish = std::make_shared<WaitingFinish>(std::move(job), std::move(checked));
  const std::string lock = new_lock(type);
  auto callback = [stats = &impl.type_stats, latencies = &impl.local_accepts.latencies, finish,
                   type, lock, done = std::move(done)](Result<Job> next) {
    const auto latency = latencies->take(lock);
    if (!finish->done) return done(next.status());  // its failure, or the Jobs closing
    const Finished& finished = finish->finished;
    if (finished.counted) {
      stats->record_finished(finish->job.type, finished.succeeded,
                             run_time_since(finished.started));
    }
    // The job is finished whatever the wait gives: no job to hand over, not an error.
    if (!next.ok()) return done(std::optional<Job>());
    if (latency) stats->record_accepted(type, *latency);
    done(std::optional<Job>(std::move(*next)));
  };
  impl.accept_waiters.submit(type, accept, lock, kv::Clock::now() + accept.timeout, std::nullopt,
                             std::move(callback), commit, reserved, std::move(finish));
}

}  // namespace

Result<std::optional<Job>> Jobs::finish_and_accept(Job& job, const FinishOptions& finish,
                                                   const std::vector<std::string>& types,
                                                   const AcceptOptions& accept) {
  const auto start = kv::Clock::now();
  const std::vector<std::string> names = types_or_own(job, types);
  KVQ_RETURN_IF_ERROR(validate_accept_any(names, accept));
  KVQ_ASSIGN_OR_RETURN(Checked checked, check_finish(job, finish, options_.max_data_bytes));
  if (rides_round(*store_, names)) {
    return wait_for<Result<std::optional<Job>>>([&](auto done) {
      finish_in_round(*impl_, job, std::move(checked), names[0], accept,
                      AcceptWaiters::Commit::kBlocking, std::move(done));
    });
  }
  const bool take_next = takes_next(*store_, *impl_, names);
  FinishThenAccept call(impl_->accept_scope, job, std::move(checked), names, accept, take_next);
  auto committed =
      kv::run(*store_, allowing_stale_reads([&](kv::Transaction& txn) { return call(txn); }),
              options_.retry);
  call.settle();
  KVQ_ASSIGN_OR_RETURN(FinishedAndTaken done, std::move(committed));
  call.record(impl_->type_stats, done);
  if (done.next) return std::move(done.next);
  const auto rest = wait_after(accept, start, take_next);
  if (!rest || left_to_waiters(*store_, *impl_, names, *rest)) return std::optional<Job>();
  // The job is finished whatever the wait gives: no job to hand over, not an error.
  auto next = accept_any(names, *rest);
  if (!next.ok()) return std::optional<Job>();
  return std::optional<Job>(std::move(*next));
}

uint64_t Jobs::finish_and_accept_async(Job job, FinishOptions finish,
                                       std::vector<std::string> types, AcceptOptions accept,
                                       std::function<void(Result<std::optional<Job>>)> done) {
  const auto start = kv::Clock::now();
  std::vector<std::string> names = types_or_own(job, types);
  if (Status invalid = validate_accept_any(names, accept); !invalid.ok()) {
    done(invalid);
    return 0;
  }
  auto checked = check_finish(job, finish, options_.max_data_bytes);
  if (!checked.ok()) {
    done(checked.status());
    return 0;
  }
  // The wait's ticket, handed out now: a cancel before the wait is queued ends it at once when
  // it is (AcceptWaiters::reserve).
  AcceptWaiters& waiters = impl_->accept_waiters;
  const uint64_t ticket = accept.timeout.count() > 0 ? waiters.reserve() : 0;
  if (rides_round(*store_, names)) {
    finish_in_round(*impl_, std::move(job), std::move(*checked), names[0], accept,
                    AcceptWaiters::Commit::kAsync, std::move(done), ticket);
    return ticket;
  }
  const bool take_next = takes_next(*store_, *impl_, names);
  auto call = std::make_shared<FinishThenAccept>(impl_->accept_scope, std::move(job),
                                                 std::move(*checked), names, accept, take_next);
  // As finish_async: on a nonblocking store the commit never blocks this thread; elsewhere it
  // does, here, rather than on the 8 threads the accept waiters' looks run on (finishes
  // filled them and held every look back: 115 jobs/s against 305 on etcd).
  kv::run_async(
      *store_, allowing_stale_reads([call](kv::Transaction& txn) { return (*call)(txn); }),
      [this, &waiters, call, names = std::move(names), accept = std::move(accept), start, take_next,
       ticket, done = std::move(done)](Result<FinishedAndTaken> taken) {
        call->settle();
        auto end = [&](Result<std::optional<Job>> result) {
          if (ticket) waiters.forget(ticket);
          done(std::move(result));
        };
        if (!taken.ok()) return end(taken.status());
        call->record(impl_->type_stats, *taken);
        const auto rest = wait_after(accept, start, take_next);
        if (taken->next || !rest) return end(std::move(taken->next));
        if (left_to_waiters(*store_, *impl_, names, *rest)) return end(std::optional<Job>());
        // The job is finished whatever the wait gives: no job to hand over, not an error.
        auto next = [done](Result<Job> job) {
          if (!job.ok()) return done(std::optional<Job>());
          done(std::optional<Job>(std::move(*job)));
        };
        // As accept_async and accept_any_async wait: one type with the waiters a burst of adds
        // serves in one transaction (only on a nonblocking store: elsewhere one type rode the
        // round), several as one waiter of them all. The look is asynchronous on a nonblocking
        // store whatever the time left, as this runs on the caller's event loop: a blocking
        // look there that found every due job claimed slept in kv::run's backoff while the
        // claimants' commits waited for that same loop (HTTP, 16 workers with `next`'s timeout
        // 0, relaxed: 90-180 jobs/s and finishes unanswered for 30 s, against 5.7k before).
        if (names.size() == 1) {
          queue_accept(names[0], *rest, std::move(next), store_->nonblocking(), ticket);
        } else {
          queue_accept_any(names, *rest, std::move(next), ticket);
        }
      },
      options_.retry);
  return ticket;
}

}  // namespace kvq::jobs
