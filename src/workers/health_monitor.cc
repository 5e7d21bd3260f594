#include "workers/health_monitor.h"

#include <algorithm>

#include "util/random.h"

namespace kvq::workers {
namespace {

using namespace std::chrono_literals;
constexpr auto kIdlePeriod = 1s;  // check period of a type with no workers
constexpr auto kMinPeriod = 25ms;
constexpr auto kErrorPause = 100ms;

}  // namespace

HealthMonitor::HealthMonitor(std::shared_ptr<Core> core)
    : TypeMonitor(kIdlePeriod, kErrorPause), core_(std::move(core)) {
  start();
}

HealthMonitor::~HealthMonitor() { stop(); }

Status HealthMonitor::refresh_types() {
  KVQ_ASSIGN_OR_RETURN(auto txn, core_->store->begin());
  auto [begin, end] = core_->keys.known_types();
  KVQ_ASSIGN_OR_RETURN(auto rows, txn->get_range(begin, end, {.snapshot = true}));
  KVQ_ASSIGN_OR_RETURN(auto watch, txn->watch(core_->keys.types_token()));
  for (const auto& kv : rows) {
    auto type = core_->keys.parse_known_type(kv.key);
    if (type.ok()) types_.try_emplace(*type);
  }
  watch_types(std::move(watch));
  return Status::OK();
}

void HealthMonitor::check(const std::string& type, TypeState& state) {
  const auto now = kv::Clock::now();
  state.next_check = now + kErrorPause;
  struct Seen {
    std::string id;
    uint64_t seq;
    Millis timeout;
  };
  // One snapshot: the check's version and every worker's last heartbeat, as of that version.
  auto observed = kv::run(
      *core_->store,
      [&](kv::Transaction& txn) -> Result<std::pair<uint64_t, std::vector<Seen>>> {
        KVQ_ASSIGN_OR_RETURN(uint64_t version, txn.read_version());
        auto [begin, end] = core_->keys.workers_of(type);
        KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end, {.snapshot = true}));
        std::vector<Seen> seen;
        for (const auto& kv : rows) {
          KVQ_ASSIGN_OR_RETURN(std::string id, core_->keys.parse_worker_id(kv.key));
          KVQ_ASSIGN_OR_RETURN(WorkerRow row, decode_row(kv.value));
          seen.push_back({std::move(id), row.seq, Millis(row.timeout_ms)});
        }
        return std::pair{version, std::move(seen)};
      },
      core_->options.retry);
  // Stamped when the store answered, not when it was asked (check_history.h).
  state.checks.record(kv::Clock::now(),
                      observed.ok() ? std::optional(observed->first) : std::nullopt, state.period);
  if (!observed.ok()) return;  // tried again at the next check
  checks_.fetch_add(1);
  const auto& seen = observed->second;

  Millis shortest = std::chrono::duration_cast<Millis>(kIdlePeriod * 4), longest{0};
  for (const auto& w : seen) {
    shortest = std::min(shortest, w.timeout);
    longest = std::max(longest, w.timeout);
    const std::optional<uint64_t> threshold = state.checks.threshold(w.timeout);
    if (!threshold || w.seq >= *threshold) continue;
    auto removed = kv::run(
        *core_->store,
        [&](kv::Transaction& txn) { return core_->registry.declare_dead(txn, type, w.id, w.seq); },
        core_->options.retry);
    if (removed.ok() && *removed) dead_.fetch_add(1);
  }
  state.checks.prune(longest);
  state.period = std::max<kv::Clock::duration>(kMinPeriod, shortest / 4);
  state.next_check =
      now +
      util::jittered(std::chrono::duration_cast<std::chrono::microseconds>(state.period), 0.2);
}

}  // namespace kvq::workers
