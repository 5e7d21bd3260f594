// jobs/flow_control.h — a type's flow control (pause, max_running, rate) as an accept meets it:
// how many jobs one accept may take now, decided in the accept's own transaction by reading the
// store, so that accepts in different processes that would together exceed a limit conflict
// and retry instead of both passing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// What the type's flow control lets one accept take.
struct FlowGate {
  size_t allowed = 0;  // at most this many jobs
  // max_running held it below what it wanted: only a run's end frees a slot (it changes the
  // type's activity token, which a waiter then watches).
  bool full = false;
  // Held below what it wanted until this wall time, when the answer changes by itself (a pause
  // with an end, or a rate window whose oldest entry leaves).
  std::optional<int64_t> reopens_ms;
  // Rate-limited types: the time this accept's jobs are stamped with (their started time) and
  // the window's entries still inside the period, which record_flow writes back with them.
  std::optional<int64_t> stamp_ms;
  std::vector<int64_t> window;
  std::optional<RateLimit> rate;
  // The type's groups (TypeSettings::has_groups, max_running_per_group), read with the rest:
  // only a type that had a grouped job has its queue of groups looked at.
  bool has_groups = false;
  std::optional<uint32_t> max_running_per_group;
  // The type's activity timeout: that of the runs it hands out whose job has none of its own.
  Millis type_timeout{0};
};

// Reads the type's row (4, type) without snapshot — a pause or a limit committed meanwhile
// makes the accept retry under it — and, only for a type with such a limit, what it limits:
// the running jobs (at most max_running activity entries) and the rate window (14, type).
// `wanted` is how many jobs the accept would take. A type that does not exist gates nothing
// (the look then finds nothing of it).
Result<FlowGate> open_flow_gate(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                size_t wanted, int64_t now);
// After the accept took `taken` jobs (at most gate.allowed): a rate-limited type's window gets
// them appended, its expired entries dropped. Nothing for other types.
void record_flow(kv::Transaction& txn, const Keys& keys, std::string_view type,
                 const FlowGate& gate, size_t taken);

// Changes a flow setting of an existing type (kNotFound otherwise) and wakes the type's waiting
// accepts everywhere (both tokens they may watch), so that they look again under it.
Status change_flow(kv::Transaction& txn, const Keys& keys, std::string_view type,
                   const std::function<void(TypeSettings&)>& change);

// Whether `settings` pause accepts at wall time `now` (a pause past its end is over).
bool paused_at(const TypeSettings& settings, int64_t now);

}  // namespace kvq::jobs
