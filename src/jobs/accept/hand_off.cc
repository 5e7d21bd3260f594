// An add's hand-off of its new job to a waiting accept (hand_off.h).
#include "jobs/accept/hand_off.h"

#include "jobs/accept/takes.h"
#include "jobs/job_store.h"

namespace kvq::jobs {
namespace {

// What an accept's flow gate (flow_control.h) would decide by reading more than the type's row.
bool gated(const TypeSettings& settings) {
  return settings.paused || settings.max_running || settings.rate || settings.has_groups;
}

}  // namespace

Result<bool> take_hand_off(kv::Transaction& txn, std::string_view type, std::string_view id,
                           const TypeSettings& settings, JobRow& row, HandOff& hand_off) {
  const AcceptScope& scope = hand_off.scope;
  hand_off.job.reset();
  const int64_t now = now_ms();
  if (!row.group.empty() || row.scheduled > now || gated(settings)) return false;
  // Read without snapshot, as a look reads it: a pending job of the type committed since (here
  // or in another process) fails this commit, and the retry finds it queued ahead.
  const auto [begin, end] = scope.keys.pending_index(type).all();
  KVQ_ASSIGN_OR_RETURN(auto ahead, txn.get_range(begin, end, {.limit = 1}));
  if (!ahead.empty()) return false;
  start_run(row, hand_off.claim.taker, now);
  scope.local.latencies.note(hand_off.claim.taker.lock, Millis(row.started - row.scheduled));
  hand_off.job = job_of_run(type, id, row, settings.timeout);
  return true;
}

Result<std::optional<Job>> handed_off_earlier(kv::Transaction& txn, std::string_view type,
                                              std::string_view id, const JobRow& row,
                                              const HandOff& hand_off) {
  if (row.lock != hand_off.claim.taker.lock || state_of(row) != State::kRunning)
    return std::optional<Job>();
  KVQ_ASSIGN_OR_RETURN(auto settings, txn.get(hand_off.scope.keys.timeout(type)));
  if (!settings) return std::optional<Job>();  // the type was deleted since
  KVQ_ASSIGN_OR_RETURN(TypeSettings decoded, decode_type(*settings));
  return std::optional<Job>(job_of_run(type, id, row, decoded.timeout));
}

}  // namespace kvq::jobs
