// /healthz, /metrics and the type routes.
#include "server/api.h"
#include "server/json_body.h"

namespace kvq::server {

void add_meta_routes(Router& router, Api& api) {
  // For load balancers and supervisors: 503 while the store cannot serve (see kv::Store::check_health).
  router.add("GET", "/healthz", [&api](Request&, std::shared_ptr<Exchange> ex) {
    Status health = api.store.check_health();
    if (!health.ok()) {
      return reply_json(*ex, 503, {{"status", "unavailable"}, {"store", api.store.describe()}, {"message", health.to_string()}});
    }
    reply_json(*ex, 200, {{"status", "ok"}, {"store", api.store.describe()}});
  }, Router::Access::kPublic);
  router.add("GET", "/metrics", [&api](Request&, std::shared_ptr<Exchange> ex) {
    ex->reply({200, api.metrics.render(api.jobs), "text/plain; version=0.0.4"});
  });
}

void add_type_routes(Router& router, Api& api) {
  auto type_json = [](const std::string& type, jobs::Millis timeout) {
    return nlohmann::json{{"type", type}, {"timeout", static_cast<double>(timeout.count()) / 1000.0}};
  };
  router.add("GET", "/v1/types", [&api, type_json](Request&, std::shared_ptr<Exchange> ex) {
    auto types = api.jobs.types();
    if (!types.ok()) return reply_status(*ex, types.status());
    auto out = nlohmann::json::array();
    for (const auto& type : *types) {
      auto timeout = api.jobs.get_type_timeout(type);
      if (timeout.ok()) out.push_back(type_json(type, *timeout));
    }
    reply_json(*ex, 200, {{"types", out}});
  });
  router.add("GET", "/v1/types/{type}", [&api, type_json](Request& r, std::shared_ptr<Exchange> ex) {
    auto timeout = api.jobs.get_type_timeout(r.params["type"]);
    if (!timeout.ok()) return reply_status(*ex, timeout.status());
    reply_json(*ex, 200, type_json(r.params["type"], *timeout));
  });
  router.add("PUT", "/v1/types/{type}", [&api, type_json](Request& r, std::shared_ptr<Exchange> ex) {
    auto parsed = JsonBody::parse(r.body, {"timeout"});
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
    const auto& body = std::get<JsonBody>(parsed);
    ApiError error{0, "", ""};
    auto seconds = body.number("timeout", &error);
    if (error.status) return reply_error(*ex, error);
    if (!seconds || *seconds <= 0) return reply_error(*ex, invalid_argument("'timeout' must be a positive number of seconds"));
    auto timeout = seconds_field(seconds, 365.0 * 24 * 3600, "timeout", &error);
    if (error.status) return reply_error(*ex, error);
    Status s = api.jobs.set_type_timeout(r.params["type"], *timeout);
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, type_json(r.params["type"], *timeout));
  });
  router.add("DELETE", "/v1/types/{type}", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    Status s = api.jobs.clear_type_timeout(r.params["type"]);
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, nlohmann::json::object());
  });
  router.add("GET", "/v1/types/{type}/pending", [&api](Request& r, std::shared_ptr<Exchange> ex) {
    ApiError error{0, "", ""};
    auto max_time = query_number(r, "max_scheduled_time", &error);
    auto limit = query_number(r, "limit", &error);
    if (error.status) return reply_error(*ex, error);
    jobs::PendingCountOptions options;
    if (max_time) options.max_scheduled_time_ms = static_cast<int64_t>(*max_time);
    if (limit) {
      if (*limit < 1 || *limit > 1e7) return reply_error(*ex, invalid_argument("'limit' must be in 1..10000000"));
      options.limit = static_cast<size_t>(*limit);
    }
    auto n = api.jobs.pending_count(r.params["type"], options);
    if (!n.ok()) return reply_status(*ex, n.status());
    reply_json(*ex, 200, {{"pending", *n}});
  });
}

}  // namespace kvq::server
