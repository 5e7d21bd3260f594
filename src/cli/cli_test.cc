// Tests of the client commands' pure parts: argument parsing, URLs, encoding, SSE parsing,
// formatting, metrics parsing, percentiles and exit codes (request bodies: requests_test.cc).
#include <gtest/gtest.h>

#include <sstream>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/prometheus.h"
#include "cli/stats.h"

namespace kvq::cli {
namespace {

// parse_args of "cmd ARGS"; nullopt with *error set when it fails.
std::optional<ParsedArgs> parse(std::vector<std::string> args, const std::vector<OptionSpec>& specs,
                                std::string* error) {
  args.insert(args.begin(), "cmd");
  auto parsed = parse_args(args, specs);
  if (!parsed.ok()) {
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
    *error = parsed.status().message();
    return std::nullopt;
  }
  return std::move(*parsed);
}

TEST(ParseArgs, PositionalsOptionsAndFlags) {
  std::string error;
  auto a = parse({"work", "j1", "--priority", "-5", "{\"k\":1}", "--at=123", "--json"},
                 {{"priority", true}, {"at", true}}, &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->positional, (std::vector<std::string>{"work", "j1", "{\"k\":1}"}));
  EXPECT_EQ(a->value("priority"), "-5");
  EXPECT_EQ(a->value("at"), "123");
  EXPECT_TRUE(a->flag("json"));
  EXPECT_FALSE(a->flag("help"));
}

TEST(ParseArgs, HelpDashDashAndNegativePositionals) {
  std::string error;
  auto a = parse({"-h", "-1", "--", "--not-an-option", "-"}, {}, &error);
  ASSERT_TRUE(a) << error;
  EXPECT_TRUE(a->flag("help"));
  EXPECT_EQ(a->positional, (std::vector<std::string>{"-1", "--not-an-option", "-"}));
}

TEST(ParseArgs, Errors) {
  std::string error;
  EXPECT_FALSE(parse({"--nope"}, {}, &error));
  EXPECT_EQ(error, "unknown option '--nope'");
  EXPECT_FALSE(parse({"--lock"}, {{"lock", true}}, &error));
  EXPECT_EQ(error, "option '--lock' needs a value");
  EXPECT_FALSE(parse({"--json=1"}, {}, &error));
  EXPECT_EQ(error, "option '--json' takes no value");
}

TEST(ParseArgs, TheLastOfARepeatedOptionWinsAndCommonOptionsAreAlwaysThere) {
  std::string error;
  auto a = parse({"--lock", "a", "t", "--lock=b", "--url", "http://h:1", "--json", "--json"},
                 {{"lock", true}}, &error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->value("lock"), "b");
  EXPECT_EQ(a->value("url"), "http://h:1");
  EXPECT_TRUE(a->flag("json"));
  EXPECT_FALSE(a->has("token"));
  EXPECT_EQ(a->positional, (std::vector<std::string>{"t"}));
  EXPECT_FALSE(parse({"--nope=1", "x"}, {}, &error));
  EXPECT_EQ(error, "unknown option '--nope'");
  EXPECT_FALSE(parse({"x", "--url"}, {}, &error));
  EXPECT_EQ(error, "option '--url' needs a value");
}

TEST(ParseArgs, Connection) {
  std::string error;
  auto a = parse({}, {}, &error);
  ASSERT_TRUE(a);
  auto c = connection_from(*a, nullptr, nullptr);
  EXPECT_EQ(c.url, "http://127.0.0.1:7411");
  EXPECT_EQ(c.token, "");
  c = connection_from(*a, "http://h:1", "tok");
  EXPECT_EQ(c.url, "http://h:1");
  EXPECT_EQ(c.token, "tok");
  a = parse({"--url", "http://x:2", "--token", "t2"}, {}, &error);
  c = connection_from(*a, "http://h:1", "tok");
  EXPECT_EQ(c.url, "http://x:2");
  EXPECT_EQ(c.token, "t2");
}

TEST(Numbers, Strict) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-7"), -7);
  EXPECT_FALSE(parse_int("4x"));
  EXPECT_FALSE(parse_int(""));
  EXPECT_FALSE(parse_int(" 4"));
  EXPECT_FALSE(parse_int("99999999999999999999"));
  EXPECT_EQ(parse_double("1.5"), 1.5);
  EXPECT_FALSE(parse_double("inf"));
  EXPECT_FALSE(parse_double("1s"));
}

TEST(Numbers, Durations) {
  EXPECT_EQ(parse_duration_ms("500ms"), 500);
  EXPECT_EQ(parse_duration_ms("30s"), 30'000);
  EXPECT_EQ(parse_duration_ms("1.5"), 1'500);
  EXPECT_EQ(parse_duration_ms("5m"), 300'000);
  EXPECT_EQ(parse_duration_ms("2h"), 7'200'000);
  EXPECT_EQ(parse_duration_ms("1d"), 86'400'000);
  EXPECT_EQ(parse_duration_ms("0.0001s"), 1);  // rounded up, never to 0
  EXPECT_FALSE(parse_duration_ms("0s"));
  EXPECT_FALSE(parse_duration_ms("-1s"));
  EXPECT_FALSE(parse_duration_ms("s"));
  EXPECT_FALSE(parse_duration_ms("ms"));
  EXPECT_FALSE(parse_duration_ms("5w"));
  EXPECT_FALSE(parse_duration_ms(""));
  EXPECT_FALSE(parse_duration_ms("3651d"));
}

TEST(ParseArgs, TlsFlagsWinOverTheEnvironment) {
  std::string error;
  auto a = parse({}, {}, &error);
  ASSERT_TRUE(a);
  auto t = tls_flags_from(*a, nullptr, nullptr, nullptr);
  EXPECT_EQ(t.options.ca_cert, "");
  EXPECT_FALSE(t.explicit_flags);
  t = tls_flags_from(*a, "/env/ca.pem", "/env/c.pem", "/env/k.pem");
  EXPECT_EQ(t.options.ca_cert, "/env/ca.pem");
  EXPECT_EQ(t.options.client_cert, "/env/c.pem");
  EXPECT_EQ(t.options.client_key, "/env/k.pem");
  EXPECT_FALSE(t.explicit_flags);
  a = parse({"--ca-cert", "/f/ca.pem", "--client-cert=/f/c.pem", "--client-key", "/f/k.pem"}, {},
            &error);
  ASSERT_TRUE(a) << error;
  t = tls_flags_from(*a, "/env/ca.pem", "/env/c.pem", "/env/k.pem");
  EXPECT_EQ(t.options.ca_cert, "/f/ca.pem");
  EXPECT_EQ(t.options.client_cert, "/f/c.pem");
  EXPECT_EQ(t.options.client_key, "/f/k.pem");
  EXPECT_TRUE(t.explicit_flags);
}

TEST(Url, Parse) {
  auto u = parse_url("http://127.0.0.1:7411");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "7411");
  EXPECT_EQ(u->prefix, "");
  EXPECT_EQ(u->base, "http://127.0.0.1:7411");
  u = parse_url("http://example.com/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->base, "http://example.com:80");
  u = parse_url("http://[::1]:9000/api/");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->prefix, "/api");
  EXPECT_EQ(u->base, "http://[::1]:9000/api");
  u = parse_url("ftp://h:1");
  EXPECT_EQ(u.code(), Code::kInvalidArgument);
  EXPECT_NE(u.status().message().find("only http:// and https://"), std::string::npos);
  EXPECT_EQ(parse_url("http://h:port").code(), Code::kInvalidArgument);
  EXPECT_EQ(parse_url("http://:80").code(), Code::kInvalidArgument);
}

TEST(Encoding, PercentAndQuery) {
  EXPECT_EQ(percent_encode("a-b_c.d~9"), "a-b_c.d~9");
  EXPECT_EQ(percent_encode("a b/c?d%"), "a%20b%2Fc%3Fd%25");
  EXPECT_EQ(percent_encode("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(path("/v1/jobs", {"t:1", "id/x"}), "/v1/jobs/t%3A1/id%2Fx");
  EXPECT_EQ(query_string({{"state", "pending"}, {"worker", ""}, {"cursor", "a&b"}}),
            "?state=pending&cursor=a%26b");
  EXPECT_EQ(query_string({{"x", ""}}), "");
}

TEST(Sse, ParsesEventsAcrossChunks) {
  std::vector<SseEvent> events;
  SseParser p([&](const SseEvent& e) {
    events.push_back(e);
    return true;
  });
  EXPECT_TRUE(p.feed("event: job\nda"));
  EXPECT_TRUE(p.feed("ta: {\"a\":1}\n\n: keep-alive\n\n"));
  EXPECT_TRUE(p.feed("data: x\r\ndata:y\r\n\r\n"));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event, "job");
  EXPECT_EQ(events[0].data, "{\"a\":1}");
  EXPECT_EQ(events[1].event, "message");
  EXPECT_EQ(events[1].data, "x\ny");
}

TEST(Sse, StopsWhenTheCallbackSaysSo) {
  int n = 0;
  SseParser p([&](const SseEvent&) { return ++n < 1; });
  EXPECT_FALSE(p.feed("data: 1\n\ndata: 2\n\n"));
  EXPECT_EQ(n, 1);
}

TEST(Format, TimesTablesAndKeyValues) {
  EXPECT_EQ(format_time_ms(1764432000000), "2025-11-29T16:00:00.000Z");
  EXPECT_EQ(format_time_ms(1500), "1970-01-01T00:00:01.500Z");
  EXPECT_EQ(format_table({"ID", "STATE"}, {{"j1", "pending"}, {"long-id", "x"}}),
            "ID       STATE\nj1       pending\nlong-id  x\n");
  EXPECT_EQ(format_key_values({{"id", "j1"}, {"state", "x"}}), "id:    j1\nstate: x\n");
  EXPECT_EQ(truncate("abcdefgh", 6), "abc...");
  EXPECT_EQ(truncate("abc", 6), "abc");
  EXPECT_EQ(format_seconds(30), "30s");
  EXPECT_EQ(format_seconds(1.5), "1.5s");
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(20480), "20.0 KiB");
  EXPECT_EQ(format_bytes(8364032), "8.0 MiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(uint64_t{5} << 50), "5120.0 TiB");
}

TEST(Format, Job) {
  auto job = nlohmann::json::parse(
      R"({"type":"t","id":"j1","state":"pending","data":{"k":1},"scheduled_time":1500,
          "priority":0,"resubmitted":false,"worker":"","attempts":0,"extra":"e"})");
  EXPECT_EQ(format_job(job),
            "type:           t\n"
            "id:             j1\n"
            "state:          pending\n"
            "priority:       0\n"
            "scheduled_time: 1500 (1970-01-01T00:00:01.500Z)\n"
            "attempts:       0\n"
            "worker:\n"
            "resubmitted:    false\n"
            "extra:          e\n"
            "data:           {\"k\":1}\n");
  // A job's group comes after how it ended; none shows null, as the other fields do.
  job["group"] = "acme";
  EXPECT_NE(format_job(job).find("state:          pending\ngroup:          acme\npriority:"),
            std::string::npos)
      << format_job(job);
  job["group"] = nullptr;
  EXPECT_NE(format_job(job).find("\ngroup:          null\npriority:"), std::string::npos)
      << format_job(job);
  job.erase("group");
  job["outcome"] = nullptr;
  job["result"] = nullptr;
  job["errors"] = nlohmann::json::array();
  EXPECT_NE(format_job(job).find("\nerrors:         none\n"), std::string::npos) << format_job(job);
  EXPECT_EQ(format_job_event(nlohmann::json::parse(
                R"({"type":"t","id":"j1","found":true,"state":"running","data":{},"seq":4})")),
            "running  seq=4  data={}");
  EXPECT_EQ(format_job_event(nlohmann::json::parse(R"({"type":"t","id":"j1","found":false})")),
            "removed");
  EXPECT_EQ(format_job_event(nlohmann::json::parse(
                R"({"found":true,"state":"finished","outcome":"dead","seq":9,"attempts":3,
                    "data":{"k":1},"result":null})")),
            "finished (dead)  seq=9  attempts=3  data={\"k\":1}");
  EXPECT_EQ(format_job_event(nlohmann::json::parse(
                R"({"found":true,"state":"finished","outcome":"succeeded","seq":9,"attempts":1,
                    "data":{},"result":{"sent":true}})")),
            "finished (succeeded)  seq=9  attempts=1  data={}  result={\"sent\":true}");
}

// A failed-then-finished job: its outcome, input, result and errors, each where it belongs.
TEST(Format, JobWithOutcomeResultAndErrors) {
  auto job = nlohmann::json::parse(
      R"({"type":"t","id":"j1","state":"finished","outcome":"succeeded","attempts":3,
          "data":{"to":"a"},"result":{"sent":true},"progress":null,"ended_at":2000,
          "errors":[{"attempt":1,"at":1000,"worker":"w1","kind":"Timeout","message":"slow",
                     "details":null},
                    {"attempt":2,"at":1500,"worker":"","kind":"","message":"boom",
                     "details":{"stack":"..."}}]})");
  EXPECT_EQ(format_job(job),
            "type:     t\n"
            "id:       j1\n"
            "state:    finished\n"
            "outcome:  succeeded\n"
            "attempts: 3\n"
            "ended_at: 2000 (1970-01-01T00:00:02.000Z)\n"
            "data:     {\"to\":\"a\"}\n"
            "result:   {\"sent\":true}\n"
            "progress: null\n"
            "errors:\n"
            "  #1  1970-01-01T00:00:01.000Z  w1  Timeout: slow\n"
            "  #2  1970-01-01T00:00:01.500Z  boom\n");
}

TEST(Format, FailAnswer) {
  EXPECT_EQ(
      format_fail_answer(nlohmann::json::parse(R"({"dead":false,"retry_at":1500,"attempt":2})")),
      "attempt 2 failed; retries at 1970-01-01T00:00:01.500Z");
  EXPECT_EQ(
      format_fail_answer(nlohmann::json::parse(R"({"dead":true,"retry_at":null,"attempt":3})")),
      "attempt 3 failed; the job is dead");
}

TEST(Metrics, ParsesSamples) {
  auto samples = parse_metrics(
      "# HELP kvq_jobs jobs\n# TYPE kvq_jobs gauge\n"
      "kvq_jobs{type=\"a\\\"b\",state=\"pending\"} 12\n"
      "kvq_jobs{type=\"w\",state=\"running\"} 3 1700000000\n"
      "kvq_monitor_reenqueues_total 7\n"
      "bucket{le=\"+Inf\"} +Inf\n"
      "garbage{ 1\n");
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].name, "kvq_jobs");
  EXPECT_EQ(samples[0].labels.at("type"), "a\"b");
  EXPECT_EQ(samples[0].labels.at("state"), "pending");
  EXPECT_EQ(samples[0].value, 12);
  EXPECT_EQ(samples[1].value, 3);
  EXPECT_EQ(samples[2].name, "kvq_monitor_reenqueues_total");
  EXPECT_TRUE(samples[2].labels.empty());
  EXPECT_EQ(samples[2].value, 7);
}

TEST(Stats, Percentile) {
  std::vector<double> v;
  EXPECT_EQ(percentile(v, 50), 0);
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(percentile(v, 50), 50);
  EXPECT_EQ(percentile(v, 90), 90);
  EXPECT_EQ(percentile(v, 99), 99);
  EXPECT_EQ(percentile(v, 100), 100);
  EXPECT_EQ(percentile({7}, 99), 7);
}

// The server's answers to a wrong request exit 2, as the CLI's own usage errors do; only
// "not found", "halted", 5xx and no answer have codes of their own.
TEST(ExitCodes, RejectedRequestsAreUsageErrors) {
  EXPECT_EQ(exit_code_for(200, ""), kExitOk);
  EXPECT_EQ(exit_code_for(204, ""), kExitOk);
  for (const char* error : {"invalid_argument", "malformed_json", "unknown_field", "bad_request"}) {
    EXPECT_EQ(exit_code_for(400, error), kExitUsage) << error;
  }
  EXPECT_EQ(exit_code_for(401, "unauthorized"), kExitUsage);
  EXPECT_EQ(exit_code_for(403, "wrong_token"), kExitUsage);
  EXPECT_EQ(exit_code_for(404, "no_route"), kExitUsage);
  EXPECT_EQ(exit_code_for(405, "method_not_allowed"), kExitUsage);
  for (const char* error : {"no_timeout", "already_exists", "type_has_jobs", "wrong_state"}) {
    EXPECT_EQ(exit_code_for(409, error), kExitUsage) << error;
  }
  EXPECT_EQ(exit_code_for(413, "body_too_large"), kExitUsage);
  EXPECT_EQ(exit_code_for(414, "target_too_long"), kExitUsage);
  EXPECT_EQ(exit_code_for(431, "header_too_large"), kExitUsage);
}

TEST(ExitCodes, NotFoundHaltedServerAndNetworkErrors) {
  EXPECT_EQ(exit_code_for(404, "not_found"), kExitNotFound);
  EXPECT_EQ(exit_code_for(409, "halted"), kExitHalted);
  EXPECT_EQ(exit_code_for(500, "internal"), kExitError);
  EXPECT_EQ(exit_code_for(501, "not_implemented"), kExitError);
  EXPECT_EQ(exit_code_for(503, "unavailable"), kExitError);
  EXPECT_EQ(exit_code_for(503, "resource_exhausted"), kExitError);
  EXPECT_EQ(exit_code_for(505, "http_version_not_supported"), kExitError);
  EXPECT_EQ(exit_code_for(0, "network"), kExitError);
  EXPECT_EQ(exit_code_for(302, ""), kExitError);
}

TEST(ExitCodes, HelpStatesEveryCode) {
  const std::string help = kExitCodesHelp;
  for (const char* line :
       {"  0  ok", "  1  server or network error", "  2  usage error",
        "  3  nothing happened in time", "  4  halted", "  5  not found", "  130  interrupted"}) {
    EXPECT_NE(help.find(line), std::string::npos) << line;
  }
}

TEST(ValueOf, Fallbacks) {
  auto j = nlohmann::json::parse(R"({"a":1,"s":"x"})");
  EXPECT_EQ(value_of(j, "a", 0), 1);
  EXPECT_EQ(value_of(j, "s", 0), 0);
  EXPECT_EQ(value_of(j, "missing", std::string("d")), "d");
  EXPECT_EQ(value_of(nlohmann::json::array(), "a", 5), 5);
}

}  // namespace
}  // namespace kvq::cli
