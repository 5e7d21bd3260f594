// kv/fault_injection.h — test support, not public API: a kv::Store that wraps a real store and
// makes it misbehave, for tests (tests include it as "kv/fault_injection.h"; it lives in kvq_kv).
//
// Like LevelDB's EnvWrapper: every call forwards to the wrapped store, except that at the
// configured rates
//   * commit() fails with kAborted without applying anything (a conflict),
//   * begin(), reads and commit() fail with kUnavailable (commit: without applying anything),
//   * commit() reports kUnknownResult — half of the time after really committing, half of the
//     time without — which is exactly the ambiguity a caller must survive,
//   * commit() is delayed by `commit_latency`,
//   * a transaction's first read (the one that fixes its read version) waits `read_latency`
//     before it reaches the wrapped store, so it answers with the store as it is when the wait
//     ends — what a read blocked on a stalled etcd member does. Set it with set_options at the
//     moments a test chooses; a read already waiting keeps the wait it started with.
// Rates are probabilities in [0, 1]. The random source is seeded, so a failing run can be
// repeated. Counters report how many faults were injected.
//
// Thread-safety: thread-safe, like the wrapped store.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "kvq/kv.h"

namespace kvq::kv {

struct FaultOptions {
  double conflict_rate = 0;
  double unavailable_rate = 0;
  double unknown_result_rate = 0;
  std::chrono::microseconds commit_latency{0};
  std::chrono::microseconds read_latency{0};
  uint64_t seed = 1;
};

struct FaultCounts {
  uint64_t conflicts = 0;
  uint64_t unavailable = 0;
  uint64_t unknown_applied = 0;
  uint64_t unknown_not_applied = 0;
  uint64_t delayed_reads = 0;  // first reads that waited read_latency, counted once answered
  // Commits of transactions that wrote, applied by the inner store (reported unknown or not).
  uint64_t written_commits = 0;
};

class FaultInjectingStore : public Store {
 public:
  FaultInjectingStore(std::shared_ptr<Store> inner, FaultOptions options);
  ~FaultInjectingStore() override;

  Result<std::unique_ptr<Transaction>> begin() override;
  std::string describe() const override;

  FaultCounts counts() const;
  // Changes the rates from now on (e.g. to stop injecting before a final check).
  void set_options(const FaultOptions& options);

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<Store> inner_;
};

}  // namespace kvq::kv
