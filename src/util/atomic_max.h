// util/atomic_max.h — raising an atomic to a value seen, never lowering it: the newest of
// something that threads report out of order (a revision, a raft term).
#pragma once

#include <atomic>

namespace kvq::util {

// Makes `a` at least `value`.
template <typename T>
void raise_to(std::atomic<T>& a, T value) {
  T seen = a.load(std::memory_order_relaxed);
  while (value > seen && !a.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace kvq::util
