#include "util/secret.h"

#include <openssl/crypto.h>
#include <sys/random.h>

#include <cassert>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kvq::util {
namespace {

// getrandom may return fewer bytes than asked (past 256 bytes, or when a signal arrives), or
// fail with EINTR before the first byte; both just mean "ask again for the rest".
void fill_from_kernel(uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      std::fprintf(stderr, "kvq: getrandom failed (%s); refusing to make a guessable token\n",
                   std::strerror(errno));
      std::abort();
    }
  }
}

}  // namespace

std::string secret_hex(size_t n) {
  assert(n >= kMinSecretBytes);
  std::vector<uint8_t> bytes(n);
  fill_from_kernel(bytes.data(), n);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return out;
}

bool secret_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace kvq::util
