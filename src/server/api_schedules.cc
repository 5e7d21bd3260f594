// The schedule routes: cron schedules (Jobs::put_schedule and the rest) over HTTP.
#include <chrono>

#include "server/api.h"
#include "server/json_body.h"

namespace kvq::server {
namespace {

using Ex = std::shared_ptr<Exchange>;

// How many upcoming times GET /v1/schedules/{name} previews.
constexpr size_t kNextRunsShown = 5;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A time the library gives as 0 for "never", as null then.
nlohmann::json time_or_null(int64_t ms) {
  return ms ? nlohmann::json(ms) : nlohmann::json(nullptr);
}

nlohmann::json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

nlohmann::json schedule_json(const jobs::ScheduleInfo& s) {
  return {{"name", s.name},
          {"type", s.spec.type},
          {"cron", s.spec.cron},
          {"timezone", s.spec.timezone},
          {"data", embed(s.spec.data)},
          {"priority", s.spec.priority},
          {"catch_up", std::string(jobs::catch_up_name(s.spec.catch_up))},
          // null once the cron names no later time, and while paused (nothing will be enqueued)
          {"next_run", time_or_null(s.paused ? 0 : s.next_run_ms)},
          {"paused", s.paused},
          {"last_run", time_or_null(s.last_run_ms)},
          {"last_job_id", text_or_null(s.last_job_id)},
          {"enqueued", s.enqueued},
          {"skipped", s.skipped},
          {"last_error", text_or_null(s.last_error)},
          {"created_at", s.created_at_ms},
          {"updated_at", s.updated_at_ms}};
}

// The schedule with "next_runs": the next kNextRunsShown times after now that its cron names
// (a preview: which of them are enqueued is the scheduler's, after downtime its catch_up's).
nlohmann::json schedule_with_next_runs(const jobs::ScheduleInfo& s) {
  nlohmann::json out = schedule_json(s);
  auto next = jobs::Jobs::next_runs(s.spec, now_ms(), kNextRunsShown);
  out["next_runs"] = next.ok() ? nlohmann::json(*next) : nlohmann::json::array();
  return out;
}

// PUT's body: {"type", "cron", "timezone"?, "data"?, "priority"?, "catch_up"?}. Only the form
// is checked here; what the fields mean (a valid cron, a known zone, a type that exists) is the
// library's to say.
std::variant<jobs::ScheduleSpec, ApiError> read_spec(const std::string& text) {
  auto parsed = JsonBody::parse(text, {"type", "cron", "timezone", "data", "priority", "catch_up"});
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const auto& body = std::get<JsonBody>(parsed);
  auto type = body.string("type");
  auto cron = body.string("cron");
  auto timezone = body.string("timezone");
  auto data = body.object_text("data");
  auto priority = body.integer("priority");
  auto catch_up = body.string("catch_up");
  if (auto e = first_error(type, cron, timezone, data, priority, catch_up)) return *e;
  if (!type.value() || type.value()->empty()) return invalid_argument("field 'type' is required");
  if (!cron.value() || cron.value()->empty()) return invalid_argument("field 'cron' is required");
  jobs::ScheduleSpec spec;
  spec.type = *type.value();
  spec.cron = *cron.value();
  if (timezone.value()) spec.timezone = *timezone.value();
  if (data.value()) spec.data = *data.value();
  if (priority.value()) spec.priority = *priority.value();
  if (catch_up.value()) {
    auto mode = jobs::parse_catch_up(*catch_up.value());
    if (!mode.ok())
      return invalid_argument("field 'catch_up' must be \"none\", \"one\" or \"all\", not '" +
                              *catch_up.value() + "'");
    spec.catch_up = *mode;
  }
  return spec;
}

}  // namespace

void add_schedule_routes(Router& router, Api& api) {
  router.add("GET", "/v1/schedules", [&api](Request&, Ex ex) {
    auto all = api.jobs.schedules();
    if (!all.ok()) return reply_status(*ex, all.status());
    auto out = nlohmann::json::array();
    for (const auto& s : *all) out.push_back(schedule_json(s));
    reply_json(*ex, 200, {{"schedules", out}});
  });
  router.add("GET", "/v1/schedules/{name}", [&api](Request& r, Ex ex) {
    auto s = api.jobs.get_schedule(r.params["name"]);
    if (!s.ok()) return reply_status(*ex, s.status());
    reply_json(*ex, 200, schedule_with_next_runs(*s));
  });
  router.add("PUT", "/v1/schedules/{name}", [&api](Request& r, Ex ex) {
    auto spec = read_spec(r.body);
    if (auto* e = std::get_if<ApiError>(&spec)) return reply_error(*ex, *e);
    auto s = api.jobs.put_schedule(r.params["name"], std::get<jobs::ScheduleSpec>(spec));
    if (!s.ok()) return reply_status(*ex, s.status());
    reply_json(*ex, 200, schedule_with_next_runs(*s));
  });
  // Pause and resume take no fields (an empty body or {}), as a type's resume does.
  for (const bool pause : {true, false}) {
    router.add("POST", pause ? "/v1/schedules/{name}/pause" : "/v1/schedules/{name}/resume",
               [&api, pause](Request& r, Ex ex) {
                 auto parsed = JsonBody::parse(r.body, {});
                 if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
                 const std::string& name = r.params["name"];
                 auto s = pause ? api.jobs.pause_schedule(name) : api.jobs.resume_schedule(name);
                 if (!s.ok()) return reply_status(*ex, s.status());
                 reply_json(*ex, 200, schedule_with_next_runs(*s));
               });
  }
  router.add("DELETE", "/v1/schedules/{name}", [&api](Request& r, Ex ex) {
    Status s = api.jobs.remove_schedule(r.params["name"]);
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, nlohmann::json::object());
  });
}

}  // namespace kvq::server
