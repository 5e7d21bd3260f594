// tests/support/read_stalls.h — stalls a monitor's store at moments a test picks, the way a
// paused etcd member stalls the server that talks to it (issue 17).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "kv/fault_injection.h"

namespace kvq::testing {

// Makes the next transaction's first read on `store` wait `latency` (answering with the store
// as it is when the wait ends), waits until such a read has been answered, stops stalling, and
// then waits until `checks()` (a monitor's check counter) has grown by `normal_checks`, so that
// the monitor has also looked at the store unstalled. False if that took longer than `limit`.
inline bool stall_one_read(kv::FaultInjectingStore& store, std::chrono::microseconds latency,
                           const std::function<uint64_t()>& checks, uint64_t normal_checks,
                           kv::Clock::duration limit) {
  const auto deadline = kv::Clock::now() + limit;
  const uint64_t delayed = store.counts().delayed_reads;
  kv::FaultOptions stall;
  stall.read_latency = latency;
  store.set_options(stall);
  while (store.counts().delayed_reads == delayed && kv::Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  store.set_options({});
  const uint64_t after = checks();
  while (checks() < after + normal_checks && kv::Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return kv::Clock::now() < deadline;
}

}  // namespace kvq::testing
