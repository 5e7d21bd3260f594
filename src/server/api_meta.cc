// /healthz, /metrics and the type routes (settings, flow control, bulk calls).
#include <chrono>
#include <sstream>

#include "server/api.h"
#include "server/json_body.h"
#include "server/process_metrics.h"

namespace kvq::server {

void add_meta_routes(Router& router, Api& api) {
  // For load balancers and supervisors: 503 while the store cannot serve (see
  // kv::Store::check_health). Anyone may ask; only a caller with the token (or any caller of a
  // server without one) is told which store it is and why it cannot serve, since the store's
  // description names the data directory or the etcd endpoints.
  router.add(
      "GET", "/healthz",
      [&api](Request& request, std::shared_ptr<Exchange> ex) {
        Status health = api.store.check_health();
        // "cannot_write": the store serves reads but refuses writes (its disk is full); it recovers
        // by itself once space is freed.
        const char* status = health.ok()                                 ? "ok"
                             : health.code() == Code::kResourceExhausted ? "cannot_write"
                                                                         : "unavailable";
        nlohmann::json body = {{"status", status}};
        if (request.authorized) {
          body["store"] = api.store.describe();
          if (!health.ok()) body["message"] = health.to_string();
        }
        reply_json(*ex, health.ok() ? 200 : 503, body);
      },
      Router::Access::kPublic);
  router.add("GET", "/metrics", [&api](Request&, std::shared_ptr<Exchange> ex) {
    std::ostringstream out;
    out << api.metrics.render(api.jobs);
    write_live_workers(out, api.workers);
    write_build_info(out);
    write_process_metrics(out);
    ex->reply({200, out.str(), "text/plain; version=0.0.4"});
  });
}

namespace {

constexpr double kMaxTimeoutSeconds = 365.0 * 24 * 3600;
constexpr double kMaxRetentionSeconds = 10 * kMaxTimeoutSeconds;
// A pause's for_ms: at most ten years, ending far inside int64 milliseconds.
constexpr int64_t kMaxPauseMillis = int64_t{10} * 365 * 24 * 3600 * 1000;

// GET /v1/types/{type}/groups's page: Jobs::groups's range, and its default.
constexpr int64_t kMaxGroupsListed = 1000;
constexpr int64_t kDefaultGroupsListed = 100;

nlohmann::json group_json(const jobs::GroupInfo& g) {
  nlohmann::json in_turn_at = nullptr;
  if (g.in_turn_at_ms) in_turn_at = *g.in_turn_at_ms;
  return {{"group", g.group},
          {"running", g.running},
          {"pending", g.pending},
          {"full", g.full},
          {"in_turn_at", in_turn_at}};
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// PUT's "finished_retention": absent (nullopt: unchanged), null (keep finished jobs), or seconds.
Field<std::optional<jobs::Millis>> retention_field(const JsonBody& body) {
  if (!body.has("finished_retention")) return std::nullopt;
  if (body.json().at("finished_retention").is_null()) return std::optional<jobs::Millis>();
  auto seconds = body.number("finished_retention");
  if (!seconds.ok()) return *seconds.error();
  if (!(*seconds.value() > 0))
    return invalid_argument("'finished_retention' must be a positive number of seconds, or null");
  auto retention = seconds_field(seconds, kMaxRetentionSeconds, "finished_retention");
  if (!retention.ok()) return *retention.error();
  return std::optional<jobs::Millis>(*retention.value());
}

// PUT's "max_lost_runs": absent (nullopt: unchanged), null (re-enqueue for ever), or a count.
Field<std::optional<uint32_t>> max_lost_runs_field(const JsonBody& body) {
  if (!body.has("max_lost_runs")) return std::nullopt;
  // In place: copying a disengaged inner optional trips GCC 12's -Wmaybe-uninitialized.
  if (body.json().at("max_lost_runs").is_null())
    return std::optional<std::optional<uint32_t>>(std::in_place);
  // Out of range or of another type ("3", 1.5): the same message, with the field's own range.
  auto n = body.integer("max_lost_runs", 1, jobs::kMaxLostRunsLimit);
  if (!n.ok()) {
    return invalid_argument("'max_lost_runs' must be an integer from 1 to " +
                            std::to_string(jobs::kMaxLostRunsLimit) + ", or null");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*n.value()));
}

// PUT's "max_running" or "max_running_per_group" (`field`): absent (nullopt: unchanged), null
// (no limit), or a count.
Field<std::optional<uint32_t>> running_limit_field(const JsonBody& body, const std::string& field) {
  if (!body.has(field)) return std::nullopt;
  // In place, as max_lost_runs_field does.
  if (body.json().at(field).is_null()) return std::optional<std::optional<uint32_t>>(std::in_place);
  // Out of range or of another type ("2", 1.5): the same message, with the field's own range.
  auto n = body.integer(field, 1, jobs::kMaxRunningLimit);
  if (!n.ok()) {
    return invalid_argument("'" + field + "' must be an integer from 1 to " +
                            std::to_string(jobs::kMaxRunningLimit) + ", or null");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(*n.value()));
}

// PUT's "rate": absent (nullopt: unchanged), null (no limit), or {"limit": N, "period_ms": M}.
// Only the form is checked here; the ranges are the library's (validate_rate_limit).
Field<std::optional<jobs::RateLimit>> rate_field(const JsonBody& body) {
  if (!body.has("rate")) return std::nullopt;
  const auto& rate = body.json().at("rate");
  if (rate.is_null()) return std::optional<std::optional<jobs::RateLimit>>(std::in_place);
  if (!rate.is_object())
    return invalid_argument("field 'rate' must be an object {\"limit\", \"period_ms\"}, or null");
  for (const auto& [key, value] : rate.items()) {
    if (key != "limit" && key != "period_ms")
      return unknown_field("'rate' does not take a field '" + key + "'");
  }
  const JsonBody fields(rate);
  auto limit = fields.integer("limit", 1, jobs::kMaxRateLimit);
  auto period = fields.integer("period_ms", 1, jobs::kMaxRatePeriod.count());
  if (!limit.ok())
    return invalid_argument("'rate.limit' must be an integer from 1 to " +
                            std::to_string(jobs::kMaxRateLimit));
  if (!period.ok())
    return invalid_argument("'rate.period_ms' must be an integer from 1 to " +
                            std::to_string(jobs::kMaxRatePeriod.count()));
  if (!limit.value() || !period.value())
    return invalid_argument("field 'rate' needs both 'limit' and 'period_ms'");
  jobs::RateLimit out{static_cast<uint32_t>(*limit.value()), jobs::Millis(*period.value())};
  return std::optional<jobs::RateLimit>(out);
}

// PUT's retry policy fields, each absent = unchanged: "max_attempts" and "backoff": {"base",
// "factor", "cap", "jitter"} (times in seconds). Only the form is checked here; the ranges are
// the library's (validate_retry_policy), applied to the merged policy.
std::variant<jobs::RetryPolicyChange, ApiError> read_retry_change(const JsonBody& body) {
  jobs::RetryPolicyChange change;
  auto max_attempts = body.integer("max_attempts", 1, jobs::kMaxAttemptsLimit);
  if (!max_attempts.ok()) return *max_attempts.error();
  if (max_attempts.value()) change.max_attempts = static_cast<uint32_t>(*max_attempts.value());
  if (!body.has("backoff")) return change;
  const auto& backoff = body.json().at("backoff");
  if (!backoff.is_object())
    return invalid_argument(
        "field 'backoff' must be an object {\"base\"?, \"factor\"?, \"cap\"?, \"jitter\"?}");
  for (const auto& [key, value] : backoff.items()) {
    if (key != "base" && key != "factor" && key != "cap" && key != "jitter")
      return unknown_field("'backoff' does not take a field '" + key + "'");
  }
  const JsonBody fields(backoff);
  auto base = seconds_field(fields.number("base"), kMaxTimeoutSeconds, "backoff.base");
  auto factor = fields.number("factor");
  auto cap = seconds_field(fields.number("cap"), kMaxTimeoutSeconds, "backoff.cap");
  auto jitter = fields.number("jitter");
  if (auto e = first_error(base, factor, cap, jitter)) return *e;
  change.backoff_base = base.value();
  change.backoff_factor = factor.value();
  change.backoff_cap = cap.value();
  change.jitter = jitter.value();
  return change;
}

}  // namespace

void add_type_routes(Router& router, Api& api) {
  router.add("GET", "/v1/types", [&api](Request&, std::shared_ptr<Exchange> ex) {
    auto types = api.jobs.types();
    if (!types.ok()) return reply_status(*ex, types.status());
    auto out = nlohmann::json::array();
    for (const auto& type : *types) {
      auto settings = api.jobs.get_type(type);
      if (settings.ok()) out.push_back(type_json(type, *settings));
    }
    reply_json(*ex, 200, {{"types", out}});
  });
  router.add("GET", "/v1/types/{type}", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto settings = api.jobs.get_type(r.params["type"]);
    if (!settings.ok()) return reply_status(*ex, settings.status());
    reply_json(*ex, 200, type_json(r.params["type"], *settings));
  });
  router.add("PUT", "/v1/types/{type}", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto parsed =
        JsonBody::parse(r.body, {"timeout", "finished_retention", "max_lost_runs", "max_attempts",
                                 "backoff", "max_running", "rate", "max_running_per_group"});
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
    const auto& body = std::get<JsonBody>(parsed);
    auto retention_read = retention_field(body);
    if (!retention_read.ok()) return reply_error(*ex, *retention_read.error());
    const auto& retention = retention_read.value();
    auto max_lost_runs_read = max_lost_runs_field(body);
    if (!max_lost_runs_read.ok()) return reply_error(*ex, *max_lost_runs_read.error());
    const auto& max_lost_runs = max_lost_runs_read.value();
    auto max_running_read = running_limit_field(body, "max_running");
    if (!max_running_read.ok()) return reply_error(*ex, *max_running_read.error());
    const auto& max_running = max_running_read.value();
    auto per_group_read = running_limit_field(body, "max_running_per_group");
    if (!per_group_read.ok()) return reply_error(*ex, *per_group_read.error());
    const auto& per_group = per_group_read.value();
    auto rate_read = rate_field(body);
    if (!rate_read.ok()) return reply_error(*ex, *rate_read.error());
    const auto& rate = rate_read.value();
    auto retry_read = read_retry_change(body);
    if (auto* e = std::get_if<ApiError>(&retry_read)) return reply_error(*ex, *e);
    const auto& retry = std::get<jobs::RetryPolicyChange>(retry_read);
    // The timeout may be left out only to change the other settings of a type that exists.
    std::optional<jobs::Millis> timeout;
    if (body.has("timeout") ||
        (!retention && !max_lost_runs && !retry.any() && !max_running && !rate && !per_group)) {
      auto seconds = body.number("timeout");
      if (!seconds.ok()) return reply_error(*ex, *seconds.error());
      if (!seconds.value() || *seconds.value() <= 0)
        return reply_error(*ex, invalid_argument("'timeout' must be a positive number of seconds"));
      auto millis = seconds_field(seconds, kMaxTimeoutSeconds, "timeout");
      if (!millis.ok()) return reply_error(*ex, *millis.error());
      timeout = millis.value();
    }
    // The answer is the type as the changing transaction left it.
    const std::string& type = r.params["type"];
    auto settings = api.jobs.change_type_settings(type, {.timeout = timeout,
                                                         .finished_retention = retention,
                                                         .max_lost_runs = max_lost_runs,
                                                         .max_running = max_running,
                                                         .rate = rate,
                                                         .max_running_per_group = per_group,
                                                         .retry = retry});
    if (!settings.ok()) return reply_status(*ex, settings.status());
    reply_json(*ex, 200, type_json(type, *settings));
  });
  // Pauses the type in every server sharing the store; the answer is the type as the pausing
  // transaction left it.
  router.add("POST", "/v1/types/{type}/pause", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto parsed = JsonBody::parse(r.body, {"for_ms"});
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
    auto for_ms = std::get<JsonBody>(parsed).integer("for_ms", 1, kMaxPauseMillis);
    if (!for_ms.ok()) return reply_error(*ex, *for_ms.error());
    // A duration, not a time, so that the client's clock never matters: it ends by this
    // server's clock, the one the accepts it holds back compare with.
    std::optional<int64_t> until;
    if (for_ms.value()) until = now_ms() + *for_ms.value();
    const std::string& type = r.params["type"];
    auto settings = api.jobs.change_type_settings(type, {.paused = true, .paused_until_ms = until});
    if (!settings.ok()) return reply_status(*ex, settings.status());
    reply_json(*ex, 200, type_json(type, *settings));
  });
  router.add("POST", "/v1/types/{type}/resume", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto parsed = JsonBody::parse(r.body, {});
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
    const std::string& type = r.params["type"];
    auto settings = api.jobs.change_type_settings(type, {.paused = false});
    if (!settings.ok()) return reply_status(*ex, settings.status());
    reply_json(*ex, 200, type_json(type, *settings));
  });
  router.add("DELETE", "/v1/types/{type}", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    const std::string& type = r.params["type"];
    Status s = api.jobs.clear_type_timeout(type);
    // The library names its own call; an HTTP client removes the jobs with the route below.
    if (s.code() == Code::kTypeHasJobs)
      s = TypeHasJobs(s.message() + ". Over HTTP: DELETE /v1/types/" + type + "/jobs");
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, nlohmann::json::object());
  });
  router.add("DELETE", "/v1/types/{type}/jobs", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto removed = api.jobs.remove_all_jobs(r.params["type"]);
    if (!removed.ok()) return reply_status(*ex, removed.status());
    reply_json(*ex, 200, {{"removed", *removed}});
  });
  // Reruns every job of the type that ended dead (default) or cancelled.
  router.add("POST", "/v1/types/{type}/rerun", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto parsed = JsonBody::parse(r.body, {"outcome"});
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
    auto name = std::get<JsonBody>(parsed).string("outcome");
    if (!name.ok()) return reply_error(*ex, *name.error());
    jobs::Outcome outcome = jobs::Outcome::kDead;
    if (name.value()) {
      auto parsed_outcome = jobs::parse_outcome(*name.value());
      if (!parsed_outcome.ok())
        return reply_error(
            *ex, invalid_argument("field 'outcome': " + parsed_outcome.status().message()));
      outcome = *parsed_outcome;
    }
    auto n = api.jobs.rerun_all(r.params["type"], outcome);
    if (!n.ok()) return reply_status(*ex, n.status());
    reply_json(*ex, 200, {{"rerun", *n}});
  });
  // The type's groups with pending or running jobs, by name, a page at a time.
  router.add("GET", "/v1/types/{type}/groups", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto limit = query_integer(r, "limit", 1, kMaxGroupsListed);
    if (!limit.ok()) return reply_error(*ex, *limit.error());
    const size_t page_size = static_cast<size_t>(limit.value().value_or(kDefaultGroupsListed));
    auto after = r.query.find("after");
    auto groups =
        api.jobs.groups(r.params["type"], page_size, after == r.query.end() ? "" : after->second);
    if (!groups.ok()) return reply_status(*ex, groups.status());
    auto list = nlohmann::json::array();
    for (const auto& g : *groups) list.push_back(group_json(g));
    // A full page may have more after it; the page after the last is empty.
    const std::string next = groups->size() == page_size ? groups->back().group : "";
    reply_json(*ex, 200, {{"groups", list}, {"next_after", next}});
  });
  router.add("GET", "/v1/types/{type}/pending", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    auto max_time = query_number(r, "max_scheduled_time");
    auto limit = query_number(r, "limit");
    if (auto error = first_error(max_time, limit)) return reply_error(*ex, *error);
    jobs::PendingCountOptions options;
    if (max_time.value()) options.max_scheduled_time_ms = static_cast<int64_t>(*max_time.value());
    if (const auto& n = limit.value()) {
      if (*n < 1 || *n > 1e7)
        return reply_error(*ex, invalid_argument("'limit' must be in 1..10000000"));
      options.limit = static_cast<size_t>(*n);
    }
    auto n = api.jobs.pending_count(r.params["type"], options);
    if (!n.ok()) return reply_status(*ex, n.status());
    reply_json(*ex, 200, {{"pending", *n}});
  });
}

}  // namespace kvq::server
