#include "server/add_windows_fields.h"

#include <cmath>

namespace kvq::server {
namespace {

constexpr double kMaxSeconds = static_cast<double>(jobs::kMaxAddWindow.count()) / 1000.0;

// `value` (seconds) as milliseconds, rounded up (less a hair, so that 0.3 s is 300 ms, not the
// 301 its binary double would give), if it is a number from `min_ms` to jobs::kMaxAddWindow;
// nullopt otherwise.
std::optional<jobs::Millis> window_ms(const nlohmann::json& value, double min_ms) {
  if (!value.is_number()) return std::nullopt;
  const double ms = std::ceil(value.get<double>() * 1000 - 1e-6);
  if (!(ms >= min_ms) || ms > static_cast<double>(jobs::kMaxAddWindow.count())) return std::nullopt;
  return jobs::Millis(static_cast<int64_t>(ms));
}

}  // namespace

Field<jobs::Debounce> debounce_field(const JsonBody& body) {
  const auto& json = body.json();
  auto it = json.find("debounce");
  if (it == json.end() || it->is_null()) return std::nullopt;
  const std::string shape =
      "field 'debounce' must be an object {\"delay\": SECONDS, \"max_delay\"?: SECONDS}";
  if (!it->is_object()) return invalid_argument(shape);
  for (const auto& [key, value] : it->items()) {
    if (key != "delay" && key != "max_delay")
      return invalid_argument(shape + "; it has '" + key + "'");
  }
  if (!it->contains("delay")) return invalid_argument(shape + "; 'delay' is required");
  const std::string most =
      "at most " + std::to_string(static_cast<int64_t>(kMaxSeconds)) + " seconds (365 days)";
  auto delay = window_ms((*it)["delay"], 0);
  if (!delay)
    return invalid_argument("field 'debounce.delay' must be a number of seconds, 0 or more and " +
                            most);
  jobs::Debounce debounce{.delay = *delay};
  if (it->contains("max_delay") && !(*it)["max_delay"].is_null()) {
    auto max_delay = window_ms((*it)["max_delay"], 0);
    if (!max_delay || *max_delay < *delay)
      return invalid_argument(
          "field 'debounce.max_delay' must be a number of seconds, at least 'delay' and " + most);
    debounce.max_delay = *max_delay;
  }
  return debounce;
}

Field<jobs::Millis> unique_for_field(const JsonBody& body) {
  const auto& json = body.json();
  auto it = json.find("unique_for");
  if (it == json.end() || it->is_null()) return std::nullopt;
  auto window = window_ms(*it, 1);
  if (!window)
    return invalid_argument(
        "field 'unique_for' must be a number of seconds, more than 0 and at "
        "most " +
        std::to_string(static_cast<int64_t>(kMaxSeconds)) + " seconds (365 days)");
  return *window;
}

nlohmann::json add_reply(const std::string& id, const jobs::AddResult& result, bool debounce) {
  nlohmann::json out = {{"id", id}, {"added", result.added}};
  if (result.unique_until_ms != 0) {
    out["kept"] = !result.added;
    out["unique_until"] = result.unique_until_ms;
  }
  if (debounce && result.added) {
    out["debounced"] = result.debounced;
    out["scheduled_time"] = result.scheduled_time_ms;
  }
  return out;
}

}  // namespace kvq::server
