// util/secret.h — unguessable tokens that grant a right (job locks, worker tokens), and their
// comparison.
//
// secret_hex draws from the kernel's CSPRNG (getrandom(2)), never from the fast generator of
// util/random.h, whose outputs can be predicted from earlier ones. secret_equal takes the same
// time wherever two tokens of one length first differ (OpenSSL's CRYPTO_memcmp), so timing a
// comparison tells nothing about a stored token. Thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvq::util {

// The fewest random bytes a token that grants a right may have: 128 bits.
inline constexpr size_t kMinSecretBytes = 16;

// `n` bytes from getrandom(2) as lowercase hex (2n characters). REQUIRES: n >= kMinSecretBytes.
// Blocks only until the kernel's pool is first initialised at boot; aborts the process if the
// kernel refuses (no getrandom, ENOSYS): handing out a guessable token instead is worse.
std::string secret_hex(size_t n = kMinSecretBytes);

// True if `a` and `b` are the same bytes. Tokens of different lengths differ at once (a length
// is not secret: every token of one kind has the same); equal lengths take the same time.
bool secret_equal(std::string_view a, std::string_view b);

}  // namespace kvq::util
