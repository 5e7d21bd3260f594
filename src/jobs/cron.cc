#include "jobs/cron.h"

#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/time/civil_time.h"

namespace kvq::jobs {
namespace {

// Longer expressions are refused: no sensible schedule needs more, and the text comes from
// HTTP requests.
constexpr size_t kMaxExpressionBytes = 256;
// IANA names are at most ~32 bytes ("America/Argentina/ComodRivadavia").
constexpr size_t kMaxTimezoneBytes = 64;

// The fields that differ from plain numbers: names, "?", and day-of-week's two Sundays.
enum class FieldKind { kPlain, kDayOfMonth, kMonth, kDayOfWeek };

struct FieldRange {
  const char* name;
  int min;
  int max;  // the largest value written
  FieldKind kind = FieldKind::kPlain;

  // The largest value `*` and `a/n` reach: 6 for day-of-week, whose 7 only repeats Sunday
  // (and would shift `*/2` onto it twice).
  int last() const { return kind == FieldKind::kDayOfWeek ? 6 : max; }
};

constexpr FieldRange kSecond{"second", 0, 59};
constexpr FieldRange kMinute{"minute", 0, 59};
constexpr FieldRange kHour{"hour", 0, 23};
constexpr FieldRange kDayOfMonth{"day-of-month", 1, 31, FieldKind::kDayOfMonth};
constexpr FieldRange kMonth{"month", 1, 12, FieldKind::kMonth};
// 7 is Sunday as well as 0; folded to 0 once parsed.
constexpr FieldRange kDayOfWeek{"day-of-week", 0, 7, FieldKind::kDayOfWeek};

constexpr std::array<std::string_view, 12> kMonthNames = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<std::string_view, 7> kDayNames = {"SUN", "MON", "TUE", "WED",
                                                       "THU", "FRI", "SAT"};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split_blanks(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_blank(s[i])) ++i;
    size_t start = i;
    while (i < s.size() && !is_blank(s[i])) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

// One field of an expression being parsed: where errors name it, and its bits.
template <size_t N>
class FieldParser {
 public:
  FieldParser(const FieldRange& range, std::string_view text, std::bitset<N>& bits)
      : range_(range), text_(text), bits_(bits) {}

  Status parse() {
    bits_.reset();
    for (char c : text_) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '*' && c != '?' && c != ',' &&
          c != '-' && c != '/') {
        return error(std::string("character '") + c +
                     "' is not allowed (fields use digits, names, * ? , - /)");
      }
    }
    size_t start = 0;
    while (true) {
      size_t comma = text_.find(',', start);
      std::string_view item = text_.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      KVQ_RETURN_IF_ERROR(parse_item(item));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return Status::OK();
  }

 private:
  Status error(std::string_view what) const {
    return InvalidArgument("cron: " + std::string(range_.name) + " field \"" + std::string(text_) +
                           "\": " + std::string(what));
  }

  bool allows_question_mark() const {
    return range_.kind == FieldKind::kDayOfMonth || range_.kind == FieldKind::kDayOfWeek;
  }

  // `item` is one list element: `*`, `?`, `a`, `a-b`, each optionally followed by `/step`.
  Status parse_item(std::string_view item) {
    if (item.empty()) return error("empty list item");
    std::string_view base = item;
    std::optional<int> step;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      base = item.substr(0, slash);
      std::string_view step_text = item.substr(slash + 1);
      if (base.empty()) return error("\"" + std::string(item) + "\" has no value before \"/\"");
      if (step_text.empty()) return error("\"" + std::string(item) + "\" has no step after \"/\"");
      KVQ_ASSIGN_OR_RETURN(int n, number(step_text, "step"));
      const int span = range_.last() - range_.min + 1;
      if (n < 1 || n > span) {
        return error("step " + std::to_string(n) + " is out of range 1-" + std::to_string(span));
      }
      step = n;
    }
    int low;
    int high;
    if (base == "*" || base == "?") {
      if (base == "?" && !allows_question_mark()) {
        return error("\"?\" is only allowed in the day-of-month and day-of-week fields");
      }
      low = range_.min;
      high = range_.last();
    } else if (size_t dash = base.find('-'); dash != std::string_view::npos) {
      KVQ_ASSIGN_OR_RETURN(low, value(base.substr(0, dash)));
      KVQ_ASSIGN_OR_RETURN(high, value(base.substr(dash + 1)));
      if (low > high) {
        return error("range " + std::string(base) + " is reversed (" + std::to_string(low) + " > " +
                     std::to_string(high) + ")");
      }
    } else {
      KVQ_ASSIGN_OR_RETURN(low, value(base));
      // crontab's `a/n`: from a to the field's end, every n.
      high = step ? range_.last() : low;
      if (low > high) high = low;  // `7/n` in day-of-week: Sunday only
    }
    for (int v = low; v <= high; v += step.value_or(1)) {
      bits_.set(range_.kind == FieldKind::kDayOfWeek && v == 7 ? 0 : static_cast<size_t>(v));
    }
    return Status::OK();
  }

  // A number within the field, or (in the month and day-of-week fields) a three-letter name.
  Result<int> value(std::string_view text) {
    if (text.empty()) return error("a range is missing a bound");
    if (text.find_first_not_of("0123456789") != std::string_view::npos) return name(text);
    KVQ_ASSIGN_OR_RETURN(int v, number(text, "value"));
    if (v < range_.min || v > range_.max) {
      return error(std::string(text) + " is out of range " + std::to_string(range_.min) + "-" +
                   std::to_string(range_.max));
    }
    return v;
  }

  // Anything that is not all digits; its error says what the field would have taken.
  Result<int> name(std::string_view text) {
    const std::string key = upper(text);
    if (range_.kind == FieldKind::kMonth) {
      for (size_t i = 0; i < kMonthNames.size(); ++i) {
        if (key == kMonthNames[i]) return static_cast<int>(i) + 1;
      }
      return error("\"" + std::string(text) + "\" is not a number or month name (JAN-DEC)");
    }
    if (range_.kind == FieldKind::kDayOfWeek) {
      for (size_t i = 0; i < kDayNames.size(); ++i) {
        if (key == kDayNames[i]) return static_cast<int>(i);
      }
      return error("\"" + std::string(text) + "\" is not a number or day name (SUN-SAT)");
    }
    return error("\"" + std::string(text) + "\" is not a number");
  }

  // Digits only; saturates instead of overflowing, so that any run of digits gets a range error.
  Result<int> number(std::string_view text, std::string_view what) {
    int v = 0;
    for (char c : text) {
      if (c < '0' || c > '9') {
        return error(std::string(what) + " \"" + std::string(text) + "\" is not a number");
      }
      if (v < 1000000) v = v * 10 + (c - '0');
    }
    return v;
  }

  const FieldRange& range_;
  std::string_view text_;
  std::bitset<N>& bits_;
};

template <size_t N>
Status parse_field(const FieldRange& range, std::string_view text, std::bitset<N>& bits) {
  return FieldParser<N>(range, text, bits).parse();
}

struct Shortcut {
  std::string_view name;
  std::string_view fields;
};

constexpr std::array<Shortcut, 7> kShortcuts = {{
    {"@YEARLY", "0 0 1 1 *"},
    {"@ANNUALLY", "0 0 1 1 *"},
    {"@MONTHLY", "0 0 1 * *"},
    {"@WEEKLY", "0 0 * * 0"},
    {"@DAILY", "0 0 * * *"},
    {"@MIDNIGHT", "0 0 * * *"},
    {"@HOURLY", "0 * * * *"},
}};

// Printable characters are checked field by field, where errors can name the field; bytes
// that would not print are refused here, before any message quotes the text.
Status check_bytes(std::string_view expression) {
  for (size_t i = 0; i < expression.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(expression[i]);
    if (is_blank(static_cast<char>(c)) || (c >= 0x21 && c <= 0x7E)) continue;
    static constexpr char kHex[] = "0123456789abcdef";
    return InvalidArgument(std::string("cron: byte 0x") + kHex[c >> 4] + kHex[c & 0xF] +
                           " at offset " + std::to_string(i) +
                           " is not allowed (fields are printable ASCII separated by spaces or "
                           "tabs)");
  }
  return Status::OK();
}

// Names from the tz database only: absl would otherwise also read "localtime" (each server's
// own zone), absolute paths and "file:" names (any file on the server).
bool plausible_zone_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxTimezoneBytes || name == "localtime") return false;
  if (name.front() == '/' || name.back() == '/' || name.find("//") != std::string_view::npos) {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '_' && c != '-' &&
        c != '+')
      return false;
  }
  return true;
}

int days_in_month(absl::civil_year_t year, int month) {
  static constexpr std::array<int, 13> kDays = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month != 2) return kDays[static_cast<size_t>(month)];
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return leap ? 29 : 28;
}

// The first i in [from, N) with bits[i] set, or -1.
template <size_t N>
int next_set(const std::bitset<N>& bits, int from) {
  for (int i = from; i < static_cast<int>(N); ++i) {
    if (bits[static_cast<size_t>(i)]) return i;
  }
  return -1;
}

// Sunday 0 .. Saturday 6, as cron counts.
int cron_weekday(absl::CivilDay day) {
  switch (absl::GetWeekday(day)) {
    case absl::Weekday::sunday: return 0;
    case absl::Weekday::monday: return 1;
    case absl::Weekday::tuesday: return 2;
    case absl::Weekday::wednesday: return 3;
    case absl::Weekday::thursday: return 4;
    case absl::Weekday::friday: return 5;
    case absl::Weekday::saturday: return 6;
  }
  return 0;
}

}  // namespace

Result<CronSchedule> CronSchedule::parse(std::string_view expression, std::string_view timezone) {
  if (expression.size() > kMaxExpressionBytes) {
    return InvalidArgument("cron expression is " + std::to_string(expression.size()) +
                           " bytes; the limit is " + std::to_string(kMaxExpressionBytes));
  }
  KVQ_RETURN_IF_ERROR(check_bytes(expression));
  std::vector<std::string_view> fields = split_blanks(expression);
  if (fields.empty()) return InvalidArgument("cron expression is empty");

  std::string trimmed(expression);
  trimmed.erase(0, trimmed.find_first_not_of(" \t"));
  trimmed.erase(trimmed.find_last_not_of(" \t") + 1);

  std::vector<std::string_view> shortcut_fields;
  if (fields[0].front() == '@') {
    if (fields.size() != 1) {
      return InvalidArgument("cron \"" + trimmed + "\": a shortcut such as " +
                             std::string(fields[0]) + " stands alone");
    }
    const std::string key = upper(fields[0]);
    for (const Shortcut& s : kShortcuts) {
      if (key == s.name) shortcut_fields = split_blanks(s.fields);
    }
    if (shortcut_fields.empty()) {
      return InvalidArgument("cron: unknown shortcut \"" + std::string(fields[0]) +
                             "\" (known: @yearly @annually @monthly @weekly @daily @midnight "
                             "@hourly)");
    }
    fields = shortcut_fields;
  }
  if (fields.size() != 5 && fields.size() != 6) {
    return InvalidArgument("cron \"" + trimmed + "\" has " + std::to_string(fields.size()) +
                           " fields; expected 5 (minute hour day-of-month month day-of-week) or "
                           "6 (second minute hour day-of-month month day-of-week)");
  }

  CronSchedule cron;
  cron.has_seconds_ = fields.size() == 6;
  size_t i = 0;
  if (cron.has_seconds_) {
    KVQ_RETURN_IF_ERROR(parse_field(kSecond, fields[i++], cron.seconds_));
  } else {
    cron.seconds_.set(0);
  }
  KVQ_RETURN_IF_ERROR(parse_field(kMinute, fields[i++], cron.minutes_));
  KVQ_RETURN_IF_ERROR(parse_field(kHour, fields[i++], cron.hours_));
  // crontab(5)'s rule, as Vixie cron and cronie apply it: a day field is restricted when it does
  // not start with "*" (or Quartz's "?"), so "*/2" leaves it unrestricted and it combines with
  // the other day field by AND. (POSIX would call "*/2" restricted; the crontabs users bring
  // were written for Vixie's reading.)
  cron.day_of_month_any_ = fields[i].front() == '*' || fields[i].front() == '?';
  KVQ_RETURN_IF_ERROR(parse_field(kDayOfMonth, fields[i++], cron.days_of_month_));
  KVQ_RETURN_IF_ERROR(parse_field(kMonth, fields[i++], cron.months_));
  cron.day_of_week_any_ = fields[i].front() == '*' || fields[i].front() == '?';
  std::bitset<8> days_of_week;  // 0..7 while parsing; parse_field folds 7 into 0
  KVQ_RETURN_IF_ERROR(parse_field(kDayOfWeek, fields[i++], days_of_week));
  cron.days_of_week_ = std::bitset<7>(days_of_week.to_ulong() & 0x7F);

  // With the day of week unrestricted, the day of month alone decides, and it may name only
  // days the months it is combined with never have (30 February). Every other expression
  // matches within kSearchYears. The longest waits: 29 February, 8 years (2096 to 2104); and a
  // day-of-month field starting with `*` (so ANDed with the day of week, and holding the 1st)
  // in one month on one weekday, such as `0 0 */7 2 MON`: the 1st of a month falls on a given
  // weekday at most 12 years apart (across 2100).
  if (!cron.day_of_month_any_ && cron.day_of_week_any_) {
    bool possible = false;
    const int first_day = next_set(cron.days_of_month_, 1);
    for (int month = 1; month <= 12 && !possible; ++month) {
      possible =
          cron.months_[static_cast<size_t>(month)] && first_day <= days_in_month(2000, month);
    }
    if (!possible) return InvalidArgument("cron \"" + trimmed + "\" never matches");
  }

  if (!plausible_zone_name(timezone) || !absl::LoadTimeZone(std::string(timezone), &cron.zone_)) {
    return InvalidArgument("unknown timezone \"" + std::string(timezone) + "\"");
  }
  return cron;
}

bool CronSchedule::day_matches(absl::CivilDay day) const {
  const bool dom = days_of_month_[static_cast<size_t>(day.day())];
  const bool dow = days_of_week_[static_cast<size_t>(cron_weekday(day))];
  if (!day_of_month_any_ && !day_of_week_any_) return dom || dow;
  return dom && dow;  // the unrestricted one has every bit set
}

std::optional<absl::CivilSecond> CronSchedule::next_wall_time(absl::CivilSecond from,
                                                              absl::CivilSecond limit) const {
  absl::CivilSecond c = from;
  // Each pass either returns or moves c to the start of a later month, day, hour or minute,
  // so the loop ends at `limit` after at most a few hundred passes per year searched.
  while (c <= limit) {
    const int month = next_set(months_, c.month());
    if (month < 0) {
      c = absl::CivilSecond(c.year() + 1, 1, 1, 0, 0, 0);
      continue;
    }
    if (month != c.month()) {
      c = absl::CivilSecond(c.year(), month, 1, 0, 0, 0);
      continue;
    }
    int day = c.day();
    const int last_day = days_in_month(c.year(), c.month());
    while (day <= last_day && !day_matches(absl::CivilDay(c.year(), c.month(), day))) ++day;
    if (day > last_day) {
      c = absl::CivilSecond(c.year(), c.month() + 1, 1, 0, 0, 0);
      continue;
    }
    if (day != c.day()) {
      c = absl::CivilSecond(c.year(), c.month(), day, 0, 0, 0);
      continue;
    }
    const int hour = next_set(hours_, c.hour());
    if (hour != c.hour()) {
      c = hour < 0 ? absl::CivilSecond(absl::CivilDay(c) + 1)
                   : absl::CivilSecond(c.year(), c.month(), c.day(), hour, 0, 0);
      continue;
    }
    const int minute = next_set(minutes_, c.minute());
    if (minute != c.minute()) {
      c = minute < 0 ? absl::CivilSecond(absl::CivilHour(c) + 1)
                     : absl::CivilSecond(c.year(), c.month(), c.day(), c.hour(), minute, 0);
      continue;
    }
    const int second = next_set(seconds_, c.second());
    if (second != c.second()) {
      c = second < 0
              ? absl::CivilSecond(absl::CivilMinute(c) + 1)
              : absl::CivilSecond(c.year(), c.month(), c.day(), c.hour(), c.minute(), second);
      continue;
    }
    return c;
  }
  return std::nullopt;
}

std::optional<int64_t> CronSchedule::next_after(int64_t after_ms) const {
  // Occurrences fall on whole seconds: the first candidate is the second after the one
  // holding `after_ms`.
  const int64_t after_s = after_ms / 1000 - (after_ms % 1000 < 0 ? 1 : 0);
  const absl::Time after = absl::FromUnixMillis(after_ms);
  const absl::CivilSecond start = zone_.At(absl::FromUnixSeconds(after_s)).cs + 1;
  const absl::CivilSecond limit(start.year() + kSearchYears, start.month(), start.day(),
                                start.hour(), start.minute(), start.second());
  absl::CivilSecond from = start;
  // A wall time's instant never decreases as the wall time grows (a skipped one maps to the
  // end of its gap, a repeated one to its first pass), so the first matching wall time whose
  // instant is after `after` is the answer. Only in the second pass of a repeated hour can a
  // matching wall time's instant lie before `after`: it ran in the first pass.
  while (true) {
    std::optional<absl::CivilSecond> wall = next_wall_time(from, limit);
    if (!wall) return std::nullopt;
    const absl::TimeZone::TimeInfo info = zone_.At(*wall);
    absl::Time at = info.pre;
    if (info.kind == absl::TimeZone::TimeInfo::SKIPPED) at = info.trans;
    if (at > after) {
      if (at > absl::FromUnixMillis(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return absl::ToUnixMillis(at);
    }
    if (info.kind == absl::TimeZone::TimeInfo::REPEATED) {
      // Go on from the end of the repeated range: the wall time after the first pass's last.
      from = zone_.At(info.trans - absl::Seconds(1)).cs + 1;
      if (from <= *wall) from = *wall + 1;
    } else {
      from = *wall + 1;
    }
  }
}

}  // namespace kvq::jobs
