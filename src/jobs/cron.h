// jobs/cron.h — cron expressions, and the instants they name in a time zone.
//
// The grammar is ScheduleSpec::cron's (kvq/jobs.h): five fields, minute hour day-of-month
// month day-of-week, or six with seconds first, or an @-shortcut. Instants follow the zone's
// rules from the system's tz database: a wall time skipped when clocks go forward runs at the
// instant the gap ends; a wall time repeated when they go back runs once, the first time.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "kvq/status.h"

namespace kvq::jobs {

class CronSchedule {
 public:
  // kInvalidArgument naming the problem: the field and what is wrong with it, an unknown
  // timezone, or an expression that never matches (such as "0 0 30 2 *").
  static Result<CronSchedule> parse(std::string_view expression, std::string_view timezone);

  // The first instant strictly after `after_ms` (Unix milliseconds) that the expression names;
  // nullopt if there is none in the next kSearchYears years.
  std::optional<int64_t> next_after(int64_t after_ms) const;

  // True for six fields (a seconds field): occurrences may be less than a minute apart.
  bool has_seconds() const { return has_seconds_; }

  static constexpr int kSearchYears = 14;

 private:
  CronSchedule() = default;

  // crontab's day rule: both day fields restricted, either matches; otherwise both must.
  bool day_matches(absl::CivilDay day) const;
  // The first wall time at or after `from`, and not after `limit`, that the fields match.
  std::optional<absl::CivilSecond> next_wall_time(absl::CivilSecond from,
                                                  absl::CivilSecond limit) const;

  std::bitset<60> seconds_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_of_month_;  // 1..31
  std::bitset<13> months_;         // 1..12
  std::bitset<7> days_of_week_;    // 0 (Sunday)..6
  bool day_of_month_any_ = true;   // the field was "*" (or "?"): crontab's OR rule needs it
  bool day_of_week_any_ = true;
  bool has_seconds_ = false;
  absl::TimeZone zone_;
};

}  // namespace kvq::jobs
