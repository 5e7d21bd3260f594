// try_accept_many and try_accept (pending_picks.h): one look that takes up to a taker each, in
// the caller's transaction. The look is a ManyTake, step by step: open the type's flow gate,
// read ahead the rows it will take, then take jobs without a group and groups' turns in the
// order they stand until every taker has one or nothing due is left.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "jobs/accept/pending_picks.h"
#include "jobs/accept/takes.h"
#include "jobs/group_queue.h"
#include "jobs/job_store.h"

namespace kvq::jobs {
namespace {

class ManyTake {
 public:
  ManyTake(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
           const AcceptOptions& accept, const std::vector<Taker>& takers,
           std::optional<int64_t>* next_due, Pick pick, HeldBack* held, bool guess_rows,
           PickClaims* claims)
      : txn_(txn),
        scope_(scope),
        type_(type),
        accept_(accept),
        takers_(takers),
        next_due_(next_due),
        at_random_(pick == Pick::kSpread),
        held_(held),
        guess_rows_(guess_rows),
        claims_(claims),
        now_(now_ms()),
        max_time_(accept.max_scheduled_time_ms.value_or(now_)),
        spread_(std::max(scope.options.accept_spread, takers.size())),
        ungrouped_(ungrouped_levels(txn, scope, type, accept, takers.size(), max_time_)) {}

  Result<std::vector<Job>> run() {
    KVQ_RETURN_IF_ERROR(open_gate());
    if (gate_.allowed == 0)
      return NotFound("no job of type '" + std::string(type_) + "' may start");
    open_groups();
    KVQ_RETURN_IF_ERROR(prefetch_rows());
    while (taken_.size() < gate_.allowed) {
      // Without a bound of its own, the turn of a group served during this accept counts as due.
      if (groups_ && !accept_.max_scheduled_time_ms) groups_->extend_due(end_of_ms(now_ms()));
      KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry* job, ungrouped_.head());
      const OrderedIndex::Entry* turn = nullptr;
      if (groups_) {
        KVQ_ASSIGN_OR_RETURN(turn, groups_->head());
      }
      if (!job && !turn) break;
      const Taker& taker = takers_[taken_.size()];
      if (!turn || (job && !turn_first(*turn, *job))) {
        KVQ_ASSIGN_OR_RETURN(const bool took, take_ungrouped(taker));
        if (!took) break;
      } else {
        KVQ_RETURN_IF_ERROR(take_group_turn(taker));
      }
    }
    note_due(ungrouped_.earliest_not_due());
    if (groups_ && groups_->earliest_not_due()) note_due(us_to_ms(*groups_->earliest_not_due()));
    if (taken_.empty()) return NotFound("no job of type '" + std::string(type_) + "' is due");
    record_flow(txn_, scope_.keys, type_, gate_, taken_.size());
    return std::move(taken_);
  }

 private:
  void note_due(std::optional<int64_t> at) {
    if (next_due_ && at && (!*next_due_ || *at < **next_due_)) *next_due_ = at;
  }

  // The type's settings (the flow gate's first read) and the queue's head come in one read (on
  // etcd one round trip instead of two; nothing on LMDB).
  Status open_gate() {
    txn_.prefetch({scope_.keys.timeout(type_)}, {ungrouped_.next_read()});
    KVQ_ASSIGN_OR_RETURN(gate_, open_flow_gate(txn_, scope_.keys, type_, takers_.size(), now_));
    if (gate_.allowed < takers_.size()) {
      if (held_) *held_ = HeldBack{true, gate_.full};
      note_due(gate_.reopens_ms);
    }
    return Status::OK();
  }

  // A type that never had a job with a group reads nothing more. One that has takes turns
  // between its groups: a group served goes to the back of the line (save_job), so a batch
  // takes one job per group and goes around again when they run out.
  void open_groups() {
    if (!gate_.has_groups) return;
    groups_.emplace(txn_, scope_.keys.group_queue(type_), end_of_ms(max_time_),
                    accept_.max_priority, spread_,
                    2 * kMaxPriorityLevels + static_cast<int>(gate_.allowed),
                    ms_to_us(kPendingHeadWindow), &scope_.local.heads);
  }

  // In order and without groups, the jobs taken are the first due ones: their rows come in one
  // read (on etcd one round trip instead of one each; nothing on LMDB). At most kPrefetchRows,
  // within etcd's default --max-txn-ops (128 ranges in one Txn). Guessed rows the handle
  // remembers are not fetched.
  Status prefetch_rows() {
    if (at_random_ || groups_ || gate_.allowed <= 1) return Status::OK();
    KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry* first, ungrouped_.head());
    if (!first) return Status::OK();
    KVQ_ASSIGN_OR_RETURN(auto names,
                         ungrouped_.first_names(std::min(gate_.allowed, kPrefetchRows)));
    std::vector<std::string> rows;
    for (const auto& name : names) rows.push_back(scope_.keys.job(type_, name));
    if (rows.size() > 1) txn_.prefetch(rows, {}, {.remembered = guess_rows_});
    return Status::OK();
  }

  // The job without a group at the head goes to `taker`. In order: the first due job. Spread:
  // one at random among those read, so that acceptors that collided on the same snapshot
  // seldom pick the same ones again. False when there is none to take.
  Result<bool> take_ungrouped(const Taker& taker) {
    std::optional<OrderedIndex::Entry> entry;
    if (claims_) {
      KVQ_ASSIGN_OR_RETURN(entry, ungrouped_.take(at_random_, [&](const std::string& id) {
        return claims_->claim(type_, id);
      }));
    } else {
      KVQ_ASSIGN_OR_RETURN(entry, ungrouped_.take(at_random_));
    }
    if (!entry) {
      // Every due job read is being taken by another attempt here: taking one would fail this
      // commit. Looked for again in a moment: if that attempt fails, it is still due.
      claims_->note_all_claimed();
      note_due(now_ + 1);
      return false;
    }
    KVQ_ASSIGN_OR_RETURN(Job took, take_job(txn_, scope_, type_, entry->name, entry->priority,
                                            entry->time, "", taker, gate_, guess_rows_));
    taken_.push_back(std::move(took));
    return true;
  }

  // The group whose turn stands at the head gives `taker` its first job, unless it is full.
  Status take_group_turn(const Taker& taker) {
    KVQ_ASSIGN_OR_RETURN(auto turn, groups_->take(at_random_));
    KVQ_ASSIGN_OR_RETURN(auto took, take_turn(txn_, scope_, type_, turn, taker, gate_));
    if (took) {
      taken_.push_back(std::move(*took));
    } else if (++full_groups_ >= spread_) {
      // Groups found full are marked so, but only an accept that commits keeps the marks: one
      // that takes nothing must not walk every group of a type.
      note_due(groups_->earliest_not_due() ? std::optional(us_to_ms(*groups_->earliest_not_due()))
                                           : std::nullopt);
      groups_.reset();
    }
    return Status::OK();
  }

  kv::Transaction& txn_;
  const AcceptScope& scope_;
  const std::string_view type_;
  const AcceptOptions& accept_;
  const std::vector<Taker>& takers_;
  std::optional<int64_t>* const next_due_;
  const bool at_random_;
  HeldBack* const held_;
  const bool guess_rows_;
  PickClaims* const claims_;
  const int64_t now_;
  const int64_t max_time_;
  const size_t spread_;
  DueLevels ungrouped_;
  FlowGate gate_;
  std::optional<DueLevels> groups_;
  size_t full_groups_ = 0;
  std::vector<Job> taken_;
};

}  // namespace

Result<std::vector<Job>> try_accept_many(kv::Transaction& txn, const AcceptScope& scope,
                                         std::string_view type, const AcceptOptions& accept,
                                         const std::vector<Taker>& takers,
                                         std::optional<int64_t>* next_due, Pick pick,
                                         HeldBack* held, bool guess_rows, PickClaims* claims) {
  return ManyTake(txn, scope, type, accept, takers, next_due, pick, held, guess_rows, claims).run();
}

Result<Job> try_accept(kv::Transaction& txn, const AcceptScope& scope, std::string_view type,
                       const AcceptOptions& accept, const std::string& lock,
                       std::optional<int64_t>* next_due) {
  KVQ_ASSIGN_OR_RETURN(auto jobs, try_accept_many(txn, scope, type, accept,
                                                  {{lock, accept.worker, accept.worker_type}},
                                                  next_due, Pick::kInOrder));
  return std::move(jobs.front());
}

}  // namespace kvq::jobs
