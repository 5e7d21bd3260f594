// cli/output.cc — see output.h.
#include "output.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <set>

namespace kvq::cli {

std::string format_time_ms(int64_t ms) {
  const int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  const int millis = static_cast<int>(ms - secs * 1000);
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(ms);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::string compact(const nlohmann::json& value, bool bare_strings) {
  if (bare_strings && value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string truncate(std::string text, size_t width) {
  if (text.size() <= width) return text;
  if (width <= 3) return text.substr(0, width);
  text.resize(width - 3);
  return text + "...";
}

std::string format_key_values(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t width = 0;
  for (const auto& [key, value] : rows) width = std::max(width, key.size() + 1);
  std::string out;
  for (const auto& [key, value] : rows) {
    std::string k = key + ":";
    k.resize(width, ' ');
    if (value.empty()) {
      out += key + ":";
    } else {
      out += k + " " + value;
    }
    out += '\n';
  }
  return out;
}

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (size_t i = 0; i < widths.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      if (i + 1 < widths.size()) {
        cell.resize(widths[i], ' ');
        cell += "  ";
      }
      out += cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string format_seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", seconds);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string format_job(const nlohmann::json& job) {
  static const std::vector<std::string> kOrder = {
      "type",           "id",       "state",  "outcome",     "group",      "priority",
      "scheduled_time", "attempts", "worker", "resubmitted", "created_at", "updated_at",
      "started_at",     "ended_at", "lock",   "seq",         "found"};
  // Shown after the other fields, in this order: what the job is, and what its runs made of it.
  static const std::vector<std::string> kLast = {"data", "result", "progress", "errors"};
  static const std::set<std::string> kTimes = {"scheduled_time", "created_at", "updated_at",
                                               "started_at",     "ended_at",   "debounce_since",
                                               "unique_until"};
  std::vector<std::pair<std::string, std::string>> rows;
  auto render = [&](const std::string& key, const nlohmann::json& value) {
    const bool json_valued = key == "data" || key == "result" || key == "progress";
    std::string text = compact(value, /*bare_strings=*/!json_valued);
    if (kTimes.count(key) != 0 && value.is_number_integer()) {
      text += " (" + format_time_ms(value.get<int64_t>()) + ")";
    }
    rows.emplace_back(key, text);
  };
  if (!job.is_object()) return compact(job) + "\n";
  auto last = [&](const std::string& key) {
    return std::find(kLast.begin(), kLast.end(), key) != kLast.end();
  };
  for (const auto& key : kOrder) {
    if (auto it = job.find(key); it != job.end()) render(key, *it);
  }
  for (const auto& [key, value] : job.items()) {
    if (!last(key) && std::find(kOrder.begin(), kOrder.end(), key) == kOrder.end()) {
      render(key, value);
    }
  }
  for (const auto& key : kLast) {
    auto it = job.find(key);
    if (it == job.end() || key == "errors") continue;
    render(key, *it);
  }
  const auto errors = job.find("errors");
  const bool has_errors = errors != job.end() && errors->is_array();
  if (has_errors) rows.emplace_back("errors", errors->empty() ? "none" : "");
  std::string out = format_key_values(rows);
  if (has_errors) {
    for (const auto& error : *errors) out += "  " + format_job_error(error) + "\n";
  }
  return out;
}

std::string format_job_error(const nlohmann::json& error) {
  if (!error.is_object()) return compact(error);
  std::string line = "#" + cell(error, "attempt");
  if (const std::string at = time_cell(value_of(error, "at", nlohmann::json())); !at.empty()) {
    line += "  " + at;
  }
  if (const std::string worker = cell(error, "worker"); !worker.empty()) line += "  " + worker;
  line += "  ";
  if (const std::string kind = cell(error, "kind"); !kind.empty()) line += kind + ": ";
  line += cell(error, "message");
  return line;
}

std::string format_fail_answer(const nlohmann::json& answer) {
  std::string out = "attempt " + cell(answer, "attempt") + " failed; ";
  if (value_of(answer, "dead", false)) return out + "the job is dead";
  const std::string at = time_cell(value_of(answer, "retry_at", nlohmann::json()));
  return out + (at.empty() ? "it runs again" : "retries at " + at);
}

std::string format_job_event(const nlohmann::json& event) {
  if (!event.is_object()) return compact(event);
  if (!value_of(event, "found", true)) return "removed";
  std::string line = value_of(event, "state", std::string("?"));
  if (const std::string outcome = cell(event, "outcome"); !outcome.empty()) {
    line += " (" + outcome + ")";
  }
  if (auto it = event.find("seq"); it != event.end()) line += "  seq=" + compact(*it);
  if (auto it = event.find("attempts"); it != event.end()) line += "  attempts=" + compact(*it);
  if (auto it = event.find("data"); it != event.end()) line += "  data=" + compact(*it);
  if (auto it = event.find("result"); it != event.end() && !it->is_null()) {
    line += "  result=" + compact(*it);
  }
  return line;
}

std::string time_cell(const nlohmann::json& value) {
  if (value.is_number_integer()) return format_time_ms(value.get<int64_t>());
  if (value.is_null()) return "";
  return compact(value, true);
}

std::string seconds_cell(const nlohmann::json& value) {
  return value.is_number() ? format_seconds(value.get<double>()) : compact(value);
}

std::string cell(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return compact(*it, /*bare_strings=*/true);
}

}  // namespace kvq::cli
