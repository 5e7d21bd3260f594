// The job routes: producers, workers' job calls, and watching jobs.
#include <algorithm>
#include <cmath>

#include "server/add_windows_fields.h"
#include "server/api.h"
#include "server/api_accept.h"
#include "server/job_payload.h"
#include "server/json_body.h"
#include "server/long_poll.h"
#include "util/trace_context.h"

namespace kvq::server {
namespace {

using Ex = std::shared_ptr<Exchange>;
constexpr double kMaxWaitSeconds = 300;
constexpr size_t kMaxBatchAdd = jobs::kMaxAddMany;
constexpr int64_t kMaxListLimit = 10000;
// The longest retry_in or snooze delay a worker may ask for: a year, as a type's timeout.
constexpr double kMaxDelaySeconds = 365.0 * 24 * 3600;

// A name the library parses (if_exists, outcome, state filter), its error naming the field.
template <typename T>
Field<T> parsed_name(const Field<std::string>& text, Result<T> (*parse)(std::string_view),
                     const std::string& what) {
  if (!text.ok()) return *text.error();
  if (!text.value()) return std::nullopt;
  auto parsed = parse(*text.value());
  if (!parsed.ok()) return invalid_argument(what + ": " + parsed.status().message());
  return *parsed;
}

// An add's "group": absent or null (none), or a string the jobs layer checks (AddOptions::group).
// Over HTTP "" is refused here: none is said with null, and "" would read as a group.
Field<std::string> group_field(const JsonBody& body) {
  auto group = body.string("group");
  if (group.ok() && group.value() && group.value()->empty())
    return invalid_argument("field 'group' must not be empty (null for none)");
  return group;
}

// An add's "timeout": the job's own activity timeout in seconds, more than 0 and at most
// jobs::kMaxJobTimeout (a week); absent or null: its type's.
Field<jobs::Millis> job_timeout_field(const JsonBody& body) {
  auto seconds = body.number("timeout");
  if (!seconds.ok()) return *seconds.error();
  if (!seconds.value()) return std::nullopt;
  const double max_seconds = static_cast<double>(jobs::kMaxJobTimeout.count()) / 1000.0;
  const double ms = std::ceil(*seconds.value() * 1000);
  if (!(ms >= 1) || ms > static_cast<double>(jobs::kMaxJobTimeout.count()))
    return invalid_argument(
        "field 'timeout' (the job's own activity timeout) must be more than 0 "
        "and at most " +
        std::to_string(static_cast<int64_t>(max_seconds)) + " seconds (7 days)");
  return jobs::Millis(static_cast<int64_t>(ms));
}

// An add's "traceparent": the job's W3C trace context; absent or null: the request's header's
// (`traceparent`, already checked: "" when it had none or an invalid one). A field that is not
// a valid traceparent is refused, where an invalid header is ignored (W3C Trace Context).
Field<std::string> traceparent_field(const JsonBody& body, const std::string& from_header) {
  auto field = body.string("traceparent");
  if (!field.ok()) return field;
  if (!field.value()) return from_header;
  if (!util::is_valid_traceparent(*field.value()))
    return invalid_argument(
        "field 'traceparent' must be a W3C traceparent: 00-<trace-id: 32 lowercase hex digits, "
        "not all 0>-<parent-id: 16 lowercase hex digits, not all 0>-<flags: 2 lowercase hex "
        "digits> (version ff is invalid)");
  return field;
}

// An add's "depends_on": absent or null (none), or an array of at most
// jobs::kMaxDependencies objects {"type": T, "id": I}; the jobs layer checks the names.
Field<std::vector<jobs::DependencyRef>> depends_on_field(const JsonBody& body) {
  const auto& json = body.json();
  auto it = json.find("depends_on");
  if (it == json.end() || it->is_null()) return std::nullopt;
  const std::string shape = "field 'depends_on' must be an array of at most " +
                            std::to_string(jobs::kMaxDependencies) +
                            " objects {\"type\": T, \"id\": I}";
  if (!it->is_array()) return invalid_argument(shape);
  if (it->size() > jobs::kMaxDependencies)
    return invalid_argument(shape + "; it has " + std::to_string(it->size()));
  std::vector<jobs::DependencyRef> deps;
  for (const auto& item : *it) {
    if (!item.is_object() || item.size() != 2 || !item.contains("type") || !item.contains("id") ||
        !item["type"].is_string() || !item["id"].is_string()) {
      return invalid_argument(shape);
    }
    deps.push_back({item["type"].get<std::string>(), item["id"].get<std::string>()});
  }
  return deps;
}

// The fields of one job to add: the single add's body, and each entry of a batch.
const std::initializer_list<std::string_view> kNewJobFields = {
    "id",        "data",     "body",      "body_base64", "scheduled_time", "priority",
    "if_exists", "group",    "timeout",   "traceparent", "depends_on",     "on_dependency_failure",
    "batch",     "debounce", "unique_for"};

// The body of one job to add, checked; `if_exists` applies unless the body names its own, and
// the request's traceparent header unless the body gives one.
std::variant<jobs::NewJob, ApiError> read_new_job(const JsonBody& body, jobs::IfExists if_exists,
                                                  const std::string& header_traceparent) {
  auto id = body.string("id");
  auto payload = read_payload(body);
  auto at = body.integer("scheduled_time");
  auto priority = body.integer("priority");
  auto own_if_exists =
      parsed_name(body.string("if_exists"), &jobs::parse_if_exists, "field 'if_exists'");
  auto group = group_field(body);
  auto timeout = job_timeout_field(body);
  auto traceparent = traceparent_field(body, header_traceparent);
  auto depends_on = depends_on_field(body);
  auto on_failure =
      parsed_name(body.string("on_dependency_failure"), &jobs::parse_on_dependency_failure,
                  "field 'on_dependency_failure'");
  auto batch = body.string("batch");
  auto debounce = debounce_field(body);
  auto unique_for = unique_for_field(body);
  if (auto error = first_error(id, payload, at, priority, own_if_exists, group, timeout,
                               traceparent, depends_on, on_failure, batch, debounce, unique_for))
    return *error;
  if (batch.value() && batch.value()->empty())
    return invalid_argument("field 'batch' must not be empty (null for none)");
  if (!id.value()) return invalid_argument("field 'id' is required");
  const Payload data = payload.value().value_or(Payload{"{}", jobs::DataFormat::kJson});
  jobs::NewJob job{
      *id.value(),
      data.data,
      {.scheduled_time_ms = at.value(),
       .priority = priority.value().value_or(0),
       .if_exists = own_if_exists.value().value_or(if_exists),
       .timeout = timeout.value(),
       .data_format = data.format,
       .group = group.value().value_or(""),
       .traceparent = traceparent.value().value_or(""),
       .depends_on = depends_on.value().value_or(std::vector<jobs::DependencyRef>{}),
       .on_dependency_failure = on_failure.value().value_or(jobs::OnDependencyFailure::kCancel),
       .batch = batch.value().value_or(""),
       .debounce = debounce.value(),
       .unique_for = unique_for.value()}};
  return job;
}

// The batch route's list of jobs, each checked as the single add's body is.
std::variant<std::vector<jobs::NewJob>, ApiError> read_batch(const JsonBody& body,
                                                             const std::string& traceparent) {
  auto if_exists =
      parsed_name(body.string("if_exists"), &jobs::parse_if_exists, "field 'if_exists'");
  if (!if_exists.ok()) return *if_exists.error();
  const auto& list = body.json().value("jobs", nlohmann::json());
  if (!list.is_array() || list.empty() || list.size() > kMaxBatchAdd) {
    return invalid_argument("'jobs' must be an array of 1 to 1000 jobs");
  }
  std::vector<jobs::NewJob> batch;
  for (const auto& item : list) {
    if (!item.is_object()) return invalid_argument("each entry of 'jobs' must be an object");
    for (const auto& [key, value] : item.items()) {
      if (std::find(kNewJobFields.begin(), kNewJobFields.end(), key) == kNewJobFields.end())
        return unknown_field("a job does not take a field '" + key + "'");
    }
    auto job = read_new_job(JsonBody(item), if_exists.value().value_or(jobs::IfExists::kUpdate),
                            traceparent);
    if (auto* e = std::get_if<ApiError>(&job)) return *e;
    batch.push_back(std::move(std::get<jobs::NewJob>(job)));
  }
  return batch;
}

template <typename Parsed>
const JsonBody* body_or_reply(Parsed& parsed, Exchange& ex) {
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    reply_error(ex, *e);
    return nullptr;
  }
  return &std::get<JsonBody>(parsed);
}

void add_producer_routes(Router& router, Api& api) {
  router.add(
      "POST", "/v1/jobs/{type}/batch",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, {"jobs", "if_exists"});
        const JsonBody* body = body_or_reply(parsed, *ex);
        if (!body) return;
        auto batch = read_batch(*body, r.traceparent);
        if (auto* e = std::get_if<ApiError>(&batch)) return reply_error(*ex, *e);
        api.jobs.add_many_async(r.params["type"], std::move(std::get<0>(batch)),
                                [ex](Result<jobs::AddManyResult> s) {
                                  if (!s.ok()) return reply_status(*ex, s.status());
                                  reply_json(*ex, 200, {{"added", s->added}, {"kept", s->kept}});
                                });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, kNewJobFields);
        const JsonBody* body = body_or_reply(parsed, *ex);
        if (!body) return;
        auto read = read_new_job(*body, jobs::IfExists::kUpdate, r.traceparent);
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& job = std::get<jobs::NewJob>(read);
        api.jobs.add_async(r.params["type"], job.id, job.data, job.options,
                           [ex, id = job.id, debounce = job.options.debounce.has_value()](
                               Result<jobs::AddResult> s) {
                             if (!s.ok()) return reply_status(*ex, s.status());
                             reply_json(*ex, 200, add_reply(id, *s, debounce));
                           });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add("GET", "/v1/jobs/{type}", [&api](Request& r, Ex ex) {
    jobs::ListOptions options;
    if (auto it = r.query.find("state"); it != r.query.end() && !it->second.empty()) {
      auto filter = jobs::parse_job_filter(it->second);
      if (!filter.ok())
        return reply_error(
            *ex, invalid_argument("query parameter 'state': " + filter.status().message()));
      options.state = filter->state;
      options.outcome = filter->outcome;
      options.due = filter->due;
    }
    if (auto it = r.query.find("worker"); it != r.query.end()) options.worker = it->second;
    if (auto it = r.query.find("worker_type"); it != r.query.end())
      options.worker_type = it->second;
    if (auto it = r.query.find("cursor"); it != r.query.end()) options.cursor = it->second;
    auto limit = query_integer(r, "limit", 1, kMaxListLimit);
    if (!limit.ok()) return reply_error(*ex, *limit.error());
    if (limit.value()) options.limit = static_cast<size_t>(*limit.value());
    auto page = api.jobs.list(r.params["type"], options);
    if (!page.ok()) return reply_status(*ex, page.status());
    auto list = nlohmann::json::array();
    for (const auto& info : page->jobs) list.push_back(job_json(info));
    reply_json(*ex, 200, {{"jobs", list}, {"next_cursor", page->next_cursor}});
  });
  router.add("GET", "/v1/jobs/{type}/{id}", [&api](Request& r, Ex ex) {
    auto info = api.jobs.get(r.params["type"], r.params["id"]);
    if (!info.ok()) return reply_status(*ex, info.status());
    reply_json(*ex, 200, job_json(*info));
  });
  router.add("GET", "/v1/jobs/{type}/{id}/dependencies", [&api](Request& r, Ex ex) {
    auto deps = api.jobs.dependencies(r.params["type"], r.params["id"]);
    if (!deps.ok()) return reply_status(*ex, deps.status());
    auto list = nlohmann::json::array();
    for (const auto& d : *deps) {
      list.push_back({{"type", d.dependency.type},
                      {"id", d.dependency.id},
                      {"resolved", d.resolved == jobs::Outcome::kNone
                                       ? nlohmann::json(nullptr)
                                       : nlohmann::json(jobs::outcome_name(d.resolved))},
                      {"job", d.job ? job_json(*d.job) : nlohmann::json(nullptr)}});
    }
    reply_json(*ex, 200, {{"dependencies", list}});
  });
  router.add("DELETE", "/v1/jobs/{type}/{id}", [&api](Request& r, Ex ex) {
    Status s = api.jobs.remove(r.params["type"], r.params["id"]);
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, nlohmann::json::object());
  });
}

// A worker call's body: the route's fields, the lock required among them.
struct LockedBody {
  JsonBody body;
  std::string lock;
};

std::variant<LockedBody, ApiError> read_locked(const Request& r,
                                               std::initializer_list<std::string_view> allowed) {
  auto parsed = JsonBody::parse(r.body, allowed);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  auto& body = std::get<JsonBody>(parsed);
  auto lock = body.string("lock");
  if (!lock.ok()) return *lock.error();
  if (!lock.value() || lock.value()->empty()) return invalid_argument("field 'lock' is required");
  return LockedBody{std::move(body), *lock.value()};
}

// The handle of the job a worker call names. Its data format is that of the data the call
// gives, for the jobs layer to check that data as such (the job keeps its own format).
jobs::Job handle_of(Request& r, const std::string& lock, const Field<Payload>& data) {
  jobs::Job job{r.params["type"], r.params["id"], lock, "", ""};
  if (data.ok() && data.value()) job.data_format = data.value()->format;
  return job;
}

// The data a worker call replaces the job's with, if any.
std::optional<std::string> data_of(const Field<Payload>& data) {
  if (!data.value()) return std::nullopt;
  return data.value()->data;
}

// fail's "error": {"message", "kind"?, "details"?}, with the rest of the body.
std::variant<jobs::FailOptions, ApiError> read_fail(const JsonBody& body) {
  const auto& error = body.json().value("error", nlohmann::json());
  if (!error.is_object())
    return invalid_argument(
        "field 'error' is required: an object {\"message\", \"kind\"?, "
        "\"details\"?}");
  for (const auto& [key, value] : error.items()) {
    if (key != "message" && key != "kind" && key != "details")
      return unknown_field("'error' does not take a field '" + key + "'");
  }
  const JsonBody fields(error);
  auto message = fields.string("message");
  auto kind = fields.string("kind");
  auto details = fields.value_text("details");
  auto retry_in = seconds_field(body.number("retry_in"), kMaxDelaySeconds, "retry_in");
  auto retry = body.boolean("retry");
  if (auto e = first_error(message, kind, details, retry_in, retry)) return *e;
  if (!message.value() || message.value()->empty())
    return invalid_argument("field 'error.message' is required and must not be empty");
  jobs::FailOptions options;
  options.message = *message.value();
  if (kind.value()) options.kind = *kind.value();
  options.details = details.value();
  options.retry_in = retry_in.value();
  options.retry = retry.value().value_or(true);
  return options;
}

// finish_many's body: {"jobs": [{"type", "id", "lock", "result"?}, ...]}, 1..kMaxFinishMany.
std::variant<std::vector<std::pair<jobs::Job, jobs::FinishOptions>>, ApiError> read_finish_many(
    const JsonBody& body) {
  const auto& list = body.json().value("jobs", nlohmann::json());
  const std::string want = "field 'jobs' is required: a list of 1 to " +
                           std::to_string(jobs::kMaxFinishMany) +
                           " objects {\"type\", \"id\", \"lock\", \"result\"?}";
  if (!list.is_array() || list.empty() || list.size() > jobs::kMaxFinishMany)
    return invalid_argument(want);
  std::vector<std::pair<jobs::Job, jobs::FinishOptions>> calls;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "jobs[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return invalid_argument(want + "; " + at + " is not an object");
    for (const auto& [key, value] : list[i].items()) {
      if (key != "type" && key != "id" && key != "lock" && key != "result")
        return unknown_field(at + ": unknown field '" + key + "'");
    }
    const JsonBody item(list[i]);
    auto type = item.string("type");
    auto id = item.string("id");
    auto lock = item.string("lock");
    auto result = item.value_text("result");
    if (auto e = first_error(type, id, lock, result))
      return ApiError{e->status, e->name, at + ": " + e->message};
    const std::pair<const char*, const Field<std::string>*> required[] = {
        {"type", &type}, {"id", &id}, {"lock", &lock}};
    for (const auto& [name, field] : required) {
      if (!field->value() || field->value()->empty())
        return invalid_argument(at + ": field '" + name + "' is required");
    }
    calls.push_back(
        {jobs::Job{*type.value(), *id.value(), *lock.value(), "", ""}, {.result = result.value()}});
  }
  return calls;
}

void add_worker_call_routes(Router& router, Api& api) {
  router.add(
      "POST", "/v1/finish",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, {"jobs"});
        if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
        auto read = read_finish_many(std::get<JsonBody>(parsed));
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        std::vector<jobs::Job> handles;
        std::vector<jobs::FinishOptions> options;
        for (auto& [job, finish] : std::get<0>(read)) {
          handles.push_back(std::move(job));
          options.push_back(std::move(finish));
        }
        auto types = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
        for (const auto& job : handles) types->emplace_back(job.type, job.id);
        api.jobs.finish_many_async(std::move(handles), std::move(options),
                                   [&api, ex, types](Result<std::vector<Status>> done) {
                                     if (!done.ok()) return reply_status(*ex, done.status());
                                     auto results = nlohmann::json::array();
                                     for (size_t i = 0; i < done->size(); ++i) {
                                       const auto& [type, id] = (*types)[i];
                                       nlohmann::json one = {{"type", type}, {"id", id}};
                                       if ((*done)[i].ok()) {
                                         api.metrics.finished(type);
                                         one["ok"] = true;
                                       } else {
                                         const ApiError e = from_status((*done)[i]);
                                         one["ok"] = false;
                                         one["error"] = e.name;
                                         one["message"] = e.message;
                                       }
                                       results.push_back(std::move(one));
                                     }
                                     reply_json(*ex, 200, {{"results", results}});
                                   });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}/{id}/update",
      [&api](Request& r, Ex ex) {
        auto read = read_locked(r, {"lock", "progress", "data", "body", "body_base64"});
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& call = std::get<LockedBody>(read);
        auto progress = call.body.value_text("progress");
        auto data = read_payload(call.body);
        if (auto e = first_error(progress, data)) return reply_error(*ex, *e);
        jobs::Job job = handle_of(r, call.lock, data);
        api.jobs.update_async(job, {.progress = progress.value(), .data = data_of(data)},
                              [ex](Result<jobs::UpdateResult> result) {
                                if (!result.ok()) return reply_status(*ex, result.status());
                                reply_json(*ex, 200, {{"resubmitted", result->resubmitted}});
                              });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}/{id}/finish",
      [&api](Request& r, Ex ex) {
        auto read = read_locked(r, {"lock", "result", "data", "body", "body_base64", "next"});
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& call = std::get<LockedBody>(read);
        auto result = call.body.value_text("result");
        auto data = read_payload(call.body);
        auto next = read_next(call.body, r.params["type"]);
        if (auto e = first_error(result, data, next)) return reply_error(*ex, *e);
        jobs::Job job = handle_of(r, call.lock, data);
        jobs::FinishOptions finish{.result = result.value(), .data = data_of(data)};
        if (next.value()) return finish_with_next(api, ex, job, finish, *next.value());
        api.jobs.finish_async(job, finish, [&api, ex, type = job.type](Status s) {
          if (!s.ok()) return reply_status(*ex, s);
          api.metrics.finished(type);
          reply_json(*ex, 200, nlohmann::json::object());
        });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}/{id}/fail",
      [&api](Request& r, Ex ex) {
        auto read = read_locked(r, {"lock", "error", "retry_in", "retry"});
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& call = std::get<LockedBody>(read);
        auto options = read_fail(call.body);
        if (auto* e = std::get_if<ApiError>(&options)) return reply_error(*ex, *e);
        jobs::Job job{r.params["type"], r.params["id"], call.lock, "", ""};
        api.jobs.fail_async(
            job, std::move(std::get<jobs::FailOptions>(options)),
            [ex](Result<jobs::FailResult> result) {
              if (!result.ok()) return reply_status(*ex, result.status());
              nlohmann::json retry_at = nullptr;
              if (!result->dead) retry_at = result->retry_at_ms;
              reply_json(
                  *ex, 200,
                  {{"dead", result->dead}, {"retry_at", retry_at}, {"attempt", result->attempt}});
            });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}/{id}/snooze",
      [&api](Request& r, Ex ex) {
        auto read = read_locked(r, {"lock", "delay", "scheduled_time"});
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& call = std::get<LockedBody>(read);
        auto delay = seconds_field(call.body.number("delay"), kMaxDelaySeconds, "delay");
        auto at = call.body.integer("scheduled_time");
        if (auto e = first_error(delay, at)) return reply_error(*ex, *e);
        jobs::SnoozeOptions options;
        options.scheduled_time_ms = at.value();
        if (delay.value()) options.delay = *delay.value();
        jobs::Job job{r.params["type"], r.params["id"], call.lock, "", ""};
        api.jobs.snooze_async(job, options, [ex](Status s) {
          if (!s.ok()) return reply_status(*ex, s);
          reply_json(*ex, 200, nlohmann::json::object());
        });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}/{id}/resubmit",
      [&api](Request& r, Ex ex) {
        auto read = read_locked(r, {"lock", "data", "body", "body_base64", "scheduled_time"});
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& call = std::get<LockedBody>(read);
        auto data = read_payload(call.body);
        auto at = call.body.integer("scheduled_time");
        if (auto e = first_error(data, at)) return reply_error(*ex, *e);
        jobs::Job job = handle_of(r, call.lock, data);
        api.jobs.resubmit_async(job, {.scheduled_time_ms = at.value(), .data = data_of(data)},
                                [ex](Status s) {
                                  if (!s.ok()) return reply_status(*ex, s);
                                  reply_json(*ex, 200, nlohmann::json::object());
                                });
      },
      Router::Access::kToken, Router::Runs::kInline);
}

// rerun and cancel block (the library has no async form), so they run on the pool; each
// answers the job as it then is.
void add_producer_call_routes(Router& router, Api& api) {
  router.add("POST", "/v1/jobs/{type}/{id}/rerun", [&api](Request& r, Ex ex) {
    auto parsed = JsonBody::parse(r.body, {"scheduled_time", "priority"});
    const JsonBody* body = body_or_reply(parsed, *ex);
    if (!body) return;
    auto at = body->integer("scheduled_time");
    auto priority = body->integer("priority");
    if (auto e = first_error(at, priority)) return reply_error(*ex, *e);
    const std::string& type = r.params["type"];
    const std::string& id = r.params["id"];
    Status s =
        api.jobs.rerun(type, id, {.scheduled_time_ms = at.value(), .priority = priority.value()});
    if (!s.ok()) return reply_status(*ex, s);
    auto info = api.jobs.get(type, id);
    if (!info.ok()) return reply_status(*ex, info.status());
    reply_json(*ex, 200, job_json(*info));
  });
  router.add("POST", "/v1/jobs/{type}/{id}/cancel", [&api](Request& r, Ex ex) {
    auto parsed = JsonBody::parse(r.body, {});
    if (!body_or_reply(parsed, *ex)) return;
    const std::string& type = r.params["type"];
    const std::string& id = r.params["id"];
    Status s = api.jobs.cancel(type, id);
    if (!s.ok()) return reply_status(*ex, s);
    auto info = api.jobs.get(type, id);
    if (!info.ok()) return reply_status(*ex, info.status());
    reply_json(*ex, 200, job_json(*info));
  });
}

// A wait's query, checked.
struct WaitRequest {
  jobs::State state = jobs::State::kFinished;
  jobs::Millis timeout = std::chrono::seconds(30);
};

std::variant<WaitRequest, ApiError> read_wait(const Request& r) {
  WaitRequest w;
  auto timeout = seconds_field(query_number(r, "timeout"), kMaxWaitSeconds, "timeout");
  if (!timeout.ok()) return *timeout.error();
  if (timeout.value()) w.timeout = *timeout.value();
  if (auto it = r.query.find("state"); it != r.query.end() && !it->second.empty()) {
    auto state = jobs::parse_state(it->second);
    if (!state.ok()) return from_status(state.status());
    w.state = *state;
  }
  return w;
}

void add_watch_routes(Router& router, Api& api) {
  router.add("GET", "/v1/jobs/{type}/{id}/wait", [&api](Request& r, Ex ex) {
    auto read = read_wait(r);
    if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
    const auto& wait = std::get<WaitRequest>(read);
    // Following: a finished job may yet be added again, or go.
    auto sub = api.jobs.subscribe(r.params["type"], r.params["id"], {.follow = true});
    if (!sub.ok()) return reply_status(*ex, sub.status());
    std::shared_ptr<jobs::Subscription> shared = std::move(*sub);
    auto poll = LongPoll::create(api);
    poll->keep(shared);
    poll->arm(*ex, kv::Clock::now() + wait.timeout, [ex](LongPoll& p) {
      p.finish([&] { ex->reply({204, ""}); });
    });
    shared->wait_async(wait.state, [ex, poll](Result<jobs::JobEvent> e) {
      poll->finish([&] {
        if (!e.ok()) return reply_status(*ex, e.status());
        reply_json(*ex, 200, event_json(*e));
      });
    });
  });

  router.add("GET", "/v1/jobs/{type}/{id}/events", [&api](Request& r, Ex ex) {
    auto follow = query_boolean(r, "follow");
    if (!follow.ok()) return reply_error(*ex, *follow.error());
    const bool follows = follow.value().value_or(false);
    auto sub = api.jobs.subscribe(r.params["type"], r.params["id"], {.follow = follows});
    if (!sub.ok()) return reply_status(*ex, sub.status());
    std::shared_ptr<jobs::Subscription> shared = std::move(*sub);
    auto poll = LongPoll::create(api);
    poll->keep(shared);
    auto end = [ex](LongPoll& p) { p.finish([&] { ex->end_stream(); }); };
    ex->start_stream();
    ex->send_event("job", dump(event_json(shared->initial())));
    poll->arm(*ex, std::nullopt, end);
    if (shared->ended()) return end(*poll);  // it had finished, and the stream does not follow
    shared->on_event([ex, poll, end, follows](const jobs::JobEvent& e) {
      poll->while_open([&] { ex->send_event("job", dump(event_json(e))); });
      if (!e.found || (!follows && e.state == jobs::State::kFinished)) end(*poll);
    });
  });
}

}  // namespace

void add_job_routes(Router& router, Api& api) {
  add_producer_routes(router, api);
  add_accept_routes(router, api);
  add_worker_call_routes(router, api);
  add_producer_call_routes(router, api);
  add_watch_routes(router, api);
}

}  // namespace kvq::server
