// jobs/accept/round_finishes.h — the finishes of workers that wait for their next job, committed in
// the accept waiters' round that takes that job (finish_and_accept on a store whose calls are
// round trips: etcd).
//
// There a finish and the accept after it were two commits, each waiting for a Raft round, and
// the accept then waited for the round of the type's waiters under way as well. Riding the
// round, the finishes of every worker it serves and the jobs it takes for them share one
// commit. Each finish is decided on its own: one that fails (the worker was fenced out, the
// type is gone) changes nothing, its worker takes no job, and the others go on. A finish that
// committed in a round that took no job for its worker leaves a plain waiter, which waits on
// as any accept does.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jobs/accept/pending_picks.h"
#include "jobs/worker_calls.h"

namespace kvq::jobs {

// A worker's finish waiting to be committed by a round (AcceptWaiters::submit), shared by the
// waiter and its caller. The round's thread owns it while a round carries it; the caller reads
// it once its waiter completed.
struct WaitingFinish {
  WaitingFinish(Job job, Checked checked) : job(std::move(job)), checked(std::move(checked)) {}
  const Job job;
  const Checked checked;
  // Committed (or found committed by an earlier try): what it decided, for the type's stats.
  bool done = false;
  Finished finished;
  // What the latest try decided.
  std::optional<Result<Finished>> tried;
  // finish_checked, counting its answer as finish's own calls do (across every round's try).
  std::function<Result<Finished>(kv::Transaction&, const Keys&, const Job&, const Checked&)>
      finish_counted = counting(finish_checked);
};

// The finishes a round carries: one slot per taker, null for a waiter with none to commit.
class RoundFinishes : public LookRiders {
 public:
  RoundFinishes(std::string type, std::vector<std::shared_ptr<WaitingFinish>> slots)
      : type_(std::move(type)), slots_(std::move(slots)) {}

  Result<std::vector<bool>> before_look(kv::Transaction& txn, const Keys& keys,
                                        bool stale) override;
  // The rows of the finishes still to commit.
  std::vector<std::string> reads(const Keys& keys) const override;
  bool wrote() const override { return wrote_; }
  bool wants_current_reads() const override { return confirming_; }

  // After the round's attempt, knowing its fate. `committed`: its last try committed, or
  // wrote nothing and needed no commit. Then each finish of that try is done, or failed with
  // the status that slot's waiter is to end with (null where there is none); else nothing of
  // the try counts and the finishes wait for another round.
  struct Settled {
    std::vector<std::optional<Status>> failed;  // by slot
    size_t done = 0;                            // finishes now done
  };
  Settled settle(bool committed);
  // Whether a finish still waits for its commit: such a waiter is not ended by its deadline.
  static bool pending(const std::shared_ptr<WaitingFinish>& finish) {
    return finish && !finish->done;
  }

 private:
  std::string type_;
  std::vector<std::shared_ptr<WaitingFinish>> slots_;
  bool wrote_ = false;       // by the latest try
  bool confirming_ = false;  // a failure decided on stale reads is being confirmed
};

}  // namespace kvq::jobs
