// Flow control: the setters of a type's pause, max_running and rate, and the gate every accept
// passes in its own transaction (flow_control.h).
#include "jobs/flow_control.h"

#include <algorithm>
#include <map>
#include <utility>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/own_timeouts.h"
#include "jobs/types.h"
#include "jobs/validation.h"
#include "util/mutex.h"

namespace kvq::jobs {

// Wakes the type's waiting accepts everywhere, so that they look again under the change: a
// waiter of a type that is not full watches the pending token, one held by
// max_running the activity token (accept_waiters.h), and a resume or a raised limit must reach
// both. Flow settings change seldom; the activity token's other watcher, the notifier, reads
// nothing new on a spurious fire.
Status change_flow(kv::Transaction& txn, const Keys& keys, std::string_view type,
                   const std::function<void(TypeSettings&)>& change) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(change_type(txn, keys, type, change));
  txn.touch(keys.pending_token(type));
  txn.touch(keys.activity_token(type));
  return Status::OK();
}

namespace {

Result<std::vector<int64_t>> decode_window(std::string_view bytes) {
  auto t = Tuple::unpack(bytes);
  if (!t.ok()) return Internal("corrupt rate window");
  std::vector<int64_t> out;
  for (const Element& e : t->elements()) {
    if (!e.is_int()) return Internal("corrupt rate window");
    out.push_back(e.as_int());
  }
  return out;
}

}  // namespace

Status validate_rate_limit(const RateLimit& rate) {
  if (rate.limit < 1 || rate.limit > kMaxRateLimit)
    return InvalidArgument("rate limit must be between 1 and " + std::to_string(kMaxRateLimit));
  if (rate.period.count() < 1 || rate.period > kMaxRatePeriod) {
    return InvalidArgument("rate period must be between 1 ms and " +
                           std::to_string(kMaxRatePeriod.count()) + " ms");
  }
  return Status::OK();
}

bool paused_at(const TypeSettings& settings, int64_t now) {
  return settings.paused && (!settings.paused_until_ms || *settings.paused_until_ms > now);
}

Status Jobs::pause_type(std::string_view type, std::optional<int64_t> until_ms) {
  return in_own_transaction(&Jobs::pause_type, type, until_ms);
}

Status Jobs::pause_type(kv::Transaction& txn, std::string_view type,
                        std::optional<int64_t> until_ms) {
  return change_flow(txn, impl_->keys, type, [&](TypeSettings& settings) {
    settings.paused = true;
    settings.paused_until_ms = until_ms;
  });
}

Status Jobs::resume_type(std::string_view type) {
  return in_own_transaction(&Jobs::resume_type, type);
}

Status Jobs::resume_type(kv::Transaction& txn, std::string_view type) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, get_type(txn, type));
  if (!settings.paused) return Status::OK();
  return change_flow(txn, impl_->keys, type, [](TypeSettings& s) {
    s.paused = false;
    s.paused_until_ms.reset();
  });
}

Status Jobs::set_max_running(std::string_view type, std::optional<uint32_t> max_running) {
  return in_own_transaction(&Jobs::set_max_running, type, max_running);
}

Status Jobs::set_max_running(kv::Transaction& txn, std::string_view type,
                             std::optional<uint32_t> max_running) {
  if (max_running && (*max_running < 1 || *max_running > kMaxRunningLimit)) {
    return InvalidArgument("max_running must be between 1 and " + std::to_string(kMaxRunningLimit));
  }
  return change_flow(txn, impl_->keys, type,
                     [&](TypeSettings& settings) { settings.max_running = max_running; });
}

Status Jobs::set_rate_limit(std::string_view type, std::optional<RateLimit> rate) {
  return in_own_transaction(&Jobs::set_rate_limit, type, rate);
}

Status Jobs::set_rate_limit(kv::Transaction& txn, std::string_view type,
                            std::optional<RateLimit> rate) {
  if (rate) KVQ_RETURN_IF_ERROR(validate_rate_limit(*rate));
  KVQ_RETURN_IF_ERROR(
      change_flow(txn, impl_->keys, type, [&](TypeSettings& settings) { settings.rate = rate; }));
  // Without a limit the window means nothing; a limit set again later starts afresh.
  if (!rate) txn.clear(impl_->keys.rate_window(type));
  return Status::OK();
}

Result<FlowGate> open_flow_gate(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                size_t wanted, int64_t now) {
  FlowGate gate;
  gate.allowed = wanted;
  KVQ_ASSIGN_OR_RETURN(auto row, txn.get(keys.timeout(type)));
  if (!row) return gate;
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, decode_type(*row));
  gate.has_groups = settings.has_groups;
  gate.type_timeout = settings.timeout;
  gate.max_running_per_group = settings.max_running_per_group;
  if (paused_at(settings, now)) {
    gate.allowed = 0;
    gate.reopens_ms = settings.paused_until_ms;
    return gate;
  }
  if (settings.max_running) {
    // Not a snapshot read, and never more than the limit: an accept that finds room read the
    // whole range, so another's new entry, or a run's end, conflicts with it. No counter key:
    // a counter would be one more key every accept and every run's end of the type writes.
    KVQ_ASSIGN_OR_RETURN(uint64_t running,
                         count_running(txn, keys, type, *settings.max_running, false));
    const size_t room = *settings.max_running - std::min<size_t>(running, *settings.max_running);
    if (room < gate.allowed) {
      gate.allowed = room;
      gate.full = true;
    }
    if (gate.allowed == 0) return gate;
  }
  if (settings.rate) {
    const RateLimit& rate = *settings.rate;
    gate.rate = rate;
    KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(keys.rate_window(type)));
    std::vector<int64_t> window;
    if (bytes) {
      KVQ_ASSIGN_OR_RETURN(window, decode_window(*bytes));
    }
    // Stamps never go back in the window's (commit) order, though clocks may: so an entry
    // dropped as expired is older than any window the entries after it can share with it, and
    // "at most `limit` in any window of `period`" holds of the stamps as written.
    const int64_t stamp = window.empty() ? now : std::max(now, window.back());
    gate.stamp_ms = stamp;
    const int64_t oldest_kept = stamp - rate.period.count() + 1;
    window.erase(window.begin(), std::find_if(window.begin(), window.end(),
                                              [&](int64_t at) { return at >= oldest_kept; }));
    const size_t room = rate.limit - std::min<size_t>(window.size(), rate.limit);
    if (room < gate.allowed) {
      gate.allowed = room;
      // Room again once the oldest entry — after this accept's own, if the window was empty —
      // is a period old.
      gate.reopens_ms = (window.empty() ? stamp : window.front()) + rate.period.count();
    }
    gate.window = std::move(window);
  }
  return gate;
}

void record_flow(kv::Transaction& txn, const Keys& keys, std::string_view type,
                 const FlowGate& gate, size_t taken) {
  if (!gate.rate || taken == 0) return;
  Tuple window;
  for (int64_t at : gate.window) window.append(at);
  for (size_t i = 0; i < taken; ++i) window.append(*gate.stamp_ms);
  txn.set(keys.rate_window(type), window.pack());
}

}  // namespace kvq::jobs
