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
  EXPECT_EQ(event["bytes"], "\x01\xc3\xbf");  // \u00ff: a byte outside ASCII, shown as a code point
  EXPECT_EQ(event["n"], 3);
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
