// cli/output.h — what the client commands print: times, tables, key-value lines, jobs and their
// events, sizes. Pure functions (tested in cli_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvq::cli {

// "2025-11-29T16:00:00.000Z" for milliseconds since the epoch (UTC).
std::string format_time_ms(int64_t ms);

// A JSON value as one compact line; strings without quotes when `bare_strings`.
std::string compact(const nlohmann::json& value, bool bare_strings = false);

// Cuts `text` to at most `width` characters, ending in "..." when cut.
std::string truncate(std::string text, size_t width);

// Aligned "key: value" lines ("state:     pending").
std::string format_key_values(const std::vector<std::pair<std::string, std::string>>& rows);

// A table: a header row and left-aligned columns separated by two spaces; no trailing spaces.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// A job object (GET /v1/jobs/{type}/{id}) as key: value lines: its fields (times also as ISO
// times), then its data, result and progress, then its errors, one line each, oldest first
// ("  #2  2026-12-01T17:00:00.000Z  w1  ValueError: bad input").
std::string format_job(const nlohmann::json& job);

// One error of a job's "errors" ({"attempt", "at", "worker", "kind", "message", "details"}) as
// "#ATTEMPT  TIME  WORKER  KIND: MESSAGE" (the worker and kind left out when empty).
std::string format_job_error(const nlohmann::json& error);

// The answer of a fail ({"dead", "retry_at", "attempt"}): "attempt 2 failed; retries at TIME" or
// "attempt 3 failed; the job is dead".
std::string format_fail_answer(const nlohmann::json& answer);

// One line for a job event: "running  seq=42  attempts=1  data={...}",
// "finished (succeeded)  seq=43  attempts=1  data={...}  result={...}", or "removed".
std::string format_job_event(const nlohmann::json& event);

// obj[key] as a T, or `fallback` when obj is not an object, has no such key or another type.
template <typename T>
T value_of(const nlohmann::json& obj, const char* key, T fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

// Seconds as "30s", "1.5s".
std::string format_seconds(double seconds);

// A size as "512 B", "20.0 KiB", "1.5 GiB".
std::string format_bytes(uint64_t bytes);

// Table cells: a millisecond timestamp as an ISO time ("" for null, else the raw value);
// seconds as "30s" (else the raw value); object[key] without quotes ("" when absent or null).
std::string time_cell(const nlohmann::json& value);
std::string seconds_cell(const nlohmann::json& value);
std::string cell(const nlohmann::json& object, const char* key);

}  // namespace kvq::cli
