#include "jobs/accept/any_picks.h"

#include <algorithm>
#include <memory>
#include <set>
#include <tuple>

#include "jobs/types.h"
#include "jobs/validation.h"

namespace kvq::jobs {

Status validate_accept_any(const std::vector<std::string>& types, const AcceptOptions& options) {
  if (types.empty() || types.size() > kMaxAcceptTypes) {
    return InvalidArgument("an accept over several types takes 1.." +
                           std::to_string(kMaxAcceptTypes) + " types, not " +
                           std::to_string(types.size()));
  }
  std::set<std::string_view> seen;
  for (const std::string& type : types) {
    KVQ_RETURN_IF_ERROR(validate_accept(type, options));
    if (!seen.insert(type).second)
      return InvalidArgument("type '" + type + "' is named twice in an accept");
  }
  return Status::OK();
}

Status require_types(kv::Transaction& txn, const Keys& keys,
                     const std::vector<std::string>& types) {
  for (const std::string& type : types) KVQ_RETURN_IF_ERROR(require_type(txn, keys, type));
  return Status::OK();
}

std::vector<Taker> takers_for(const std::vector<std::string>& types, const AcceptOptions& accept) {
  std::vector<Taker> takers;
  for (const std::string& type : types)
    takers.push_back({new_lock(type), accept.worker, accept.worker_type});
  return takers;
}

Result<std::optional<Job>> try_accept_any(kv::Transaction& txn, const AcceptScope& scope,
                                          const std::vector<std::string>& types,
                                          const AcceptOptions& accept,
                                          const std::vector<Taker>& takers, Pick pick,
                                          PickClaims* claims, AnyLook* look, bool arm) {
  const Keys& keys = scope.keys;
  if (look) *look = AnyLook{};
  const bool arming = look && arm;
  if (arming) {
    // At the look's own read version: an add the look cannot see changes a token after it (so
    // the look may have read a state a little behind the latest commit, as accept_attempt's).
    txn.allow_stale_reads();
    for (const std::string& type : types) {
      KVQ_ASSIGN_OR_RETURN(auto watch, txn.watch(keys.pending_token(type)));
      look->watches.push_back(std::move(watch));
    }
  }
  // Full (max_running held the type back): only a run's end frees a slot, and it rewrites the
  // activity token, so the look watches that too (ArmWatch).
  auto watch_if_full = [&](const HeldBack& held, const std::string& type) -> Status {
    if (!arming || !held.by_running) return Status::OK();
    KVQ_ASSIGN_OR_RETURN(auto watch, txn.watch(keys.activity_token(type)));
    look->watches.push_back(std::move(watch));
    return Status::OK();
  };
  // The i-th type's own look, taking for its taker: nullopt when nothing is due.
  auto take = [&](size_t i, HeldBack* held) -> Result<std::optional<Job>> {
    auto taken = try_accept_many(txn, scope, types[i], accept, {takers[i]},
                                 look ? &look->next_due : nullptr, pick, held, false, claims);
    if (taken.ok()) return std::optional<Job>(std::move(taken->front()));
    if (taken.status().code() != Code::kNotFound) return taken.status();
    return std::optional<Job>();
  };
  if (types.size() == 1) {
    // One type: its own look takes the job at once. Ranking it first (peek_candidate) would
    // read its queue's head twice, which finish_and_accept, whose workers name one type, did
    // for every job.
    HeldBack held;
    KVQ_ASSIGN_OR_RETURN(auto job, take(0, &held));
    KVQ_RETURN_IF_ERROR(watch_if_full(held, types[0]));
    return job;
  }
  struct Ranked {
    Candidate candidate;
    size_t index;  // in `types`: the first type given wins a tie
  };
  std::vector<Ranked> ranked;
  for (size_t i = 0; i < types.size(); ++i) {
    HeldBack held;
    KVQ_ASSIGN_OR_RETURN(auto candidate, peek_candidate(txn, scope, types[i], accept,
                                                        look ? &look->next_due : nullptr, &held));
    if (candidate) ranked.push_back({*candidate, i});
    KVQ_RETURN_IF_ERROR(watch_if_full(held, types[i]));
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    return std::tie(a.candidate.priority, a.candidate.place_us, a.index) <
           std::tie(b.candidate.priority, b.candidate.place_us, b.index);
  });
  for (const Ranked& r : ranked) {
    // The type's own look again, in this transaction: it finds the candidate just seen (the
    // first in order; one of its priority when spread).
    KVQ_ASSIGN_OR_RETURN(auto job, take(r.index, nullptr));
    if (job) return job;
  }
  return std::optional<Job>();
}

Result<std::optional<Job>> AnyAttempt::recognise(kv::Transaction& txn, const Keys& keys) const {
  if (!version_ || !txn.earlier_commit_unknown()) return std::optional<Job>();
  for (size_t i = 0; i < types_.size(); ++i) {
    KVQ_ASSIGN_OR_RETURN(auto found, find_accepted(txn, keys, types_[i], *version_, {takers_[i]}));
    if (!found.empty()) return std::optional<Job>(std::move(found.front()));
  }
  return std::optional<Job>();
}

AnyAttempt::AnyAttempt(LocalAccepts* local, std::vector<std::string> types,
                       std::vector<Taker> takers)
    : types_(std::move(types)), takers_(std::move(takers)) {
  if (!local) return;
  for (const std::string& type : types_)
    in_flight_.push_back(std::make_unique<AcceptInFlight>(local->in_flight, type));
  claims_ = std::make_unique<PickClaims>(local->claims);
}

Pick AnyAttempt::next_pick() {
  const Pick pick = tried_ ? Pick::kSpread : Pick::kInOrder;
  tried_ = true;
  return pick;
}

Status AnyAttempt::looked(kv::Transaction& txn) {
  KVQ_ASSIGN_OR_RETURN(version_, txn.read_version());
  return Status::OK();
}

void attempt_accept_any_async(kv::Store& store, const AcceptScope& scope,
                              std::vector<std::string> types, AcceptOptions accept,
                              std::vector<Taker> takers, bool arm,
                              std::function<void(AnyOutcome)> done) {
  struct State {
    AnyAttempt attempt;
    AcceptOptions accept;
    bool arm;
    AnyLook look;  // of the last try, the one whose outcome `done` gets
  };
  auto s = std::make_shared<State>(State{
      AnyAttempt(&scope.local, std::move(types), std::move(takers)), std::move(accept), arm, {}});
  kv::run_async(
      store,
      [s, &scope](kv::Transaction& txn) -> Result<std::optional<Job>> {
        const Keys& keys = scope.keys;
        s->attempt.begin_try();
        s->look = AnyLook{};  // an earlier try's
        KVQ_ASSIGN_OR_RETURN(auto recognised, s->attempt.recognise(txn, keys));
        if (recognised) return recognised;
        KVQ_RETURN_IF_ERROR(require_types(txn, keys, s->attempt.types()));
        auto job = try_accept_any(txn, scope, s->attempt.types(), s->accept, s->attempt.takers(),
                                  s->attempt.next_pick(), s->attempt.claims(), &s->look, s->arm);
        if (job.ok() && !*job)
          KVQ_RETURN_IF_ERROR(s->attempt.claims()->after_nothing_taken("its types"));
        KVQ_RETURN_IF_ERROR(s->attempt.looked(txn));
        return job;
      },
      [s, done = std::move(done)](Result<std::optional<Job>> job) {
        s->attempt.settle();
        done(AnyOutcome{std::move(job), std::move(s->look)});
      },
      scope.options.retry);
}

}  // namespace kvq::jobs
