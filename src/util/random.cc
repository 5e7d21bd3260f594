#include "util/random.h"

#include <random>

namespace kvq::util {
namespace {

std::mt19937_64& generator() {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }());
  return gen;
}

}  // namespace

uint64_t random_u64() { return generator()(); }

uint64_t random_below(uint64_t n) {
  return std::uniform_int_distribution<uint64_t>(0, n - 1)(generator());
}

double random_unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(generator()); }

std::chrono::microseconds jittered(std::chrono::microseconds base, double fraction) {
  const double factor = 1.0 - fraction + 2.0 * fraction * random_unit();
  return std::chrono::microseconds(
      static_cast<int64_t>(static_cast<double>(base.count()) * factor));
}

std::string random_hex(size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const auto byte = static_cast<unsigned>(random_below(256));
    out += kDigits[byte >> 4];
    out += kDigits[byte & 15];
  }
  return out;
}

}  // namespace kvq::util
