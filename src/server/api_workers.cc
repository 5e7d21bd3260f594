// The worker membership routes.
#include <cmath>

#include "server/api.h"
#include "server/json_body.h"
#include "server/long_poll.h"

namespace kvq::server {
namespace {

using Ex = std::shared_ptr<Exchange>;

nlohmann::json membership_json(const workers::Membership& m) {
  auto list = nlohmann::json::array();
  for (const auto& w : m.workers) {
    list.push_back({{"id", w.id},
                    {"info", embed(w.info)},
                    {"registered_at", w.registered_at_ms},
                    {"last_heartbeat", w.last_heartbeat_ms},
                    {"health_timeout", static_cast<double>(w.health_timeout.count()) / 1000.0}});
  }
  return {{"version", m.version}, {"workers", list}};
}

std::optional<std::string> token_from(Request& r, Exchange& ex) {
  auto parsed = JsonBody::parse(r.body, {"token"});
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    reply_error(ex, *e);
    return std::nullopt;
  }
  auto token = std::get<JsonBody>(parsed).string("token");
  auto error = token.error();
  if (!error && (!token.value() || token.value()->empty()))
    error = invalid_argument("field 'token' is required");
  if (error) {
    reply_error(ex, *error);
    return std::nullopt;
  }
  return token.value();
}

}  // namespace

void add_worker_routes(Router& router, Api& api) {
  router.add("POST", "/v1/workers/{wtype}", [&api](Request& r, Ex ex) {
    auto parsed = JsonBody::parse(r.body, {"id", "info", "health_timeout", "take_over"});
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
    const auto& body = std::get<JsonBody>(parsed);
    auto id = body.string("id");
    auto info = body.object_text("info");
    auto timeout = body.number("health_timeout");
    auto take_over = body.boolean("take_over");
    auto error = first_error(id, info, timeout, take_over);
    if (!error && !id.value()) error = invalid_argument("field 'id' is required");
    const auto& seconds = timeout.value();
    if (!error && seconds && !(*seconds >= 0.1 && *seconds <= 86400)) {
      error = invalid_argument("'health_timeout' must be between 0.1 and 86400 seconds");
    }
    if (error) return reply_error(*ex, *error);
    workers::RegisterOptions options;
    if (info.value()) options.info = *info.value();
    if (seconds)
      options.health_timeout = workers::Millis(static_cast<int64_t>(std::ceil(*seconds * 1000)));
    options.take_over = take_over.value().value_or(false);
    auto token = api.workers.register_remote(r.params["wtype"], *id.value(), options);
    if (!token.ok()) return reply_status(*ex, token.status());
    reply_json(*ex, 200, {{"id", *id.value()}, {"token", *token}});
  });
  router.add("POST", "/v1/workers/{wtype}/{id}/heartbeat", [&api](Request& r, Ex ex) {
    auto token = token_from(r, *ex);
    if (!token) return;
    Status s = api.workers.heartbeat(r.params["wtype"], r.params["id"], *token);
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, nlohmann::json::object());
  });
  router.add("DELETE", "/v1/workers/{wtype}/{id}", [&api](Request& r, Ex ex) {
    auto it = r.query.find("token");
    if (it == r.query.end() || it->second.empty()) {
      return reply_error(*ex, invalid_argument("query parameter 'token' is required"));
    }
    Status s = api.workers.unregister(r.params["wtype"], r.params["id"], it->second);
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, nlohmann::json::object());
  });
  router.add("GET", "/v1/workers/{wtype}", [&api](Request& r, Ex ex) {
    auto m = api.workers.workers(r.params["wtype"]);
    if (!m.ok()) return reply_status(*ex, m.status());
    reply_json(*ex, 200, membership_json(*m));
  });
  router.add("GET", "/v1/workers/{wtype}/events", [&api](Request& r, Ex ex) {
    if (auto check = api.workers.workers(r.params["wtype"]); !check.ok())
      return reply_status(*ex, check.status());
    auto poll = LongPoll::create(api);
    auto end = [ex](LongPoll& p) { p.finish([&] { ex->end_stream(); }); };
    ex->start_stream();
    auto sub = api.workers.subscribe(r.params["wtype"], [ex, poll](const workers::Membership& m) {
      poll->while_open([&] { ex->send_event("membership", dump(membership_json(m))); });
    });
    if (!sub.ok()) {
      ex->send_event("error", error_body(from_status(sub.status())));
      return end(*poll);
    }
    // Dropped off the ending thread: destroying waits out a callback in progress, which may be
    // the one ending it.
    poll->keep(std::shared_ptr<workers::MembershipSubscription>(std::move(*sub)));
    poll->arm(*ex, std::nullopt, end);
  });
}

}  // namespace kvq::server
