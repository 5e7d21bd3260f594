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
  EXPECT_EQ(*d, R"({"b":1,"a":[1,2]})");
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

// Compaction drops only the whitespace between tokens: key order, duplicate keys, number
// spelling and everything inside strings (spaces and escapes) stay as the producer wrote them.
TEST(ValidationTest, CompactionKeepsEverythingButWhitespace) {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"a\":\t1,\r\n \"b\" : [ 1 , 2 ] }", R"({"a":1,"b":[1,2]})"},
      {R"({"z": 1, "a": 2, "z": 3})", R"({"z":1,"a":2,"z":3})"},
      {R"({"n": 1.50, "e": 1E2, "m": -0})", R"({"n":1.50,"e":1E2,"m":-0})"},
      {R"({"s": " spaced \" { } \\ \u0041 "})", R"({"s":" spaced \" { } \\ \u0041 "})"},
      {R"({"u": "é 日本"})", R"({"u":"é 日本"})"},
      {R"({})", R"({})"},
  };
  for (const auto& [in, want] : cases) {
    auto d = normalize_data(in, 4096);
    ASSERT_TRUE(d.ok()) << in << ": " << d.status().to_string();
    EXPECT_EQ(*d, want) << in;
  }
}

TEST(ValidationTest, InvalidJsonIsRejected) {
  for (const char* bad : {"{\"a\":}", "{\"a\":1,}", "{\"a\":1} x", "{'a':1}", "{\"a\":01}",
                          "{\"a\":\"\xff\"}", "{\"a\":\"tab\there\"}", "{\"a\":NaN}"}) {
    EXPECT_EQ(normalize_data(bad, 4096).status().code(), Code::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace kvq::jobs
