#include "jobs/activity_monitor.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "jobs/job_store.h"
#include "jobs/retention.h"
#include "util/random.h"

namespace kvq::jobs {
namespace {

using namespace std::chrono_literals;
constexpr auto kIdlePeriod = 5s;  // how long to sleep with no types at all
constexpr auto kErrorPause = 100ms;
constexpr kv::Clock::duration kMinSweepPeriod = 250ms;
constexpr kv::Clock::duration kMaxSweepPeriod = 60s;
// A type is checked at most this many times per the longest timeout its history serves.
constexpr int kMaxChecksPerLongest = 4096;
// Distinct own timeouts of running jobs judged per check.
constexpr size_t kMaxOwnTimeoutsPerCheck = 1000;

// A sweep stops after this long and resumes at the monitor's next turn, so that a type with a
// large backlog of expired jobs never delays other types' activity checks by more.
constexpr kv::Clock::duration kSweepBudget = 200ms;

enum class Drained { kAll, kFailed, kOutOfTime };

// Runs one_batch(batch) until a batch comes back short or `deadline` passes, doubling the batch
// after each full one (up to max_batch) and adding what each did to `counter`. A failed batch
// (too big or too slow a transaction) halves the batch for next time.
template <typename OneBatch>
Drained drain(size_t& batch, size_t max_batch, std::atomic<uint64_t>& counter,
              kv::Clock::time_point deadline, OneBatch one_batch) {
  for (;;) {
    Result<size_t> done = one_batch(batch);
    if (!done.ok()) {
      batch = std::max<size_t>(1, batch / 2);
      return Drained::kFailed;
    }
    counter.fetch_add(*done);
    if (*done < batch) return Drained::kAll;
    batch = std::min(max_batch, batch * 2);
    if (kv::Clock::now() >= deadline) return Drained::kOutOfTime;
  }
}

}  // namespace

ActivityMonitor::ActivityMonitor(kv::Store& store, const Keys& keys, const JobsOptions& options,
                                 TypeStatsRecorder& type_stats)
    : TypeMonitor(kIdlePeriod, kErrorPause),
      store_(store),
      keys_(keys),
      options_(options),
      type_stats_(type_stats) {
  start();
}

ActivityMonitor::~ActivityMonitor() { stop(); }

Status ActivityMonitor::refresh_types() {
  KVQ_ASSIGN_OR_RETURN(auto txn, store_.begin());
  auto [begin, end] = keys_.timeouts();
  KVQ_ASSIGN_OR_RETURN(auto rows, txn->get_range(begin, end, {.snapshot = true}));
  KVQ_ASSIGN_OR_RETURN(auto watch, txn->watch(keys_.types_token()));
  std::map<std::string, TypeSettings> seen;
  for (const auto& kv : rows) {
    auto type = keys_.parse_timeout_type(kv.key);
    auto settings = decode_type(kv.value);
    if (!type.ok() || !settings.ok()) continue;
    seen[*type] = *settings;
  }
  std::erase_if(types_, [&](const auto& entry) { return !seen.contains(entry.first); });
  const auto now = kv::Clock::now();
  for (const auto& [type, settings] : seen) {
    auto& state = types_[type];
    if (state.timeout != settings.timeout) {
      state.timeout = settings.timeout;
      state.next_activity_check = state.next_check = now;
    }
    if (state.retention != settings.finished_retention) {
      state.retention = settings.finished_retention;
      state.next_sweep = state.next_check = now;
    }
  }
  auto [own_begin, own_end] = keys_.all_own_timeouts();
  KVQ_ASSIGN_OR_RETURN(auto spans, txn->get_range(own_begin, own_end, {.snapshot = true}));
  for (const auto& kv : spans) {
    auto type = keys_.parse_own_timeouts_type(kv.key);
    auto span = decode_own_timeout_span(kv.value);
    if (!type.ok() || !span.ok() || !types_.contains(*type)) continue;
    auto& state = types_[*type];
    if (!state.own || state.own->shortest != span->shortest ||
        state.own->longest != span->longest) {
      state.own = *span;
      state.next_activity_check = state.next_check = now;
    }
  }
  watch_types(std::move(watch));
  return Status::OK();
}

void ActivityMonitor::check(const std::string& type, TypeState& state) {
  const auto now = kv::Clock::now();
  if (now >= state.next_activity_check) check_activity(type, state, now);
  if (state.retention && now >= state.next_sweep) sweep_finished(type, state, now);
  state.next_check = state.retention ? std::min(state.next_activity_check, state.next_sweep)
                                     : state.next_activity_check;
}

void ActivityMonitor::sweep_finished(const std::string& type, TypeState& state,
                                     kv::Clock::time_point now) {
  const auto period =
      std::clamp<kv::Clock::duration>(*state.retention / 4, kMinSweepPeriod, kMaxSweepPeriod);
  state.next_sweep =
      now + util::jittered(std::chrono::duration_cast<std::chrono::microseconds>(period), 0.2);
  const int64_t cutoff = now_ms() - state.retention->count();
  const Drained drained =
      drain(state.sweep_batch, options_.monitor_max_batch, expired_, now + kSweepBudget,
            [&](size_t batch) {
              return remove_expired_batch(store_, keys_, type, cutoff, batch, options_.retry);
            });
  if (drained == Drained::kFailed) state.next_sweep = now + kErrorPause;
  if (drained == Drained::kOutOfTime) state.next_sweep = kv::Clock::now();
}

void ActivityMonitor::check_activity(const std::string& type, TypeState& state,
                                     kv::Clock::time_point now) {
  const Millis shortest = state.own ? std::min(state.timeout, state.own->shortest) : state.timeout;
  const Millis longest = state.own ? std::max(state.timeout, state.own->longest) : state.timeout;
  const auto period = std::max(
      std::chrono::duration_cast<std::chrono::microseconds>(shortest) /
          std::max(1, options_.monitor_checks_per_timeout),
      std::chrono::duration_cast<std::chrono::microseconds>(longest) / kMaxChecksPerLongest);
  state.next_activity_check = now + util::jittered(period, 0.2);

  auto version = kv::run(
      store_, [](kv::Transaction& txn) { return txn.read_version(); }, options_.retry);
  // Stamped when the store answered, not when it was asked (check_history.h).
  state.checks.record(kv::Clock::now(), version.ok() ? std::optional(*version) : std::nullopt,
                      period);
  if (!version.ok()) return;  // retried at the next check
  checks_.fetch_add(1);
  state.checks.prune(longest);
  if (state.own) check_own_timeouts(type, state, now);
  const std::optional<uint64_t> below = state.checks.threshold(state.timeout);
  if (!below) return;

  const Drained drained =
      drain(state.batch, options_.monitor_max_batch, reenqueued_, kv::Clock::time_point::max(),
            [&](size_t batch) {
              return reenqueue_batch(type, keys_.activity_before(type, *below), false, batch);
            });
  if (drained == Drained::kFailed) state.next_activity_check = now + kErrorPause;
}

void ActivityMonitor::check_own_timeouts(const std::string& type, TypeState& state,
                                         kv::Clock::time_point now) {
  auto timeouts = kv::run(
      store_,
      [&](kv::Transaction& txn) {
        return running_own_timeouts(txn, keys_, type, kMaxOwnTimeoutsPerCheck);
      },
      options_.retry);
  if (!timeouts.ok()) {
    state.next_activity_check = now + kErrorPause;
    return;
  }
  for (int64_t timeout : *timeouts) {
    const std::optional<uint64_t> below = state.checks.threshold(Millis(timeout));
    if (!below) break;  // shortest first: no longer one has a threshold either
    const Drained drained =
        drain(state.batch, options_.monitor_max_batch, reenqueued_, kv::Clock::time_point::max(),
              [&](size_t batch) {
                return reenqueue_batch(type, keys_.own_activity_before(type, timeout, *below), true,
                                       batch);
              });
    if (drained == Drained::kFailed) state.next_activity_check = now + kErrorPause;
  }
}

Result<size_t> ActivityMonitor::reenqueue_batch(
    const std::string& type, const std::pair<std::string, std::string>& stale_range, bool own,
    size_t batch) {
  size_t gave_up = 0;  // of the attempt that committed
  // The lost runs of the attempt that committed: (dead, when the run started).
  std::vector<std::pair<bool, int64_t>> lost_runs;
  // A try whose commit result was unknown (kv.h) may have applied: its retry then finds none of
  // those runs stale any more. It recognises them by their job's last error, that try's lost
  // run (kind and time), so that the stats count each lost run once.
  struct Tried {
    std::string id;
    uint32_t attempt;
    bool dead;
    int64_t started;
  };
  std::vector<Tried> tried;
  int64_t tried_at = 0;
  auto handled = kv::run(
      store_,
      [&](kv::Transaction& txn) -> Result<size_t> {
        gave_up = 0;
        lost_runs.clear();
        size_t count = 0;
        for (const Tried& t : tried) {
          KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys_, type, t.id));
          if (!row || row->errors.empty()) continue;
          const JobError& last = row->errors.back();
          if (last.kind != "timeout" || last.at_ms != tried_at || last.attempt != t.attempt)
            continue;
          if (t.dead) ++gave_up;
          lost_runs.emplace_back(t.dead, t.started);
          ++count;
        }
        tried.clear();
        KVQ_ASSIGN_OR_RETURN(auto stale, txn.get_range(stale_range.first, stale_range.second,
                                                       {.limit = batch, .snapshot = true}));
        if (stale.empty()) return count;
        KVQ_ASSIGN_OR_RETURN(auto read, type_settings_of(txn, keys_, type));
        // A type deleted meanwhile has no jobs left to find here; the defaults serve.
        const TypeSettings settings = read.value_or(TypeSettings{});
        tried_at = now_ms();
        for (const auto& kv : stale) {
          uint64_t seq = 0;
          std::string id;
          LostRun lost{"timeout", "", tried_at};
          if (own) {
            KVQ_ASSIGN_OR_RETURN(auto entry, keys_.parse_own_activity(kv.key));
            seq = entry.seq;
            id = std::move(entry.id);
            lost.message =
                "no update within the job's timeout of " + std::to_string(entry.timeout_ms) + " ms";
          } else {
            KVQ_ASSIGN_OR_RETURN(auto entry, keys_.parse_activity(kv.key));
            seq = entry.seq;
            id = std::move(entry.id);
            lost.message = "no update within the type's timeout of " +
                           std::to_string(settings.timeout.count()) + " ms";
          }
          KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys_, type, id));
          if (!before || state_of(*before) != State::kRunning || before->seq != seq) continue;
          JobRow after = after_lost_run(*before, settings, lost);
          if (after.finished) ++gave_up;
          lost_runs.emplace_back(after.finished, before->started);
          tried.push_back({id, before->attempts, after.finished, before->started});
          KVQ_RETURN_IF_ERROR(save_job(txn, keys_, type, id, before, std::move(after)));
          ++count;
        }
        return count;
      },
      options_.retry);
  if (!handled.ok()) return handled;
  gave_up_.fetch_add(gave_up);
  for (const auto& [dead, started] : lost_runs)
    type_stats_.record_lost(type, dead, run_time_since(started));
  return *handled - gave_up;
}

}  // namespace kvq::jobs
