#include "util/trace_context.h"

#include <gtest/gtest.h>

#include <string>

namespace kvq::util {
namespace {

constexpr const char* kValid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContextTest, TheSpecsExampleIsValidAndGivesItsTraceId) {
  EXPECT_TRUE(is_valid_traceparent(kValid));
  EXPECT_EQ(trace_id_of(kValid), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_TRUE(is_valid_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
}

TEST(TraceContextTest, EachPartOutOfShapeIsInvalid) {
  const std::string valid = kValid;
  auto with = [&](size_t at, std::string_view part) {
    std::string s = valid;
    s.replace(at, part.size(), part);
    return s;
  };
  EXPECT_FALSE(is_valid_traceparent(""));
  EXPECT_FALSE(is_valid_traceparent(valid.substr(0, 54)));
  EXPECT_FALSE(is_valid_traceparent(valid + "-"));  // version 00 has nothing after its flags
  EXPECT_FALSE(is_valid_traceparent(valid + "0"));
  EXPECT_FALSE(is_valid_traceparent(with(0, "ff")));  // the version W3C forbids
  EXPECT_FALSE(is_valid_traceparent(with(0, "0g")));
  EXPECT_FALSE(is_valid_traceparent(with(3, std::string(32, '0'))));
  EXPECT_FALSE(is_valid_traceparent(with(36, std::string(16, '0'))));
  EXPECT_FALSE(is_valid_traceparent(with(3, "4BF92F")));  // uppercase
  EXPECT_FALSE(is_valid_traceparent(with(40, "A")));
  EXPECT_FALSE(is_valid_traceparent(with(53, "0x")));
  EXPECT_FALSE(is_valid_traceparent(with(2, "_")));
  EXPECT_FALSE(is_valid_traceparent(with(35, "_")));
  EXPECT_FALSE(is_valid_traceparent(with(52, "_")));
  EXPECT_EQ(trace_id_of(with(0, "ff")), std::nullopt);
}

TEST(TraceContextTest, ALaterVersionMayCarryMoreAfterADash) {
  const std::string v1 = std::string("01") + (kValid + 2);
  EXPECT_TRUE(is_valid_traceparent(v1));
  EXPECT_TRUE(is_valid_traceparent(v1 + "-what-comes-next"));
  EXPECT_FALSE(is_valid_traceparent(v1 + "x"));
  EXPECT_FALSE(is_valid_traceparent(v1 + "- space"));
  EXPECT_FALSE(is_valid_traceparent(v1 + "-" + std::string(kMaxTraceparentBytes, 'a')));
}

}  // namespace
}  // namespace kvq::util
