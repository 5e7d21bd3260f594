// Tests of the request bodies the client commands build from their arguments (cli/requests.h):
// what each sends, and the arguments each refuses before sending anything.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/requests.h"

namespace kvq::cli {
namespace {

// parse_args of "cmd ARGS" with `specs`, which must succeed.
ParsedArgs args_of(std::vector<std::string> args, const std::vector<OptionSpec>& specs) {
  args.insert(args.begin(), "cmd");
  auto parsed = parse_args(args, specs);
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
  return parsed.ok() ? std::move(*parsed) : ParsedArgs();
}

// The message of a request builder's error; "" (and a test failure) when it succeeded.
template <typename T>
std::string error_of(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.code(), Code::kInvalidArgument);
  return r.status().message();
}

const std::vector<OptionSpec> kFailSpecs = {{"lock", true},     {"message", true},
                                            {"kind", true},     {"details", true},
                                            {"retry-in", true}, {"no-retry", false}};

TEST(Requests, Fail) {
  auto body = fail_body(args_of({"t", "j", "--lock", "L", "--message", "boom"}, kFailSpecs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"lock":"L","error":{"message":"boom"}})"));
  body = fail_body(args_of({"t", "j", "--lock=L", "--message", "m", "--kind", "ValueError",
                            "--details", R"({"stack":"s"})", "--retry-in", "2.5"},
                           kFailSpecs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(
                       R"({"lock":"L","retry_in":2.5,
                           "error":{"message":"m","kind":"ValueError","details":{"stack":"s"}}})"));
  body = fail_body(args_of({"t", "j", "--lock", "L", "--message", "m", "--no-retry"}, kFailSpecs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(body->at("retry"), false);
  EXPECT_FALSE(body->contains("retry_in"));
}

TEST(Requests, FailRejectsWhatCannotBeSent) {
  EXPECT_EQ(error_of(fail_body(args_of({"t", "j", "--message", "m"}, kFailSpecs))),
            "--lock is required");
  EXPECT_EQ(error_of(fail_body(args_of({"t", "j", "--lock", "L"}, kFailSpecs))),
            "--message is required");
  EXPECT_EQ(error_of(fail_body(args_of(
                {"t", "j", "--lock", "L", "--message", "m", "--retry-in", "soon"}, kFailSpecs))),
            "--retry-in needs a number of seconds >= 0, not 'soon'");
  EXPECT_EQ(error_of(fail_body(args_of(
                {"t", "j", "--lock", "L", "--message", "m", "--retry-in", "-1"}, kFailSpecs))),
            "--retry-in needs a number of seconds >= 0, not '-1'");
  EXPECT_EQ(error_of(fail_body(args_of(
                {"t", "j", "--lock", "L", "--message", "m", "--retry-in", "1", "--no-retry"},
                kFailSpecs))),
            "give --retry-in or --no-retry, not both");
  EXPECT_EQ(
      error_of(fail_body(args_of({"t", "j", "--lock", "L", "--message", "m", "--details", "{x"},
                                 kFailSpecs)))
          .rfind("--details is not valid JSON", 0),
      0u);
}

TEST(Requests, Snooze) {
  const std::vector<OptionSpec> specs = {{"lock", true}, {"delay", true}, {"at", true}};
  auto body = snooze_body(args_of({"t", "j", "--lock", "L", "--delay", "30"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"lock":"L","delay":30.0})"));
  body = snooze_body(args_of({"t", "j", "--lock", "L", "--at", "1700000000000"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"lock":"L","scheduled_time":1700000000000})"));
  body = snooze_body(args_of({"t", "j", "--lock", "L"}, specs));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"lock":"L"})"));
  EXPECT_EQ(
      error_of(snooze_body(args_of({"t", "j", "--lock", "L", "--delay", "1", "--at", "5"}, specs))),
      "give --delay or --at, not both");
  EXPECT_EQ(error_of(snooze_body(args_of({"t", "j", "--lock", "L", "--at", "soon"}, specs))),
            "--at needs an integer, not 'soon'");
  EXPECT_EQ(error_of(snooze_body(args_of({"t", "j", "--delay", "1"}, specs))),
            "--lock is required");
}

TEST(Requests, RerunOneOrAll) {
  const std::vector<OptionSpec> specs = {
      {"at", true}, {"priority", true}, {"all-dead", false}, {"all-cancelled", false}};
  auto one = rerun_request(args_of({"t", "j 1", "--priority", "-2"}, specs));
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->target, "/v1/jobs/t/j%201/rerun");
  EXPECT_EQ(one->body, nlohmann::json::parse(R"({"priority":-2})"));
  EXPECT_EQ(one->outcome, "");
  auto all = rerun_request(args_of({"t", "--all-dead"}, specs));
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->target, "/v1/types/t/rerun");
  EXPECT_EQ(all->body, nlohmann::json::parse(R"({"outcome":"dead"})"));
  EXPECT_EQ(all->outcome, "dead");
  all = rerun_request(args_of({"t", "--all-cancelled"}, specs));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->body, nlohmann::json::parse(R"({"outcome":"cancelled"})"));
  EXPECT_EQ(error_of(rerun_request(args_of({"t"}, specs))),
            "give the ID of the job to rerun, or --all-dead or --all-cancelled");
  EXPECT_EQ(error_of(rerun_request(args_of({"t", "j", "--all-dead"}, specs))),
            "give ID or --all-dead, not both");
  EXPECT_EQ(error_of(rerun_request(args_of({"t", "--all-dead", "--all-cancelled"}, specs))),
            "give --all-dead or --all-cancelled, not both");
  EXPECT_EQ(error_of(rerun_request(args_of({"t", "--all-dead", "--at", "5"}, specs))),
            "--at and --priority apply to the rerun of one job");
}

TEST(Requests, FinishTakesTheResultAndUpdateTheProgress) {
  std::istringstream in(R"({"from":"stdin"})");
  const std::vector<OptionSpec> specs = {{"lock", true}, {"data", true}, {"progress", true}};
  auto finish = finish_body(args_of({"t", "j", "--lock", "L", R"({"sent":true})"}, specs), in);
  ASSERT_TRUE(finish.ok()) << finish.status().message();
  EXPECT_EQ(*finish, nlohmann::json::parse(R"({"lock":"L","result":{"sent":true}})"));
  finish =
      finish_body(args_of({"t", "j", "--lock", "L", "-", "--data", R"({"to":"b"})"}, specs), in);
  ASSERT_TRUE(finish.ok()) << finish.status().message();
  EXPECT_EQ(*finish,
            nlohmann::json::parse(R"({"lock":"L","result":{"from":"stdin"},"data":{"to":"b"}})"));
  EXPECT_EQ(error_of(finish_body(args_of({"t", "j", R"({})"}, specs), in)), "--lock is required");
  EXPECT_EQ(error_of(finish_body(args_of({"t", "j", "--lock", "L", "{"}, specs), in))
                .rfind("RESULT_JSON is not valid JSON", 0),
            0u);
  auto update = update_body(args_of({"t", "j", "--lock", "L", "50"}, specs), in);
  ASSERT_TRUE(update.ok()) << update.status().message();
  EXPECT_EQ(*update, nlohmann::json::parse(R"({"lock":"L","progress":50})"));
  update = update_body(
      args_of({"t", "j", "--lock", "L", "--progress", R"({"pct":5})", "--data", "{}"}, specs), in);
  ASSERT_TRUE(update.ok()) << update.status().message();
  EXPECT_EQ(*update, nlohmann::json::parse(R"({"lock":"L","progress":{"pct":5},"data":{}})"));
  update = update_body(args_of({"t", "j", "--lock", "L"}, specs), in);
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(*update, nlohmann::json::parse(R"({"lock":"L"})"));
  EXPECT_EQ(
      error_of(update_body(args_of({"t", "j", "--lock", "L", "1", "--progress", "2"}, specs), in)),
      "give PROGRESS_JSON or --progress, not both");
}

TEST(Requests, AddIfExists) {
  std::istringstream in;
  const std::vector<OptionSpec> specs = {{"at", true}, {"priority", true}, {"if-exists", true}};
  auto add = add_body(args_of({"t", "j", R"({"to":"a"})", "--if-exists", "keep"}, specs), in);
  ASSERT_TRUE(add.ok()) << add.status().message();
  EXPECT_EQ(*add, nlohmann::json::parse(R"({"id":"j","data":{"to":"a"},"if_exists":"keep"})"));
  add = add_body(args_of({"t", "j", "--at", "7", "--priority", "1"}, specs), in);
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(*add, nlohmann::json::parse(R"({"id":"j","data":{},"scheduled_time":7,"priority":1})"));
  EXPECT_EQ(error_of(add_body(args_of({"t", "j", "--if-exists", "skip"}, specs), in)),
            "--if-exists takes update or keep, not 'skip'");
  EXPECT_EQ(error_of(add_body(args_of({"t", "j", "--priority", "high"}, specs), in)),
            "--priority needs an integer, not 'high'");
}

TEST(Requests, AddDebounceAndUniqueFor) {
  std::istringstream in;
  const std::vector<OptionSpec> specs = {{"debounce", true}, {"unique-for", true}};
  auto add = add_body(args_of({"t", "j", "--debounce", "1.5:60", "--unique-for", "30"}, specs), in);
  ASSERT_TRUE(add.ok()) << add.status().message();
  EXPECT_EQ(*add,
            nlohmann::json::parse(R"({"id":"j","data":{},"debounce":{"delay":1.5,"max_delay":60},)"
                                  R"("unique_for":30})"));
  add = add_body(args_of({"t", "j", "--debounce", "2"}, specs), in);
  ASSERT_TRUE(add.ok()) << add.status().message();
  EXPECT_EQ(*add, nlohmann::json::parse(R"({"id":"j","data":{},"debounce":{"delay":2}})"));
  for (const char* bad : {"soon", "1:", ":5", "1:x", "-1"}) {
    EXPECT_EQ(
        error_of(add_body(args_of({"t", "j", std::string("--debounce=") + bad}, specs), in)),
        std::string("--debounce takes DELAY or DELAY:MAX_DELAY in seconds, not '") + bad + "'")
        << bad;
  }
  EXPECT_EQ(error_of(add_body(args_of({"t", "j", "--unique-for", "soon"}, specs), in)),
            "--unique-for needs a number of seconds >= 0, not 'soon'");
}

TEST(Requests, AddGroup) {
  std::istringstream in;
  const std::vector<OptionSpec> specs = {{"group", true}, {"priority", true}};
  auto add = add_body(args_of({"t", "j", "--group", "acme", "--priority", "2"}, specs), in);
  ASSERT_TRUE(add.ok()) << add.status().message();
  EXPECT_EQ(*add, nlohmann::json::parse(R"({"id":"j","data":{},"group":"acme","priority":2})"));
  // Whether a group is a valid one is the server's to say: the CLI sends it as given.
  add = add_body(args_of({"t", "j", "--group", ""}, specs), in);
  ASSERT_TRUE(add.ok()) << add.status().message();
  EXPECT_EQ((*add)["group"], "");
}

TEST(Requests, TypeSettings) {
  const std::vector<OptionSpec> specs = {{"max-attempts", true},
                                         {"backoff-base", true},
                                         {"backoff-factor", true},
                                         {"backoff-cap", true},
                                         {"backoff-jitter", true}};
  auto body = type_settings_body(args_of({"t", "--max-attempts", "3"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"max_attempts":3})"));
  body = type_settings_body(args_of({"t", "--backoff-base", "0.5", "--backoff-factor", "3",
                                     "--backoff-cap", "60", "--backoff-jitter", "0"},
                                    specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(
                       R"({"backoff":{"base":0.5,"factor":3.0,"cap":60.0,"jitter":0.0}})"));
  EXPECT_EQ(error_of(type_settings_body(args_of({"t"}, specs))).rfind("nothing to set", 0), 0u);
  EXPECT_EQ(error_of(type_settings_body(args_of({"t", "--max-attempts", "2.5"}, specs))),
            "--max-attempts needs an integer, not '2.5'");
  EXPECT_EQ(error_of(type_settings_body(args_of({"t", "--backoff-cap", "-5"}, specs))),
            "--backoff-cap needs a number of seconds >= 0, not '-5'");
  EXPECT_EQ(error_of(type_settings_body(args_of({"t", "--backoff-factor", "x"}, specs))),
            "--backoff-factor needs a number, not 'x'");
}

TEST(Requests, TypeLimits) {
  const std::vector<OptionSpec> specs = {{"max-running", true}, {"rate", true}};
  auto body = type_settings_body(args_of({"t", "--max-running", "4", "--rate", "10/1s"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body,
            nlohmann::json::parse(R"({"max_running":4,"rate":{"limit":10,"period_ms":1000}})"));
  body = type_settings_body(args_of({"t", "--max-running", "none", "--rate", "none"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"max_running":null,"rate":null})"));
  body = type_settings_body(args_of({"t", "--rate", "600/1h"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"rate":{"limit":600,"period_ms":3600000}})"));
  EXPECT_EQ(error_of(type_settings_body(args_of({"t", "--max-running", "0"}, specs))),
            "--max-running needs a whole number >= 1 or none, not '0'");
  for (const char* bad : {"10", "10/", "/1s", "x/1s", "10/0s", "0/1s", "10/1w"}) {
    EXPECT_EQ(error_of(type_settings_body(args_of({"t", "--rate", bad}, specs))),
              std::string("--rate needs LIMIT/DURATION (such as 10/1s or 100/1m) or none, not '") +
                  bad + "'")
        << bad;
  }
}

TEST(Requests, TypeLimitPerGroup) {
  const std::vector<OptionSpec> specs = {{"max-running", true}, {"max-running-per-group", true}};
  auto body = type_settings_body(args_of({"t", "--max-running-per-group", "1"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"max_running_per_group":1})"));
  body = type_settings_body(
      args_of({"t", "--max-running", "8", "--max-running-per-group", "none"}, specs));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"max_running":8,"max_running_per_group":null})"));
  for (const char* bad : {"0", "-1", "2.5", "many"}) {
    EXPECT_EQ(
        error_of(type_settings_body(args_of({"t", "--max-running-per-group", bad}, specs))),
        std::string("--max-running-per-group needs a whole number >= 1 or none, not '") + bad + "'")
        << bad;
  }
}

TEST(Requests, Pause) {
  const std::vector<OptionSpec> specs = {{"for", true}};
  auto body = pause_body(args_of({"t"}, specs));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, nlohmann::json::object());
  body = pause_body(args_of({"t", "--for", "10m"}, specs));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"for_ms":600000})"));
  EXPECT_EQ(error_of(pause_body(args_of({"t", "--for", "soon"}, specs))),
            "--for needs a duration such as 90s, 10m or 2h, not 'soon'");
}

TEST(Requests, Schedule) {
  const std::vector<OptionSpec> specs = {{"type", true}, {"cron", true},     {"timezone", true},
                                         {"data", true}, {"priority", true}, {"catch-up", true}};
  std::istringstream in;
  auto body = schedule_body(args_of({"nightly", "--type", "t", "--cron", "0 2 * * *"}, specs), in);
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"type":"t","cron":"0 2 * * *"})"));
  body =
      schedule_body(args_of({"n", "--type", "t", "--cron", "@hourly", "--timezone", "Europe/Paris",
                             "--data", R"({"k":1})", "--priority", "-3", "--catch-up", "all"},
                            specs),
                    in);
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json::parse(R"({"type":"t","cron":"@hourly","timezone":"Europe/Paris",
                                             "data":{"k":1},"priority":-3,"catch_up":"all"})"));
  EXPECT_EQ(error_of(schedule_body(args_of({"n", "--cron", "@hourly"}, specs), in)),
            "--type is required");
  EXPECT_EQ(error_of(schedule_body(args_of({"n", "--type", "t"}, specs), in)),
            "--cron is required");
  EXPECT_EQ(
      error_of(schedule_body(
          args_of({"n", "--type", "t", "--cron", "@daily", "--catch-up", "some"}, specs), in)),
      "--catch-up takes none, one or all, not 'some'");
  EXPECT_EQ(
      error_of(schedule_body(
                   args_of({"n", "--type", "t", "--cron", "@daily", "--data", "{nope"}, specs), in))
          .rfind("--data is not valid JSON", 0),
      0u);
}

}  // namespace
}  // namespace kvq::cli
