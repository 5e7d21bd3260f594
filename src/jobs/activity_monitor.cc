#include "jobs/activity_monitor.h"

#include <algorithm>
#include <cstdio>

#include "jobs/job_store.h"
#include "util/random.h"

namespace kvq::jobs {
namespace {

using namespace std::chrono_literals;
constexpr auto kIdlePeriod = 5s;       // how long to sleep with no types at all
constexpr auto kErrorPause = 100ms;

}  // namespace

ActivityMonitor::ActivityMonitor(kv::Store& store, const Keys& keys, const JobsOptions& options)
    : TypeMonitor(kIdlePeriod, kErrorPause), store_(store), keys_(keys), options_(options) {
  start();
}

ActivityMonitor::~ActivityMonitor() { stop(); }

Status ActivityMonitor::refresh_types() {
  KVQ_ASSIGN_OR_RETURN(auto txn, store_.begin());
  auto [begin, end] = keys_.timeouts();
  KVQ_ASSIGN_OR_RETURN(auto rows, txn->get_range(begin, end, {.snapshot = true}));
  KVQ_ASSIGN_OR_RETURN(auto watch, txn->watch(keys_.types_token()));
  std::map<std::string, Millis> seen;
  for (const auto& kv : rows) {
    auto type = keys_.parse_timeout_type(kv.key);
    auto timeout = Tuple::unpack(kv.value);
    if (!type.ok() || !timeout.ok() || timeout->size() != 1 || !(*timeout)[0].is_int()) continue;
    seen[*type] = Millis((*timeout)[0].as_int());
  }
  std::erase_if(types_, [&](const auto& entry) { return !seen.contains(entry.first); });
  for (const auto& [type, timeout] : seen) {
    auto& state = types_[type];
    if (state.timeout != timeout) {
      state.timeout = timeout;
      state.next_check = kv::Clock::now();
    }
  }
  watch_types(std::move(watch));
  return Status::OK();
}

void ActivityMonitor::check(const std::string& type, TypeState& state) {
  const auto now = kv::Clock::now();
  const auto period = std::chrono::duration_cast<std::chrono::microseconds>(state.timeout) /
                      std::max(1, options_.monitor_checks_per_timeout);
  state.next_check = now + util::jittered(period, 0.2);

  auto version = kv::run(store_, [](kv::Transaction& txn) { return txn.read_version(); }, options_.retry);
  if (!version.ok()) return;  // retried at the next check
  checks_.fetch_add(1);
  state.checks.push_back({now, *version});
  // The newest check at least one timeout old gives the threshold; older ones are not needed.
  const Check* threshold = nullptr;
  while (state.checks.size() > 1 && state.checks[1].at <= now - state.timeout) state.checks.pop_front();
  if (state.checks.front().at <= now - state.timeout) threshold = &state.checks.front();
  if (!threshold) return;

  for (;;) {
    auto done = reenqueue_batch(type, threshold->version, state.batch);
    if (!done.ok()) {
      // Too big or too slow a transaction: shrink the batch and try again at the next check.
      state.batch = std::max<size_t>(1, state.batch / 2);
      state.next_check = now + kErrorPause;
      return;
    }
    reenqueued_.fetch_add(*done);
    if (*done < state.batch) return;
    state.batch = std::min(options_.monitor_max_batch, state.batch * 2);
  }
}

Result<size_t> ActivityMonitor::reenqueue_batch(const std::string& type, uint64_t below, size_t batch) {
  return kv::run(
      store_,
      [&](kv::Transaction& txn) -> Result<size_t> {
        auto [begin, end] = keys_.activity_before(type, below);
        KVQ_ASSIGN_OR_RETURN(auto stale, txn.get_range(begin, end, {.limit = batch, .snapshot = true}));
        size_t count = 0;
        for (const auto& kv : stale) {
          KVQ_ASSIGN_OR_RETURN(auto entry, keys_.parse_activity(kv.key));
          KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys_, type, entry.id));
          if (!before || state_of(*before) != State::kRunning || before->seq != entry.seq) continue;
          KVQ_RETURN_IF_ERROR(save_job(txn, keys_, type, entry.id, before, requeued(*before)));
          ++count;
        }
        return count;
      },
      options_.retry);
}

}  // namespace kvq::jobs
