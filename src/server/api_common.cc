#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "server/api.h"
#include "server/job_payload.h"
#include "server/json_body.h"

namespace kvq::server {

uint64_t Api::hold(std::function<void()> end) {
  util::MutexLock lock(waiting_mu);
  const uint64_t id = next_waiting++;
  waiting.emplace(id, std::move(end));
  return id;
}

void Api::release(uint64_t id) {
  util::MutexLock lock(waiting_mu);
  waiting.erase(id);
}

void Api::end_all_waiting() {
  std::map<uint64_t, std::function<void()>> all;
  {
    util::MutexLock lock(waiting_mu);
    all.swap(waiting);
  }
  for (auto& [id, end] : all) end();
}

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void add_api_routes(Router& router, Api& api) {
  add_meta_routes(router, api);
  add_type_routes(router, api);
  add_job_routes(router, api);
  add_worker_routes(router, api);
  add_schedule_routes(router, api);
  add_batch_routes(router, api);
  add_dashboard_routes(router, api);
}

void reply_json(Exchange& ex, unsigned status, const nlohmann::json& body) {
  ex.reply({status, dump(body)});
}

void reply_error(Exchange& ex, const ApiError& error) {
  ex.reply({error.status, error_body(error)});
}

void reply_status(Exchange& ex, const Status& status) { reply_error(ex, from_status(status)); }

nlohmann::json embed(const std::string& json_text) {
  auto parsed = nlohmann::json::parse(json_text, nullptr, false);
  return parsed.is_discarded() ? nlohmann::json::object() : parsed;
}

namespace {

// JSON text the library keeps (a result, progress, an error's details), or null for none.
nlohmann::json embed_or_null(const std::optional<std::string>& json_text) {
  if (!json_text || json_text->empty()) return nullptr;
  auto parsed = nlohmann::json::parse(*json_text, nullptr, false);
  return parsed.is_discarded() ? nlohmann::json(nullptr) : parsed;
}

// A wall-clock time the library gives as 0 for "never", as null then.
nlohmann::json time_or_null(int64_t ms) {
  return ms ? nlohmann::json(ms) : nlohmann::json(nullptr);
}

nlohmann::json outcome_json(jobs::Outcome outcome) {
  if (outcome == jobs::Outcome::kNone) return nullptr;
  return std::string(jobs::outcome_name(outcome));
}

nlohmann::json errors_json(const std::vector<jobs::JobError>& errors) {
  auto list = nlohmann::json::array();
  for (const auto& e : errors) {
    list.push_back({{"attempt", e.attempt},
                    {"at", e.at_ms},
                    {"worker", e.worker},
                    {"kind", e.kind},
                    {"message", e.message},
                    {"details", embed_or_null(e.details)}});
  }
  return list;
}

}  // namespace

nlohmann::json job_json(const jobs::JobInfo& info) {
  nlohmann::json own_timeout = nullptr;
  if (info.timeout) own_timeout = static_cast<double>(info.timeout->count()) / 1000.0;
  nlohmann::json out = {
      {"type", info.type},
      {"id", info.id},
      {"state", jobs::state_name(info.state)},
      {"scheduled_time", info.scheduled_time_ms},
      {"priority", info.priority},
      {"resubmitted", info.resubmitted},
      {"worker", info.worker},
      {"worker_type", info.worker_type},
      {"attempts", info.attempts},
      {"lost_runs", info.lost_runs},
      {"outcome", outcome_json(info.outcome)},
      {"result", embed_or_null(info.result)},
      {"progress", embed_or_null(info.progress)},
      {"errors", errors_json(info.errors)},
      {"gave_up", info.gave_up},  // deprecated: "outcome" is "dead"
      {"created_at", info.created_at_ms},
      {"updated_at", info.updated_at_ms},
      {"started_at", time_or_null(info.started_at_ms)},
      {"ended_at", time_or_null(info.ended_at_ms)},
      {"group", info.group.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.group)},
      {"timeout", own_timeout}};
  if (!info.traceparent.empty()) out["traceparent"] = info.traceparent;
  if (info.dependencies > 0) {
    out["dependencies"] = info.dependencies;
    out["waiting_on"] = info.waiting_on;
    out["on_dependency_failure"] = jobs::on_dependency_failure_name(info.on_dependency_failure);
  }
  if (info.has_dependents) out["has_dependents"] = true;
  if (!info.batch.empty()) out["batch"] = info.batch;
  if (info.debounce_since_ms != 0) out["debounce_since"] = info.debounce_since_ms;
  if (info.unique_until_ms != 0) out["unique_until"] = info.unique_until_ms;
  put_data_fields(out, info.data, info.data_format);
  return out;
}

nlohmann::json event_json(const jobs::JobEvent& e) {
  if (!e.found) return {{"type", e.type}, {"id", e.id}, {"found", false}};
  nlohmann::json out = {{"type", e.type},
                        {"id", e.id},
                        {"found", true},
                        {"state", jobs::state_name(e.state)},
                        {"outcome", outcome_json(e.outcome)},
                        {"result", embed_or_null(e.result)},
                        {"attempts", e.attempts},
                        {"seq", e.seq},
                        {"gave_up", e.gave_up}};
  if (!e.traceparent.empty()) out["traceparent"] = e.traceparent;
  put_data_fields(out, e.data, e.data_format);
  return out;
}

nlohmann::json accepted_job_json(const jobs::Job& job) {
  nlohmann::json out = {
      {"type", job.type}, {"id", job.id}, {"lock", job.lock}, {"attempt", job.attempt}};
  if (!job.traceparent.empty()) out["traceparent"] = job.traceparent;
  put_data_fields(out, job.data, job.data_format);
  return out;
}

Field<double> query_number(const Request& r, const std::string& name) {
  auto it = r.query.find(name);
  if (it == r.query.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  const double bound = static_cast<double>(kMaxJsonInteger);
  // Beyond the bound a caller's cast to an integer could wrap (INT64_MAX reads as 2^63).
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v) || v < -bound || v > bound) {
    return invalid_argument("query parameter '" + name + "' must be a number in " +
                            std::to_string(-kMaxJsonInteger) + ".." +
                            std::to_string(kMaxJsonInteger));
  }
  return v;
}

Field<int64_t> query_integer(const Request& r, const std::string& name, int64_t min, int64_t max) {
  auto it = r.query.find(name);
  if (it == r.query.end() || it->second.empty()) return std::nullopt;
  const std::string& text = it->second;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  const bool digits = text.find_first_not_of("-0123456789") == std::string::npos;
  if (!digits || end == text.c_str() || *end != '\0' || errno == ERANGE || v < min || v > max) {
    return invalid_argument("query parameter '" + name + "' must be an integer in " +
                            std::to_string(min) + ".." + std::to_string(max));
  }
  return static_cast<int64_t>(v);
}

Field<bool> query_boolean(const Request& r, const std::string& name) {
  auto it = r.query.find(name);
  if (it == r.query.end() || it->second.empty()) return std::nullopt;
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  return invalid_argument("query parameter '" + name + "' must be true or false");
}

nlohmann::json type_json(const std::string& type, const jobs::TypeSettings& settings) {
  auto seconds = [](jobs::Millis ms) { return static_cast<double>(ms.count()) / 1000.0; };
  nlohmann::json retention = nullptr;
  if (settings.finished_retention) retention = seconds(*settings.finished_retention);
  nlohmann::json max_lost_runs = nullptr;
  if (settings.max_lost_runs) max_lost_runs = *settings.max_lost_runs;
  nlohmann::json paused_until = nullptr;
  if (settings.paused && settings.paused_until_ms) paused_until = *settings.paused_until_ms;
  nlohmann::json max_running = nullptr;
  if (settings.max_running) max_running = *settings.max_running;
  nlohmann::json max_running_per_group = nullptr;
  if (settings.max_running_per_group) max_running_per_group = *settings.max_running_per_group;
  nlohmann::json rate = nullptr;
  if (settings.rate)
    rate = {{"limit", settings.rate->limit}, {"period_ms", settings.rate->period.count()}};
  return {{"type", type},
          {"timeout", seconds(settings.timeout)},
          {"finished_retention", retention},
          {"max_lost_runs", max_lost_runs},
          {"max_attempts", settings.retry.max_attempts},
          {"backoff",
           {{"base", seconds(settings.retry.backoff_base)},
            {"factor", settings.retry.backoff_factor},
            {"cap", seconds(settings.retry.backoff_cap)},
            {"jitter", settings.retry.jitter}}},
          {"paused", settings.paused},
          {"paused_until", paused_until},
          {"max_running", max_running},
          {"rate", rate},
          {"max_running_per_group", max_running_per_group},
          {"has_groups", settings.has_groups}};
}

Field<jobs::Millis> seconds_field(const Field<double>& value, double max_seconds,
                                  const std::string& name) {
  if (!value.ok()) return *value.error();
  if (!value.value()) return std::nullopt;
  const double seconds = *value.value();
  if (!(seconds >= 0) || seconds > max_seconds) {
    return invalid_argument("'" + name + "' must be between 0 and " +
                            std::to_string(static_cast<int>(max_seconds)) + " seconds");
  }
  return jobs::Millis(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

}  // namespace kvq::server
