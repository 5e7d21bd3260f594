#include "util/secret.h"

#include <gtest/gtest.h>

#include <array>
#include <unordered_set>

namespace kvq::util {
namespace {

TEST(SecretTest, TokensAreLowercaseHexOfAtLeast128Bits) {
  const std::string token = secret_hex();
  EXPECT_EQ(token.size(), 2 * kMinSecretBytes);
  EXPECT_GE(kMinSecretBytes * 8, 128u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
  EXPECT_EQ(secret_hex(32).size(), 64u);
}

TEST(SecretTest, HundredThousandTokensAreAllDistinct) {
  std::unordered_set<std::string> seen;
  for (int i = 0; i < 100'000; ++i)
    ASSERT_TRUE(seen.insert(secret_hex()).second) << "repeat after " << i;
}

// A stuck or biased source would show as some hex digit never (or always) appearing at a
// position; with 100k tokens each digit is expected ~6,250 times per position.
TEST(SecretTest, EveryDigitAppearsAtEveryPosition) {
  std::vector<std::array<int, 16>> counts(2 * kMinSecretBytes);
  for (int i = 0; i < 100'000; ++i) {
    const std::string t = secret_hex();
    for (size_t p = 0; p < t.size(); ++p) ++counts[p][t[p] <= '9' ? t[p] - '0' : t[p] - 'a' + 10];
  }
  for (size_t p = 0; p < counts.size(); ++p) {
    for (int d = 0; d < 16; ++d) {
      EXPECT_GT(counts[p][d], 5'500) << "position " << p << " digit " << d;
      EXPECT_LT(counts[p][d], 7'000) << "position " << p << " digit " << d;
    }
  }
}

TEST(SecretTest, EqualOnlyForTheSameBytes) {
  const std::string a = secret_hex();
  std::string b = a;
  EXPECT_TRUE(secret_equal(a, b));
  b.back() = b.back() == '0' ? '1' : '0';
  EXPECT_FALSE(secret_equal(a, b));
  EXPECT_FALSE(secret_equal(a, a.substr(1)));
  EXPECT_FALSE(secret_equal(a, ""));
  EXPECT_TRUE(secret_equal("", ""));
}

}  // namespace
}  // namespace kvq::util
