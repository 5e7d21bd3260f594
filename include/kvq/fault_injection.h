// kvq/fault_injection.h — a kv::Store that wraps a real store and makes it misbehave, for tests.
//
// Like LevelDB's EnvWrapper: every call forwards to the wrapped store, except that at the
// configured rates
//   * commit() fails with kAborted without applying anything (a conflict),
//   * begin(), reads and commit() fail with kUnavailable (commit: without applying anything),
//   * commit() reports kUnknownResult — half of the time after really committing, half of the
//     time without — which is exactly the ambiguity a caller must survive,
//   * commit() is delayed by `commit_latency`.
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
  uint64_t seed = 1;
};

struct FaultCounts {
  uint64_t conflicts = 0;
  uint64_t unavailable = 0;
  uint64_t unknown_applied = 0;
  uint64_t unknown_not_applied = 0;
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
