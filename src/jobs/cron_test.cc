#include "jobs/cron.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace kvq::jobs {
namespace {

// An instant written in RFC 3339. The expectations below were derived by hand and checked with
// `date -u -d 'TZ="Europe/Paris" 2026-03-30 02:30'` and `zdump -v`, never with the code under
// test.
int64_t at(const char* rfc3339) {
  absl::Time t;
  std::string err;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) << rfc3339 << ": " << err;
  return absl::ToUnixMillis(t);
}

std::string show(std::optional<int64_t> ms) {
  if (!ms) return "none";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", absl::FromUnixMillis(*ms), absl::UTCTimeZone());
}

CronSchedule parsed(std::string_view expression, std::string_view timezone = "UTC") {
  auto cron = CronSchedule::parse(expression, timezone);
  EXPECT_TRUE(cron.ok()) << expression << ": " << cron.status().to_string();
  if (!cron.ok()) return *CronSchedule::parse("* * * * *", "UTC");
  return *cron;
}

// The `count` occurrences after `after`, in UTC RFC 3339, for readable failures.
std::vector<std::string> runs(std::string_view expression, std::string_view timezone,
                              const char* after, size_t count) {
  const CronSchedule cron = parsed(expression, timezone);
  std::vector<std::string> out;
  std::optional<int64_t> t = at(after);
  for (size_t i = 0; i < count && t; ++i) {
    t = cron.next_after(*t);
    out.push_back(show(t));
  }
  return out;
}

using Runs = std::vector<std::string>;

std::string error_of(std::string_view expression, std::string_view timezone = "UTC") {
  auto cron = CronSchedule::parse(expression, timezone);
  if (cron.ok()) return "parsed";
  EXPECT_EQ(cron.code(), Code::kInvalidArgument) << expression;
  return cron.status().message();
}

TEST(CronTest, NextIsStrictlyAfter) {
  const CronSchedule daily = parsed("0 0 * * *");
  EXPECT_EQ(show(daily.next_after(at("2026-01-01T00:00:00Z"))), "2026-01-02T00:00:00Z");
  EXPECT_EQ(show(daily.next_after(at("2025-12-31T23:59:59.999Z"))), "2026-01-01T00:00:00Z");
  EXPECT_EQ(show(daily.next_after(at("2026-01-01T00:00:00.001Z"))), "2026-01-02T00:00:00Z");
  EXPECT_EQ(show(daily.next_after(at("1969-12-31T23:59:59.500Z"))), "1970-01-01T00:00:00Z");
}

TEST(CronTest, StepsListsAndRanges) {
  EXPECT_EQ(runs("*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", 3),
            (Runs{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z"}));
  // `a/n` runs from a to the field's end.
  EXPECT_EQ(runs("5/20 * * * *", "UTC", "2026-01-01T00:00:00Z", 4),
            (Runs{"2026-01-01T00:05:00Z", "2026-01-01T00:25:00Z", "2026-01-01T00:45:00Z",
                  "2026-01-01T01:05:00Z"}));
  EXPECT_EQ(runs("10-30/10,45 9 * * *", "UTC", "2026-01-01T00:00:00Z", 5),
            (Runs{"2026-01-01T09:10:00Z", "2026-01-01T09:20:00Z", "2026-01-01T09:30:00Z",
                  "2026-01-01T09:45:00Z", "2026-01-02T09:10:00Z"}));
  EXPECT_EQ(runs("0 22-23,1 * * *", "UTC", "2026-01-01T21:00:00Z", 3),
            (Runs{"2026-01-01T22:00:00Z", "2026-01-01T23:00:00Z", "2026-01-02T01:00:00Z"}));
}

TEST(CronTest, MonthEndsAndLeapYears) {
  EXPECT_EQ(runs("0 12 31 * *", "UTC", "2026-04-01T00:00:00Z", 3),
            (Runs{"2026-05-31T12:00:00Z", "2026-07-31T12:00:00Z", "2026-08-31T12:00:00Z"}));
  EXPECT_EQ(runs("0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", 2),
            (Runs{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}));
  // 2100 is not a leap year: the longest wait, 8 years, still within kSearchYears.
  EXPECT_EQ(runs("0 0 29 2 *", "UTC", "2096-02-29T00:00:00Z", 1), (Runs{"2104-02-29T00:00:00Z"}));
  EXPECT_EQ(runs("59 23 28-31 2 *", "UTC", "2027-02-27T00:00:00Z", 2),
            (Runs{"2027-02-28T23:59:00Z", "2028-02-28T23:59:00Z"}));
  EXPECT_EQ(runs("0 0 1 * *", "UTC", "2026-12-15T00:00:00Z", 2),
            (Runs{"2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z"}));
}

TEST(CronTest, BothDayFieldsRestrictedMatchEither) {
  // 2026-01-01 is a Thursday; the 13th of January a Tuesday.
  EXPECT_EQ(runs("0 0 13 * FRI", "UTC", "2026-01-01T00:00:00Z", 4),
            (Runs{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z",
                  "2026-01-16T00:00:00Z"}));
  // A field starting with `*` is unrestricted (crontab(5), Vixie cron): `*/2 * MON` is the
  // Mondays that fall on an odd day of the month, not every odd day and every Monday.
  EXPECT_EQ(runs("0 0 */2 * MON", "UTC", "2026-01-10T00:00:00Z", 3),
            (Runs{"2026-01-19T00:00:00Z", "2026-02-09T00:00:00Z", "2026-02-23T00:00:00Z"}));
}

TEST(CronTest, AnAndOfTheDayFieldsMayWaitYears) {
  // February's Mondays on days 1, 8, 15, 22 or 29: after 2027's, the next is in 2038 (2032's
  // 29th is a Sunday) — past 8 years, inside kSearchYears.
  EXPECT_EQ(runs("0 0 */7 2 MON", "UTC", "2027-02-23T00:00:00Z", 1),
            (Runs{"2038-02-01T00:00:00Z"}));
}

TEST(CronTest, OneDayFieldUnrestrictedLetsTheOtherDecide) {
  EXPECT_EQ(runs("0 0 * * MON", "UTC", "2026-01-01T00:00:00Z", 2),
            (Runs{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"}));
  EXPECT_EQ(runs("0 0 13 * *", "UTC", "2026-01-01T00:00:00Z", 2),
            (Runs{"2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z"}));
  // Quartz's `?` is `*`.
  EXPECT_EQ(runs("0 0 13 * ?", "UTC", "2026-01-01T00:00:00Z", 1), (Runs{"2026-01-13T00:00:00Z"}));
  EXPECT_EQ(runs("0 0 ? * MON", "UTC", "2026-01-01T00:00:00Z", 1), (Runs{"2026-01-05T00:00:00Z"}));
}

TEST(CronTest, NamesAreCaseInsensitiveAndWorkInRanges) {
  EXPECT_EQ(runs("0 9 * jan-Mar Mon-FRI", "UTC", "2026-03-27T12:00:00Z", 2),
            (Runs{"2026-03-30T09:00:00Z", "2026-03-31T09:00:00Z"}));
  EXPECT_EQ(runs("0 0 1 jul,DEC *", "UTC", "2026-01-01T00:00:00Z", 2),
            (Runs{"2026-07-01T00:00:00Z", "2026-12-01T00:00:00Z"}));
  EXPECT_EQ(runs("0 0 * * sat-sat", "UTC", "2026-01-01T00:00:00Z", 1),
            (Runs{"2026-01-03T00:00:00Z"}));
}

TEST(CronTest, SundayIsZeroOrSeven) {
  const Runs sundays{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"};
  EXPECT_EQ(runs("0 0 * * 0", "UTC", "2026-01-01T00:00:00Z", 2), sundays);
  EXPECT_EQ(runs("0 0 * * 7", "UTC", "2026-01-01T00:00:00Z", 2), sundays);
  EXPECT_EQ(runs("0 0 * * SUN", "UTC", "2026-01-01T00:00:00Z", 2), sundays);
  EXPECT_EQ(runs("0 0 * * 5-7", "UTC", "2026-01-01T00:00:00Z", 4),
            (Runs{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z",
                  "2026-01-09T00:00:00Z"}));
  // `*/2` is Sunday, Tuesday, Thursday, Saturday: 7 does not bring Sunday in twice.
  EXPECT_EQ(runs("0 0 * * */2", "UTC", "2026-01-01T00:00:00Z", 4),
            (Runs{"2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-06T00:00:00Z",
                  "2026-01-08T00:00:00Z"}));
}

TEST(CronTest, SecondsField) {
  EXPECT_FALSE(parsed("* * * * *").has_seconds());
  EXPECT_TRUE(parsed("* * * * * *").has_seconds());
  EXPECT_EQ(runs("*/10 * * * * *", "UTC", "2026-01-01T12:00:05Z", 3),
            (Runs{"2026-01-01T12:00:10Z", "2026-01-01T12:00:20Z", "2026-01-01T12:00:30Z"}));
  EXPECT_EQ(runs("30 0 0 * * *", "UTC", "2026-01-01T00:00:30Z", 1), (Runs{"2026-01-02T00:00:30Z"}));
  EXPECT_EQ(runs("* * * * * *", "UTC", "2026-01-01T23:59:59Z", 2),
            (Runs{"2026-01-02T00:00:00Z", "2026-01-02T00:00:01Z"}));
}

TEST(CronTest, Shortcuts) {
  const char* after = "2026-05-15T10:30:00Z";
  EXPECT_EQ(runs("@yearly", "UTC", after, 1), (Runs{"2027-01-01T00:00:00Z"}));
  EXPECT_EQ(runs("@ANNUALLY", "UTC", after, 1), (Runs{"2027-01-01T00:00:00Z"}));
  EXPECT_EQ(runs("@monthly", "UTC", after, 1), (Runs{"2026-06-01T00:00:00Z"}));
  EXPECT_EQ(runs("@Weekly", "UTC", after, 1), (Runs{"2026-05-17T00:00:00Z"}));  // a Sunday
  EXPECT_EQ(runs("@daily", "UTC", after, 1), (Runs{"2026-05-16T00:00:00Z"}));
  EXPECT_EQ(runs("@midnight", "UTC", after, 1), (Runs{"2026-05-16T00:00:00Z"}));
  EXPECT_EQ(runs("  @hourly\t", "UTC", after, 1), (Runs{"2026-05-15T11:00:00Z"}));
  EXPECT_FALSE(parsed("@hourly").has_seconds());
}

TEST(CronTest, BlanksSeparateFields) {
  EXPECT_EQ(runs(" \t0\t\t12  * *   *  ", "UTC", "2026-01-01T00:00:00Z", 1),
            (Runs{"2026-01-01T12:00:00Z"}));
}

TEST(CronTest, WallTimesAreInTheZone) {
  EXPECT_EQ(runs("0 9 * * *", "Europe/Paris", "2026-01-01T00:00:00Z", 1),
            (Runs{"2026-01-01T08:00:00Z"}));
  EXPECT_EQ(runs("0 9 * * *", "Europe/Paris", "2026-07-01T00:00:00Z", 1),
            (Runs{"2026-07-01T07:00:00Z"}));
  EXPECT_EQ(runs("0 9 * * *", "America/New_York", "2026-01-01T00:00:00Z", 1),
            (Runs{"2026-01-01T14:00:00Z"}));
}

// Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00Z; 02:00-02:59 does not exist.
TEST(CronTest, SkippedWallTimeRunsWhenTheGapEnds) {
  EXPECT_EQ(runs("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z", 2),
            (Runs{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}));
  EXPECT_EQ(runs("0 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2),
            (Runs{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"}));
  // Lord Howe goes from +10:30 to +11 at 2026-10-04 02:00 (15:30Z): 02:00-02:29 is skipped.
  EXPECT_EQ(runs("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z", 2),
            (Runs{"2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}));
}

TEST(CronTest, SeveralWallTimesInOneGapRunOnce) {
  // 02:00, 02:15, 02:30, 02:45 and 03:00 all fall on 01:00Z.
  EXPECT_EQ(runs("*/15 * * * *", "Europe/Paris", "2026-03-29T00:40:00Z", 4),
            (Runs{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z",
                  "2026-03-29T01:30:00Z"}));
  EXPECT_EQ(runs("0 * * * *", "Europe/Paris", "2026-03-28T23:30:00Z", 3),
            (Runs{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}));
  // Asked from inside the second, or just after the gap's instant, the gap is done.
  const CronSchedule cron = parsed("*/15 * * * *", "Europe/Paris");
  EXPECT_EQ(show(cron.next_after(at("2026-03-29T00:59:59.999Z"))), "2026-03-29T01:00:00Z");
  EXPECT_EQ(show(cron.next_after(at("2026-03-29T01:00:00.500Z"))), "2026-03-29T01:15:00Z");
}

// Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00Z; 02:00-02:59 comes twice.
TEST(CronTest, RepeatedWallTimeRunsOnceTheFirstTime) {
  EXPECT_EQ(runs("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z", 2),
            (Runs{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}));
  // The whole second pass (01:00Z-01:59Z) is left out.
  EXPECT_EQ(runs("*/20 * * * *", "Europe/Paris", "2026-10-24T23:50:00Z", 4),
            (Runs{"2026-10-25T00:00:00Z", "2026-10-25T00:20:00Z", "2026-10-25T00:40:00Z",
                  "2026-10-25T02:00:00Z"}));
  EXPECT_EQ(runs("0 * * * *", "Europe/Paris", "2026-10-24T23:30:00Z", 2),
            (Runs{"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z"}));
  EXPECT_EQ(runs("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            (Runs{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}));
  // Lord Howe goes from +11 to +10:30 at 2026-04-05 02:00 (15:00Z): 01:30-01:59 comes twice.
  EXPECT_EQ(runs("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00Z", 2),
            (Runs{"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}));
}

TEST(CronTest, AskedDuringTheSecondPassWallTimesAlreadyRunAreNotReturned) {
  const CronSchedule cron = parsed("*/20 * * * *", "Europe/Paris");
  // 01:10Z is 02:10 CET, the second pass: 02:20 and 02:40 ran in the first pass.
  EXPECT_EQ(show(cron.next_after(at("2026-10-25T01:10:00Z"))), "2026-10-25T02:00:00Z");
  EXPECT_EQ(show(cron.next_after(at("2026-10-25T01:00:00Z"))), "2026-10-25T02:00:00Z");
  EXPECT_EQ(show(cron.next_after(at("2026-10-25T00:59:59Z"))), "2026-10-25T02:00:00Z");
  const CronSchedule seconds = parsed("*/30 * * * * *", "Europe/Paris");
  EXPECT_EQ(show(seconds.next_after(at("2026-10-25T00:59:45Z"))), "2026-10-25T02:00:00Z");
  EXPECT_EQ(show(seconds.next_after(at("2026-10-25T01:30:00Z"))), "2026-10-25T02:00:00Z");
}

TEST(CronTest, ExtremeInstantsDoNotBreakTheSearch) {
  const CronSchedule cron = parsed("0 0 29 2 *", "Europe/Paris");
  EXPECT_EQ(cron.next_after(std::numeric_limits<int64_t>::max()), std::nullopt);
  auto early = cron.next_after(std::numeric_limits<int64_t>::min());
  ASSERT_TRUE(early.has_value());
  EXPECT_GT(*early, std::numeric_limits<int64_t>::min());
}

TEST(CronTest, ErrorsNameTheFieldAndTheText) {
  EXPECT_EQ(error_of("61 * * * *"), "cron: minute field \"61\": 61 is out of range 0-59");
  EXPECT_EQ(error_of("0 24 * * *"), "cron: hour field \"24\": 24 is out of range 0-23");
  EXPECT_EQ(error_of("0 0 0 * *"), "cron: day-of-month field \"0\": 0 is out of range 1-31");
  EXPECT_EQ(error_of("0 0 32 * *"), "cron: day-of-month field \"32\": 32 is out of range 1-31");
  EXPECT_EQ(error_of("0 0 * 13 *"), "cron: month field \"13\": 13 is out of range 1-12");
  EXPECT_EQ(error_of("0 0 * * 8"), "cron: day-of-week field \"8\": 8 is out of range 0-7");
  EXPECT_EQ(error_of("60 0 0 * * *"), "cron: second field \"60\": 60 is out of range 0-59");
  EXPECT_EQ(error_of("99999999999999999999 * * * *"),
            "cron: minute field \"99999999999999999999\": 99999999999999999999 is out of range "
            "0-59");
  EXPECT_EQ(error_of("1,2,70 * * * *"), "cron: minute field \"1,2,70\": 70 is out of range 0-59");
}

TEST(CronTest, StepsAndRangesAreChecked) {
  EXPECT_EQ(error_of("*/0 * * * *"), "cron: minute field \"*/0\": step 0 is out of range 1-60");
  EXPECT_EQ(error_of("0 */25 * * *"), "cron: hour field \"*/25\": step 25 is out of range 1-24");
  EXPECT_EQ(error_of("0 0 * * */8"), "cron: day-of-week field \"*/8\": step 8 is out of range 1-7");
  EXPECT_EQ(error_of("30-10 * * * *"),
            "cron: minute field \"30-10\": range 30-10 is reversed (30 > 10)");
  EXPECT_EQ(error_of("0 0 * DEC-JAN *"),
            "cron: month field \"DEC-JAN\": range DEC-JAN is reversed (12 > 1)");
  EXPECT_EQ(error_of("*/ * * * *"), "cron: minute field \"*/\": \"*/\" has no step after \"/\"");
  EXPECT_EQ(error_of("/5 * * * *"), "cron: minute field \"/5\": \"/5\" has no value before \"/\"");
  EXPECT_EQ(error_of("*/x * * * *"), "cron: minute field \"*/x\": step \"x\" is not a number");
  EXPECT_EQ(error_of("5- * * * *"), "cron: minute field \"5-\": a range is missing a bound");
  EXPECT_EQ(error_of("1,,2 * * * *"), "cron: minute field \"1,,2\": empty list item");
  EXPECT_EQ(error_of("1, * * * *"), "cron: minute field \"1,\": empty list item");
  EXPECT_EQ(error_of("1-2-3 * * * *"), "cron: minute field \"1-2-3\": \"2-3\" is not a number");
  EXPECT_EQ(error_of("*-5 * * * *"), "cron: minute field \"*-5\": \"*\" is not a number");
}

TEST(CronTest, NamesAndQuestionMarksOnlyWhereTheyBelong) {
  EXPECT_EQ(error_of("0 0 * FOO *"),
            "cron: month field \"FOO\": \"FOO\" is not a number or month name (JAN-DEC)");
  EXPECT_EQ(error_of("0 0 * * MONDAY"),
            "cron: day-of-week field \"MONDAY\": \"MONDAY\" is not a number or day name (SUN-SAT)");
  EXPECT_EQ(error_of("0 MON * * *"), "cron: hour field \"MON\": \"MON\" is not a number");
  EXPECT_EQ(error_of("0 0 * * 1MON"),
            "cron: day-of-week field \"1MON\": \"1MON\" is not a number or day name (SUN-SAT)");
  EXPECT_EQ(error_of("? * * * *"),
            "cron: minute field \"?\": \"?\" is only allowed in the day-of-month and day-of-week "
            "fields");
  EXPECT_EQ(error_of("0 0 * ? *"),
            "cron: month field \"?\": \"?\" is only allowed in the day-of-month and day-of-week "
            "fields");
}

TEST(CronTest, TheExpressionAsAWholeIsChecked) {
  EXPECT_EQ(error_of(""), "cron expression is empty");
  EXPECT_EQ(error_of(" \t "), "cron expression is empty");
  EXPECT_EQ(error_of("* * * *"),
            "cron \"* * * *\" has 4 fields; expected 5 (minute hour day-of-month month "
            "day-of-week) or 6 (second minute hour day-of-month month day-of-week)");
  EXPECT_EQ(error_of("* * * * * * *"),
            "cron \"* * * * * * *\" has 7 fields; expected 5 (minute hour day-of-month month "
            "day-of-week) or 6 (second minute hour day-of-month month day-of-week)");
  EXPECT_EQ(error_of(std::string(257, '*')), "cron expression is 257 bytes; the limit is 256");
  EXPECT_EQ(error_of("0 0 * * 1#2"),
            "cron: day-of-week field \"1#2\": character '#' is not allowed (fields use digits, "
            "names, * ? , - /)");
  EXPECT_EQ(error_of("0 0 1W * *"), "cron: day-of-month field \"1W\": \"1W\" is not a number");
  EXPECT_EQ(error_of("0;0 * * * *"),
            "cron: minute field \"0;0\": character ';' is not allowed (fields use digits, names, * "
            "? , - /)");
  EXPECT_EQ(error_of("0 0 L * *"), "cron: day-of-month field \"L\": \"L\" is not a number");
  EXPECT_EQ(error_of("0 0 * * *\n0 1 * * *"),
            "cron: byte 0x0a at offset 9 is not allowed (fields are printable ASCII separated by "
            "spaces or tabs)");
  EXPECT_EQ(error_of(std::string("0 0 * * \0", 9)).substr(0, 30), "cron: byte 0x00 at offset 8 is");
  EXPECT_EQ(error_of("0 0 * * \xc3\xa9").substr(0, 30), "cron: byte 0xc3 at offset 8 is");
}

TEST(CronTest, ShortcutsAreKnownAndStandAlone) {
  EXPECT_EQ(error_of("@reboot"),
            "cron: unknown shortcut \"@reboot\" (known: @yearly @annually @monthly @weekly @daily "
            "@midnight @hourly)");
  EXPECT_EQ(error_of("@daily 5"), "cron \"@daily 5\": a shortcut such as @daily stands alone");
  EXPECT_EQ(error_of("0 @daily * * *"),
            "cron: hour field \"@daily\": character '@' is not allowed (fields use digits, names, "
            "* ? , - /)");
}

TEST(CronTest, ExpressionsThatNeverMatchAreRefused) {
  EXPECT_EQ(error_of("0 0 30 2 *"), "cron \"0 0 30 2 *\" never matches");
  EXPECT_EQ(error_of("0 0 31 4 *"), "cron \"0 0 31 4 *\" never matches");
  EXPECT_EQ(error_of("  0 0 31 2,4,6,9,11 ?  "), "cron \"0 0 31 2,4,6,9,11 ?\" never matches");
  EXPECT_EQ(error_of("0 0 0 30-31 FEB *"), "cron \"0 0 0 30-31 FEB *\" never matches");
  // With the day of week restricted too, either day field matches: some day always does.
  EXPECT_EQ(error_of("0 0 30 2 MON"), "parsed");
  EXPECT_EQ(error_of("0 0 29 2 *"), "parsed");
  EXPECT_EQ(error_of("0 0 31 4,5 *"), "parsed");
}

TEST(CronTest, TimezonesComeFromTheTzDatabase) {
  EXPECT_EQ(error_of("* * * * *", "Mars/Olympus"), "unknown timezone \"Mars/Olympus\"");
  EXPECT_EQ(error_of("* * * * *", ""), "unknown timezone \"\"");
  EXPECT_EQ(error_of("* * * * *", "localtime"), "unknown timezone \"localtime\"");
  EXPECT_EQ(error_of("* * * * *", "/etc/passwd"), "unknown timezone \"/etc/passwd\"");
  EXPECT_EQ(error_of("* * * * *", "file:/etc/localtime"),
            "unknown timezone \"file:/etc/localtime\"");
  EXPECT_EQ(error_of("* * * * *", "../../../etc/passwd"),
            "unknown timezone \"../../../etc/passwd\"");
  EXPECT_EQ(error_of("* * * * *", "Europe//Paris"), "unknown timezone \"Europe//Paris\"");
  EXPECT_EQ(error_of("* * * * *", "Europe/Paris"), "parsed");
  EXPECT_EQ(error_of("* * * * *", "America/Argentina/Buenos_Aires"), "parsed");
  EXPECT_EQ(error_of("* * * * *", "Etc/GMT+5"), "parsed");
  EXPECT_EQ(error_of("* * * * *", "America/Port-au-Prince"), "parsed");
  // The field errors come first: the expression is checked before the zone.
  EXPECT_EQ(error_of("61 * * * *", "Mars/Olympus"),
            "cron: minute field \"61\": 61 is out of range 0-59");
}

// Input from HTTP may be anything: every string of cron's own characters either parses to a
// schedule that matches within kSearchYears, after any instant, or is refused.
TEST(CronTest, ArbitraryInputIsRefusedOrMatches) {
  std::mt19937 random(21);
  const std::string alphabet = "0123456789*/,-? \tJANMOSUFRIDECjanmon@";
  const std::vector<std::string> tokens = {"*",   "*/7", "1-5", "0", "31",   "29", "2",
                                           "FEB", "MON", "?",   "7", "1,15", "30", "4/3"};
  size_t parsed_count = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string expression;
    if (i % 2 == 0) {
      const size_t length = random() % 24;
      for (size_t j = 0; j < length; ++j) expression += alphabet[random() % alphabet.size()];
    } else {
      const size_t fields = 5 + random() % 2;
      for (size_t j = 0; j < fields; ++j) {
        expression += tokens[random() % tokens.size()];
        expression += ' ';
      }
    }
    auto cron = CronSchedule::parse(expression, i % 3 == 0 ? "Europe/Paris" : "UTC");
    if (!cron.ok()) {
      EXPECT_EQ(cron.code(), Code::kInvalidArgument) << expression;
      EXPECT_FALSE(cron.status().message().empty());
      continue;
    }
    ++parsed_count;
    const int64_t after = at("2026-01-01T00:00:00Z") + int64_t(random() % 1000000) * 60007;
    auto next = cron->next_after(after);
    ASSERT_TRUE(next.has_value()) << expression;
    EXPECT_GT(*next, after) << expression;
    EXPECT_LE(*next - after, int64_t(CronSchedule::kSearchYears) * 366 * 86400 * 1000)
        << expression;
  }
  EXPECT_GT(parsed_count, 100u);  // the generator exercises the search, not only the errors
}

}  // namespace
}  // namespace kvq::jobs
