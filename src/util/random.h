// util/random.h — fast thread-local randomness for jitter, random picks and change tokens.
// Predictable from its earlier outputs: never use it for anything that grants a right (job
// locks, worker tokens); util/secret.h makes those. Thread-safe: each thread has its own
// generator, seeded from std::random_device.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kvq::util {

uint64_t random_u64();
// Uniform in [0, n). REQUIRES: n > 0.
uint64_t random_below(uint64_t n);
// Uniform in [0, 1).
double random_unit();
// `base` scaled by a uniform factor in [1 - fraction, 1 + fraction].
std::chrono::microseconds jittered(std::chrono::microseconds base, double fraction);
// `n` random bytes as lowercase hex (2n characters).
std::string random_hex(size_t n);

}  // namespace kvq::util
