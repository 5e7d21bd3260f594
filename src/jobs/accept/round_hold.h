// jobs/accept/round_hold.h — how long the accept waiters' next round of a type waits for the
// workers the last one served, on a store whose calls are round trips (etcd).
//
// A round serves the waiters of its kind queued when it starts; those that come while it is
// under way wait for it to end. Workers that a round served come back together, but a little
// apart (their next request crosses the network and the box's busy threads: 0.25-2 ms on one
// 2-core box). Started by the first of them, the next round would serve that one alone and
// make the others wait all of it, and rounds would alternate small and large (1-member etcd,
// 16 HTTP workers: a fifth to a third of the rounds served 1-3 workers, most others 12-15,
// each round 4-5 ms). So after a round that handed out n jobs, the next waits until n waiters
// are queued, or for half as long as that round took (its reads and commit; kMaxHold at most),
// whichever comes first: waiting costs at most half a round, where starting without them
// costs them a whole one.
//
// On a store whose commits are local (LMDB) nothing waits: its rounds end in well under a
// millisecond, and a worker waits little for one under way.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "kvq/kv.h"

namespace kvq::jobs {

class RoundHold {
 public:
  // The longest a round waits, whatever the last one took (one slowed by a leader election
  // would otherwise hold the next for seconds).
  static constexpr kv::Clock::duration kMaxHold = std::chrono::milliseconds(10);

  // A round that began at `started` ended at `now`, handing out `served` jobs.
  void ended(size_t served, kv::Clock::time_point started, kv::Clock::time_point now) {
    expected_ = served;
    until_ = now + std::min<kv::Clock::duration>((now - started) / 2, kMaxHold);
  }
  // Whether the next round, with `waiting` waiters queued, waits at `now`.
  bool holds(size_t waiting, kv::Clock::time_point now) const {
    return waiting < expected_ && now < until_;
  }
  // When a hold ends at the latest.
  kv::Clock::time_point until() const { return until_; }

 private:
  size_t expected_ = 0;
  kv::Clock::time_point until_{};
};

}  // namespace kvq::jobs
