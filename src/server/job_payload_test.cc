#include "server/job_payload.h"

#include <gtest/gtest.h>

namespace kvq::server {
namespace {

using namespace std::string_literals;

JsonBody body_of(const char* text) {
  return std::get<JsonBody>(JsonBody::parse(text, {"data", "body", "body_base64"}));
}

TEST(JobPayloadTest, Base64RoundTripsEveryLengthAndByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (size_t n = 0; n <= all.size(); ++n) {
    const std::string bytes = all.substr(0, n);
    const std::string text = base64_encode(bytes);
    EXPECT_EQ(text.size() % 4, 0u);
    auto back = base64_decode(text);
    ASSERT_TRUE(back) << n;
    EXPECT_EQ(*back, bytes);
  }
}

TEST(JobPayloadTest, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("a\0b"s), "YQBi");
}

TEST(JobPayloadTest, Base64RefusesWhatIsNotStandardPadded) {
  EXPECT_FALSE(base64_decode("Zg"));        // unpadded
  EXPECT_FALSE(base64_decode("Zm9v!A=="));  // not in the alphabet
  EXPECT_FALSE(base64_decode("Zm-_"));      // the URL alphabet
  EXPECT_FALSE(base64_decode("Z==="));      // three pads
  EXPECT_FALSE(base64_decode("Zg==Zg=="));  // padding before the end
}

TEST(JobPayloadTest, Utf8ValidityFollowsRfc3629) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain\0text"s));
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xE2\x82"));          // cut short
  EXPECT_FALSE(valid_utf8("\xFF"));
}

TEST(JobPayloadTest, JsonDataIsShownAsItself) {
  nlohmann::json out;
  put_data_fields(out, R"({"k":1})", jobs::DataFormat::kJson);
  EXPECT_EQ(out, nlohmann::json({{"data", {{"k", 1}}}, {"data_format", "json"}}));
}

TEST(JobPayloadTest, BytesAreShownAsBodyWhenUtf8ElseAsBase64) {
  nlohmann::json text;
  put_data_fields(text, "hello \xC3\xA9", jobs::DataFormat::kBytes);
  EXPECT_EQ(text, nlohmann::json(
                      {{"data", nullptr}, {"data_format", "bytes"}, {"body", "hello \xC3\xA9"}}));
  nlohmann::json binary;
  put_data_fields(binary, "\xFF\x00\x01"s, jobs::DataFormat::kBytes);
  EXPECT_EQ(binary,
            nlohmann::json({{"data", nullptr}, {"data_format", "bytes"}, {"body_base64", "/wAB"}}));
}

TEST(JobPayloadTest, ReadsOneOfDataBodyAndBase64) {
  auto none = read_payload(body_of("{}"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value());

  auto data = read_payload(body_of(R"({"data": {"b": 2, "a": 1}})"));
  ASSERT_TRUE(data.ok() && data.value());
  EXPECT_EQ(data.value()->data, R"({"a":1,"b":2})");
  EXPECT_EQ(data.value()->format, jobs::DataFormat::kJson);

  auto text = read_payload(body_of(R"({"body": "x\u0000y"})"));
  ASSERT_TRUE(text.ok() && text.value());
  EXPECT_EQ(text.value()->data, "x\0y"s);
  EXPECT_EQ(text.value()->format, jobs::DataFormat::kBytes);

  auto bytes = read_payload(body_of(R"({"body_base64": "/wAB"})"));
  ASSERT_TRUE(bytes.ok() && bytes.value());
  EXPECT_EQ(bytes.value()->data, "\xFF\x00\x01"s);
  EXPECT_EQ(bytes.value()->format, jobs::DataFormat::kBytes);
}

TEST(JobPayloadTest, BadPayloadsAreErrorsNamingTheField) {
  auto both = read_payload(body_of(R"({"data": {}, "body": "x"})"));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error()->message.find("'body'"), std::string::npos);

  auto bad = read_payload(body_of(R"({"body_base64": "not base64"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error()->message.find("body_base64"), std::string::npos);

  auto not_string = read_payload(body_of(R"({"body": 12})"));
  ASSERT_FALSE(not_string.ok());
  EXPECT_NE(not_string.error()->message.find("'body'"), std::string::npos);
}

}  // namespace
}  // namespace kvq::server
