// jobs/accept/any_picks.h — the look of an accept over several types (Jobs::accept_any, and the
// accept half of finish_and_accept): each type's candidate is chosen as accept chooses it
// (pending_picks.h: flow control, groups), and the best of them is taken — best priority, then
// earliest place (scheduled time, or a group's turn), then the first type given.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jobs/accept/pending_picks.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

// kInvalidArgument unless `types` holds 1..kMaxAcceptTypes distinct valid type names, or the
// options are bad (validate_accept).
Status validate_accept_any(const std::vector<std::string>& types, const AcceptOptions& options);
// OK if every type of `types` exists, else kNotFound naming the first that does not.
Status require_types(kv::Transaction& txn, const Keys& keys, const std::vector<std::string>& types);
// One taker per type (its lock tagged with that type, new_lock), for accept.worker and
// accept.worker_type: the job taken from types[i] goes to takers[i].
std::vector<Taker> takers_for(const std::vector<std::string>& types, const AcceptOptions& accept);

// What a look that found nothing leaves its caller to wait on.
struct AnyLook {
  // The earliest time a job of one of the types falls due, or flow control lets one through.
  std::optional<int64_t> next_due;
  // Armed (when asked for) at the look's read version: each type's pending token, and its
  // activity token when max_running held it back (as ArmWatch::kAlways does for one type).
  std::vector<kv::Watch> watches;
};

// In the caller's transaction, without checking that the types exist: the best due job of
// `types` for its taker, nullopt when none is due (or allowed). With `claims` (the attempt's),
// passes over jobs other attempts here claimed, as try_accept_many does. With `look`, fills
// it, arming watches when `arm`.
Result<std::optional<Job>> try_accept_any(kv::Transaction& txn, const AcceptScope& scope,
                                          const std::vector<std::string>& types,
                                          const AcceptOptions& accept,
                                          const std::vector<Taker>& takers, Pick pick,
                                          PickClaims* claims, AnyLook* look, bool arm);

// The retry state of an accept over several types that runs in its own transactions: after an
// unknown commit result, find() tells whether the previous try took a job (then it did commit).
class AnyAttempt {
 public:
  // Counted in flight (AcceptInFlight) in `local` for every type, and holding the claims of
  // its latest try (PickClaims), until settle() or its end; null `local`: neither (a caller
  // that makes no look).
  AnyAttempt(LocalAccepts* local, std::vector<std::string> types, std::vector<Taker> takers);
  const std::vector<std::string>& types() const { return types_; }
  const std::vector<Taker>& takers() const { return takers_; }
  // First in each try, before its first read: lets go of the claims of the try before.
  void begin_try() {
    if (claims_) claims_->new_try();
  }
  // Before a try's look: the job a previous try took, if that try committed. Reads nothing
  // unless an earlier commit's result was unknown (kv::Transaction::earlier_commit_unknown).
  Result<std::optional<Job>> recognise(kv::Transaction& txn, const Keys& keys) const;
  // In order on the first try (passing over the jobs other attempts here claimed: 16
  // threads' finish_and_accept all taking the head collided and retried, finish and all),
  // spread on a retry (a conflict with an acceptor of another process).
  Pick next_pick();
  // Its look is over: no longer counted in flight, and its claims let go.
  void settle() {
    in_flight_.clear();
    if (claims_) claims_->let_go();
  }
  // The claims of the try under way (null if the attempt makes no look).
  PickClaims* claims() { return claims_.get(); }
  // After a try's look (whose first read fixed its version: asking first would cost etcd a
  // round trip): remembers the version, for recognise.
  Status looked(kv::Transaction& txn);

 private:
  std::vector<std::string> types_;
  std::vector<Taker> takers_;
  std::optional<uint64_t> version_;
  bool tried_ = false;
  std::vector<std::unique_ptr<AcceptInFlight>> in_flight_;
  std::unique_ptr<PickClaims> claims_;
};

struct AnyOutcome {
  Result<std::optional<Job>> job;  // kNotFound naming a type that does not exist
  AnyLook look;
};
// checks the types exist and looks (try_accept_many's retries and recognition, over several
// types) in a transaction of its own, without blocking this thread on a nonblocking store
// (kv::run_async); `done` may run on another thread. The Jobs behind `scope` must outlive the
// call.
void attempt_accept_any_async(kv::Store& store, const AcceptScope& scope,
                              std::vector<std::string> types, AcceptOptions accept,
                              std::vector<Taker> takers, bool arm,
                              std::function<void(AnyOutcome)> done);

}  // namespace kvq::jobs
