// kv/check_history.h — the evidence both monitors judge idleness by: the jobs layer's activity
// monitor (is a running job's worker still updating it?) and the workers layer's health monitor
// (is a worker still heartbeating?).
//
// A monitor checks a type every `period` or so. A check asks the store for its read version v
// and, once the store has answered, records (v, the time of the answer). The rule it serves:
//
//   An entity whose last change has seq (its transaction's read version) below the version of a
//   check recorded at least `timeout` ago has not changed for at least `timeout`.
//
// Why it holds, and what the time must be:
//   * Reads are linearizable (LMDB snapshots; etcd's default ranges), so a transaction that
//     fixed its read version after the check's read was answered has a version >= v. An entity
//     with seq < v was therefore last changed by a transaction that began before the answer.
//     The check is stamped with the time the answer ARRIVED, never the time it was asked for: a
//     read that stalls for 5 s returns a version that includes everything committed during the
//     stall, and stamping it with the earlier time would make that recent activity look 5 s old
//     (issue 17: jobs re-enqueued while their workers reported on time).
//   * Time counts only while the monitor is watching. Between two checks it credits at most
//     kMaxCreditedPeriods × `period` of the time that really passed: time spent waiting on a
//     stalled or unavailable store, or while this process was paused (SIGSTOP) or starved, does
//     not count toward anyone's idleness. The workers that report through this process, or
//     through the same stalled store, could not report then either; evidence from before such a
//     stall is only used once enough watched time has passed after it. Credited time never
//     exceeds real time, so the rule above stays true; a stall only makes the judgement later.
//   * The decision is made after the newest check was recorded and carried out by a
//     transaction that re-reads the entity without snapshot, so it commits only if the entity
//     is still unchanged: a transaction that itself stalls only lets more time pass.
//
// Not thread-safe: each monitor keeps one per type on its own thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>

#include "kvq/kv.h"

namespace kvq::kv {

class CheckHistory {
 public:
  // Checks are jittered by ±20% around their period and take a read; a gap longer than this
  // many periods between two checks means the monitor, or the store it asks, was stalled.
  static constexpr double kMaxCreditedPeriods = 1.5;

  // Records a check the store answered at `answered` (read Clock::now() after the read
  // returned) with `version`, or a check whose read failed (nullopt: time passes, as far as it
  // is credited, but it gives no evidence). `period`: how often this type is meant to be checked.
  void record(Clock::time_point answered, std::optional<uint64_t> version, Clock::duration period) {
    if (last_answer_) {
      const auto gap = std::max(Clock::duration::zero(), answered - *last_answer_);
      const auto credit = std::chrono::duration_cast<Clock::duration>(period * kMaxCreditedPeriods);
      watched_ += std::min(gap, credit);
      stalled_ += gap - std::min(gap, credit);
    }
    last_answer_ = answered;
    if (version) checks_.push_back({watched_, *version});
  }

  // The version of the newest check at least `timeout` of watched time before the newest
  // record: everything with a smaller seq has been idle that long. nullopt while no check is.
  std::optional<uint64_t> threshold(Clock::duration timeout) const {
    std::optional<uint64_t> found;
    for (const auto& c : checks_) {
      if (c.watched > watched_ - timeout) break;
      found = c.version;
    }
    return found;
  }

  // Forgets the checks that no threshold for a timeout of at most `longest` will need: all but
  // the newest one at least `longest` old.
  void prune(Clock::duration longest) {
    while (checks_.size() > 1 && checks_[1].watched <= watched_ - longest) checks_.pop_front();
  }

  // Real time between checks that was not credited (the monitor or its store stalled).
  Clock::duration stalled() const { return stalled_; }

 private:
  struct Check {
    Clock::duration watched;  // watched time when the store answered
    uint64_t version;
  };
  std::deque<Check> checks_;
  Clock::duration watched_{0};
  Clock::duration stalled_{0};
  std::optional<Clock::time_point> last_answer_;
};

}  // namespace kvq::kv
