// jobs/accept/local_accepts.h — what the accepts of one Jobs in this process know of one
// another: which types have an attempt under way, which due jobs those attempts are taking, how
// often flow control held a look back, the queue latency of each job taken until its accept
// counts it, and where each index's head was last found. None of it is job state (the store
// holds all of that): these are hints that save reads and collisions, and each is checked by
// the transaction that acts on it.
//
// One LocalAccepts is a member of Jobs::Impl, keyed by type (or by a type's index), and is
// destroyed with it: two Jobs in one process, whatever their stores and key prefixes, share
// nothing, and a Jobs made again starts clean. Thread-safe: each part has a mutex of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jobs/schema.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::jobs {

// Accept attempts in flight (of accept, accept_any or finish_and_accept), counted per type for
// as long as each lives (AcceptInFlight): on a store whose reads are round trips, a waiting
// accept of a type under way joins the look of the accept waiters' round instead of reading
// the same head itself (accept.h: looking_here, joins_round).
class InFlightCounts {
 public:
  bool under_way(std::string_view type) const KVQ_EXCLUDES(mu_);

 private:
  friend class AcceptInFlight;
  void enter(const std::string& type) KVQ_EXCLUDES(mu_);
  void leave(const std::string& type) KVQ_EXCLUDES(mu_);
  mutable util::Mutex mu_;
  std::map<std::string, size_t, std::less<>> counts_ KVQ_GUARDED_BY(mu_);
};

// One attempt's place in InFlightCounts, for its lifetime.
class AcceptInFlight {
 public:
  AcceptInFlight(InFlightCounts& counts, std::string type);
  ~AcceptInFlight();
  AcceptInFlight(const AcceptInFlight&) = delete;
  AcceptInFlight& operator=(const AcceptInFlight&) = delete;

 private:
  InFlightCounts& counts_;
  std::string type_;
};

// The due jobs (without a group) that accept attempts in flight here have picked and are
// taking, by type and id, held or let go less than a second ago (PickClaims).
class ClaimRegistry {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Claims `key` for a try that began at `try_began`: false if another try holds it, or let it
  // go after `try_began`.
  bool claim(const std::string& key, TimePoint try_began) KVQ_EXCLUDES(mu_);
  // Lets go of `keys` (each claimed before) at `now`, and forgets claims let go long ago.
  void let_go(std::vector<std::string>& keys, TimePoint now) KVQ_EXCLUDES(mu_);

 private:
  struct Claim {
    bool held = true;
    TimePoint let_go_at;  // when not held
  };
  util::Mutex mu_;
  std::unordered_map<std::string, Claim> claims_ KVQ_GUARDED_BY(mu_);
  // Claims let go, oldest first, to forget them (a key claimed again since stays).
  std::deque<std::pair<TimePoint, std::string>> let_go_order_ KVQ_GUARDED_BY(mu_);
};

// The claims of one accept attempt. Attempts of a type that overlap here read the same head of
// its queue; on a store with one writer all but one of those that pick the same job fail their
// commit and try again (16 threads' finish_and_accept collided about once every two jobs on
// LMDB). So a pick passes over a job another attempt here claimed. A claim lasts until its try
// ends, and for the tries that began before then a little longer: their reads may predate its
// commit, and so still show the job pending. A claim is a hint, not a lock: the commit still
// checks what it took, and a pick that finds every due job it read claimed takes one all the
// same.
class PickClaims {
 public:
  explicit PickClaims(ClaimRegistry& registry) : registry_(registry) {}
  ~PickClaims() { let_go(); }
  PickClaims(const PickClaims&) = delete;
  PickClaims& operator=(const PickClaims&) = delete;
  // Before a try's first read: lets go of the claims of the try before (its commit is over, or
  // it never came).
  void new_try();
  // Lets go of the claims held (the attempt is over).
  void let_go();
  // This try stopped taking because every due job it read was claimed by another
  // (try_accept_many notes it).
  void note_all_claimed() { all_claimed_ = true; }
  // What a try that took nothing answers: kAborted when every due job it read was claimed by
  // another attempt here, so that kv::run tries again after its backoff (by when their commits
  // are done) — "nothing due" could be wrong should one of them fail, and its caller would
  // wait for a new job meanwhile; OK otherwise. `types` names what was looked at.
  Status after_nothing_taken(std::string_view types) const;
  // Claims job `id` of `type` for this try; false if another attempt's try holds it, or let it
  // go after this try began.
  bool claim(std::string_view type, std::string_view id);

 private:
  ClaimRegistry& registry_;
  std::chrono::steady_clock::time_point try_began_ = std::chrono::steady_clock::now();
  std::vector<std::string> held_;  // as registered (the type's length, the type and the id)
  bool all_claimed_ = false;
};

// Looks held back by flow control, per type. A look of its own that a caller makes before
// waiting saw nothing of what it should wait for (a run's end, a time); the accept waiters
// compare this count with the one of their watch's arming to know whether that watch still
// covers such a caller (AcceptWaiters::submit).
class HeldBackLooks {
 public:
  void note(std::string_view type) KVQ_EXCLUDES(mu_);
  uint64_t count(std::string_view type) const KVQ_EXCLUDES(mu_);

 private:
  mutable util::Mutex mu_;
  std::map<std::string, uint64_t, std::less<>> counts_ KVQ_GUARDED_BY(mu_);
};

// The queue latency (accept time less scheduled time) of the job a look took for the taker with
// a lock, noted in the look's transaction and kept until the accept's entry point, knowing its
// commit's fate, takes it: so the type's stats count an accept once, and only when it
// committed. Locks are unique. Bounded: past kMaxNoted notes never taken (a caller that
// dropped the call), the oldest go.
class QueueLatencies {
 public:
  static constexpr size_t kMaxNoted = 10'000;
  void note(const std::string& lock, Millis latency) KVQ_EXCLUDES(mu_);
  std::optional<Millis> take(const std::string& lock) KVQ_EXCLUDES(mu_);

 private:
  util::Mutex mu_;
  std::map<std::string, Millis> by_lock_ KVQ_GUARDED_BY(mu_);
  std::deque<std::string> order_ KVQ_GUARDED_BY(mu_);
};

// The head (priority, time) the last read from the start of an index found, per index (its key
// prefix): where the next read's prefix ends (index_levels.h). Only a guess: a wrong one costs
// a second read, never an entry. Bounded: past kMaxIndexes indexes it starts over.
class IndexHeads {
 public:
  static constexpr size_t kMaxIndexes = 4096;
  std::optional<std::pair<int64_t, int64_t>> get(const std::string& index) const KVQ_EXCLUDES(mu_);
  void set(const std::string& index, int64_t priority, int64_t time) KVQ_EXCLUDES(mu_);

 private:
  mutable util::Mutex mu_;
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> heads_ KVQ_GUARDED_BY(mu_);
};

struct LocalAccepts {
  InFlightCounts in_flight;
  ClaimRegistry claims;
  HeldBackLooks held_back;
  QueueLatencies latencies;
  IndexHeads heads;
};

}  // namespace kvq::jobs
