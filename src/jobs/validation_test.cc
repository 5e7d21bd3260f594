#include "jobs/validation.h"

#include <gtest/gtest.h>

#include "kvq/jobs.h"

namespace kvq::jobs {
namespace {

TEST(ValidationTest, TypesMustBeShortNames) {
  EXPECT_TRUE(validate_type("index-build.v2:x_y").ok());
  EXPECT_EQ(validate_type("").code(), Code::kInvalidArgument);
  EXPECT_EQ(validate_type(std::string(kMaxTypeBytes + 1, 'a')).code(), Code::kInvalidArgument);
  EXPECT_TRUE(validate_type(std::string(kMaxTypeBytes, 'a')).ok());
  EXPECT_EQ(validate_type("has space").code(), Code::kInvalidArgument);
  EXPECT_EQ(validate_type("slash/").code(), Code::kInvalidArgument);
}

TEST(ValidationTest, IdsMayBeAnyTextWithoutControlCharacters) {
  EXPECT_TRUE(validate_id("db/shard 1 — ünïcode").ok());
  EXPECT_EQ(validate_id("").code(), Code::kInvalidArgument);
  EXPECT_EQ(validate_id(std::string(kMaxIdBytes + 1, 'i')).code(), Code::kInvalidArgument);
  EXPECT_EQ(validate_id(std::string("a\0b", 3)).code(), Code::kInvalidArgument);
  EXPECT_EQ(validate_id("tab\there").code(), Code::kInvalidArgument);
}

TEST(ValidationTest, DataMustBeAJsonObjectAndIsCompacted) {
  auto d = normalize_data("{ \"b\" : 1,\n \"a\": [1, 2] }", 1024);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, R"({"a":[1,2],"b":1})");
  EXPECT_EQ(normalize_data("[1]", 1024).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(normalize_data("\"s\"", 1024).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(normalize_data("{", 1024).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(normalize_data("", 1024).status().code(), Code::kInvalidArgument);
}

TEST(ValidationTest, DataOverTheLimitOrTooDeepIsRejected) {
  const std::string big = "{\"x\":\"" + std::string(2000, 'x') + "\"}";
  EXPECT_EQ(normalize_data(big, 1000).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(normalize_data(big, 4000).ok());
  std::string deep = "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(normalize_data(deep, 100000).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace kvq::jobs
