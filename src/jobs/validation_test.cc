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

TEST(ValidationTest, ValuesMayBeAnyJsonAndAreCompacted) {
  EXPECT_EQ(*normalize_value(" [1, 2] ", 100, "progress"), "[1,2]");
  EXPECT_EQ(*normalize_value(R"( "done" )", 100, "result"), R"("done")");
  EXPECT_EQ(*normalize_value("3", 100, "result"), "3");
  auto bad = normalize_value("{", 100, "progress");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("progress"), std::string::npos);
  EXPECT_EQ(normalize_value("[1,2,3]", 5, "result").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(normalize_data("[1]", 100).status().code(), Code::kInvalidArgument);
}

TEST(ValidationTest, FailuresAreCheckedAndCutToWhatAJobKeeps) {
  EXPECT_EQ(validate_error("error", "", std::nullopt, 1000).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(validate_error("", "m", std::nullopt, 1000).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(validate_error(std::string(kMaxErrorKindBytes + 1, 'k'), "m", std::nullopt, 1000)
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(validate_error(std::string(kMaxErrorKindBytes, 'k'), "m", std::nullopt, 1000).ok());
  EXPECT_EQ(validate_error("a\nb", "m", std::nullopt, 1000).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(validate_error("error", "\xFF", std::nullopt, 1000).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(validate_error("error", "m", "nope", 1000).status().code(), Code::kInvalidArgument);
  auto kept = validate_error("io", "m", R"({ "a" : 1 })", 1000);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->details, R"({"a":1})");
  EXPECT_EQ(kept->message, "m");
  // A message exactly at the limit is kept whole.
  const std::string at_limit(kMaxErrorMessageBytes, 'm');
  EXPECT_EQ(validate_error("io", at_limit, std::nullopt, 1000)->message, at_limit);
  // Details with quotes to escape still fit.
  std::string quoted = "[";
  while (quoted.size() < 2 * kMaxErrorDetailsBytes) quoted += R"("q",)";
  quoted += R"("q"])";
  auto cut = validate_error("io", "m", quoted, 1 << 20);
  ASSERT_TRUE(cut.ok());
  EXPECT_LE(cut->details.size(), kMaxErrorDetailsBytes);
  EXPECT_GE(cut->details.size(), kMaxErrorDetailsBytes - 2);
  EXPECT_EQ(cut->details.rfind(R"({"truncated":"[\"q\",)", 0), 0u) << cut->details.substr(0, 40);
  EXPECT_EQ(*normalize_value(cut->details, 1 << 20, "details"), cut->details) << "valid JSON";
}

}  // namespace
}  // namespace kvq::jobs
