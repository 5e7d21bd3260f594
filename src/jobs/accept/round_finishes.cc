#include "jobs/accept/round_finishes.h"

#include <algorithm>

#include "jobs/types.h"

namespace kvq::jobs {
namespace {

// What a finish decides without writing, and so may have decided on reads behind the latest
// commit (allowing_stale_reads): confirmed on a current read before its waiter hears of it.
bool needs_current_read(Code code) {
  return code == Code::kFailedPrecondition || code == Code::kNotFound || code == Code::kWrongState;
}

// A finish's own failure, which ends its waiter and not the round: the decisions above, and
// input its job's row refuses.
bool fails_alone(Code code) { return needs_current_read(code) || code == Code::kInvalidArgument; }

}  // namespace

std::vector<std::string> RoundFinishes::reads(const Keys& keys) const {
  std::vector<std::string> rows;
  for (const auto& finish : slots_) {
    if (pending(finish)) rows.push_back(keys.job(finish->job.type, finish->job.id));
  }
  return rows;
}

Result<std::vector<bool>> RoundFinishes::before_look(kv::Transaction& txn, const Keys& keys,
                                                     bool stale) {
  wrote_ = false;
  std::vector<bool> takes(slots_.size(), true);
  if (std::none_of(slots_.begin(), slots_.end(), pending)) return takes;
  for (auto& finish : slots_) {
    if (pending(finish)) finish->tried.reset();  // an earlier try's
  }
  // Their rows and the settings came with the look's first read (accept_attempt).
  // A type gone: no finish commits, as finish_and_accept checks its types first.
  const Status type = require_type(txn, keys, type_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    auto& finish = slots_[i];
    if (!pending(finish)) continue;
    Result<Finished> done =
        type.ok() ? finish->finish_counted(txn, keys, finish->job, finish->checked) : type;
    if (done.ok()) {
      if (!done->recognised) wrote_ = true;
    } else {
      const Code code = done.status().code();
      if (!fails_alone(code)) return done.status();  // the round's try fails (a read's error)
      if (stale && !confirming_ && needs_current_read(code))
        return confirm_on_current_read(confirming_);
      takes[i] = false;
    }
    finish->tried = std::move(done);
  }
  return takes;
}

RoundFinishes::Settled RoundFinishes::settle(bool committed) {
  Settled settled{std::vector<std::optional<Status>>(slots_.size())};
  for (size_t i = 0; i < slots_.size(); ++i) {
    auto& finish = slots_[i];
    if (!pending(finish) || !finish->tried) continue;
    if (committed) {
      if (finish->tried->ok()) {
        finish->done = true;
        finish->finished = **finish->tried;
        ++settled.done;
      } else {
        settled.failed[i] = finish->tried->status();
      }
    }
    finish->tried.reset();
  }
  return settled;
}

}  // namespace kvq::jobs
