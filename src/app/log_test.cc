#include "app/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

namespace kvq::app::log {
namespace {

using namespace std::chrono_literals;

RequestLine a_request(unsigned status = 200) {
  return {.method = "GET",
          .path = "/v1/jobs/work/j1",
          .route = "/v1/jobs/{type}/{id}",
          .client = "127.0.0.1:40001",
          .status = status,
          .latency = 1234567ns};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(LogTest, LevelsAndFormatsAreParsedByName) {
  EXPECT_EQ(parse_level("debug"), Level::kDebug);
  EXPECT_EQ(parse_level("warn"), Level::kWarn);
  EXPECT_FALSE(parse_level("warning"));
  EXPECT_FALSE(parse_level("INFO"));
  EXPECT_EQ(parse_format("json"), Format::kJson);
  EXPECT_FALSE(parse_format("xml"));
  EXPECT_EQ(level_name(Level::kWarn), "warn");
}

TEST(LogTest, ATextRequestLineHasTimeLevelAndEveryField) {
  std::ostringstream out;
  Logger logger(Format::kText, Level::kInfo, &out);
  logger.request(a_request());
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 1u) << out.str();
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info request method=GET )"
                           R"(path=/v1/jobs/work/j1 status=200 latency_ms=1\.235 )"
                           R"(client=127\.0\.0\.1:40001 route=/v1/jobs/\{type\}/\{id\})")))
      << lines[0];
}

TEST(LogTest, AJsonLineIsOneObjectWithFixedKeys) {
  std::ostringstream out;
  Logger logger(Format::kJson, Level::kInfo, &out);
  logger.request(a_request(404));
  logger.warn("odd \"path\"\n", {{"bytes", std::string_view("\x01\xff")}, {"n", 3}});
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  const auto request = nlohmann::json::parse(lines[0]);
  EXPECT_TRUE(std::regex_match(request["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_EQ(request["level"], "info");
  EXPECT_EQ(request["msg"], "request");
  EXPECT_EQ(request["method"], "GET");
  EXPECT_EQ(request["path"], "/v1/jobs/work/j1");
  EXPECT_EQ(request["route"], "/v1/jobs/{type}/{id}");
  EXPECT_EQ(request["status"], 404);
  EXPECT_DOUBLE_EQ(request["latency_ms"].get<double>(), 1.235);
  EXPECT_EQ(request["client"], "127.0.0.1:40001");
  // The keys come in a fixed order: time, level, msg first.
  EXPECT_EQ(lines[0].rfind("{\"time\":", 0), 0u) << lines[0];
  EXPECT_LT(lines[0].find("\"level\""), lines[0].find("\"msg\""));
  const auto event = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(event["level"], "warn");
  EXPECT_EQ(event["msg"], "odd \"path\"\n");
  // A byte that is no part of UTF-8 cannot be shown as itself: U+FFFD stands for it.
  EXPECT_EQ(event["bytes"], "\x01\xef\xbf\xbd");
  EXPECT_EQ(event["n"], 3);
}

TEST(LogTest, JsonLinesKeepUtf8AsItIs) {
  std::ostringstream out;
  Logger logger(Format::kJson, Level::kInfo, &out);
  RequestLine line = a_request();
  const std::string path = "/v1/jobs/caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac-\xf0\x9f\x98\x80";
  line.path = path;
  logger.request(line);
  logger.info("odd", {{"half", std::string_view("a\xe6\x97")}, {"surrogate", "\xed\xa0\x80"}});
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  // The characters themselves, not \u00XX per byte (which read back as other characters).
  EXPECT_NE(lines[0].find("\"path\":\"" + path + "\""), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("\\u00"), std::string::npos) << lines[0];
  EXPECT_EQ(nlohmann::json::parse(lines[0])["path"], path);
  const auto event = nlohmann::json::parse(lines[1]);  // throws on invalid UTF-8
  EXPECT_EQ(event["half"], "a\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(event["surrogate"], "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(LogTest, ARequestLineCarriesItsTraceIdWhenItHasOne) {
  std::ostringstream out;
  Logger logger(Format::kJson, Level::kInfo, &out);
  RequestLine line = a_request();
  line.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  logger.request(line);
  logger.request(a_request());
  std::ostringstream text_out;
  Logger text(Format::kText, Level::kInfo, &text_out);
  text.request(line);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_EQ(nlohmann::json::parse(lines[0])["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(nlohmann::json::parse(lines[0])["route"], "/v1/jobs/{type}/{id}");
  EXPECT_FALSE(nlohmann::json::parse(lines[1]).contains("trace_id")) << lines[1];
  EXPECT_NE(text_out.str().find(
                " route=/v1/jobs/{type}/{id} trace_id=4bf92f3577b34da6a3ce929d0e0e4736\n"),
            std::string::npos)
      << text_out.str();
}

TEST(LogTest, NothingBelowTheLevelIsWritten) {
  std::ostringstream out;
  Logger logger(Format::kText, Level::kWarn, &out);
  EXPECT_FALSE(logger.enabled(Level::kInfo));
  logger.request(a_request());
  logger.info("started");
  logger.debug("detail");
  EXPECT_EQ(out.str(), "");
  // A 5xx answer is a warning: the store or the server failed the request.
  logger.request(a_request(503));
  logger.error("store failed", {{"error", "unavailable: etcd"}});
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_NE(lines[0].find(" warn request method=GET"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("status=503"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" error store failed error=\"unavailable: etcd\""), std::string::npos)
      << lines[1];
}

TEST(LogTest, DebugShowsEverything) {
  std::ostringstream out;
  Logger logger(Format::kText, Level::kDebug, &out);
  logger.debug("detail", {{"k", "v"}});
  logger.request(a_request());
  EXPECT_EQ(lines_of(out.str()).size(), 2u) << out.str();
  EXPECT_NE(out.str().find(" debug detail k=v\n"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace kvq::app::log
