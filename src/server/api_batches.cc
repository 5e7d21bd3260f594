// The batch routes: batches with a completion callback (Jobs::put_batch and the rest,
// kvq/workflows.h) over HTTP.
#include "server/api.h"
#include "server/json_body.h"

namespace kvq::server {
namespace {

using Ex = std::shared_ptr<Exchange>;

nlohmann::json batch_json(const jobs::BatchInfo& b) {
  return {{"id", b.id},
          {"callback",
           {{"type", b.spec.callback_type},
            {"id", b.spec.callback_id},
            {"data", embed(b.spec.callback_data)}}},
          {"on", jobs::batch_on_name(b.spec.on)},
          {"state", jobs::batch_state_name(b.state)},
          {"sealed", b.sealed()},
          {"fired", b.fired()},
          {"counts",
           {{"members", b.members},
            {"unfinished", b.unfinished()},
            {"succeeded", b.succeeded},
            {"dead", b.dead},
            {"cancelled", b.cancelled}}},
          {"created_at", b.created_ms},
          {"settled_at", b.settled_ms ? nlohmann::json(b.settled_ms) : nlohmann::json(nullptr)}};
}

// PUT's body: {"callback": {"type", "id", "data"?}, "on"?}. Only the form is checked here; the
// names and the type's existence are the library's to say.
std::variant<jobs::BatchSpec, ApiError> read_spec(const std::string& text) {
  auto parsed = JsonBody::parse(text, {"callback", "on"});
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const auto& body = std::get<JsonBody>(parsed);
  const std::string shape =
      "field 'callback' must be an object {\"type\": T, \"id\": I, \"data\": {...}?}";
  auto it = body.json().find("callback");
  if (it == body.json().end() || it->is_null())
    return invalid_argument("field 'callback' is required");
  if (!it->is_object()) return invalid_argument(shape);
  for (const auto& [key, value] : it->items()) {
    if (key != "type" && key != "id" && key != "data")
      return unknown_field("a batch's callback does not take a field '" + key + "'");
  }
  JsonBody callback(*it);
  auto type = callback.string("type");
  auto id = callback.string("id");
  auto data = callback.object_text("data");
  auto on = body.string("on");
  if (auto e = first_error(type, id, data, on)) return *e;
  if (!type.value() || !id.value()) return invalid_argument(shape);
  jobs::BatchSpec spec{*type.value(), *id.value(), data.value().value_or("{}")};
  if (on.value()) {
    auto parsed_on = jobs::parse_batch_on(*on.value());
    if (!parsed_on.ok()) return invalid_argument("field 'on': " + parsed_on.status().message());
    spec.on = *parsed_on;
  }
  return spec;
}

}  // namespace

void add_batch_routes(Router& router, Api& api) {
  router.add("GET", "/v1/batches/{id}", [&api](Request& r, Ex ex) {
    auto b = api.jobs.batch(r.params["id"]);
    if (!b.ok()) return reply_status(*ex, b.status());
    reply_json(*ex, 200, batch_json(*b));
  });
  router.add("PUT", "/v1/batches/{id}", [&api](Request& r, Ex ex) {
    auto spec = read_spec(r.body);
    if (auto* e = std::get_if<ApiError>(&spec)) return reply_error(*ex, *e);
    auto b = api.jobs.put_batch(r.params["id"], std::get<jobs::BatchSpec>(spec));
    if (!b.ok()) return reply_status(*ex, b.status());
    reply_json(*ex, 200, batch_json(*b));
  });
  // Seal takes no fields (an empty body or {}), as a schedule's pause does.
  router.add("POST", "/v1/batches/{id}/seal", [&api](Request& r, Ex ex) {
    auto parsed = JsonBody::parse(r.body, {});
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
    auto b = api.jobs.seal_batch(r.params["id"]);
    if (!b.ok()) return reply_status(*ex, b.status());
    reply_json(*ex, 200, batch_json(*b));
  });
}

}  // namespace kvq::server
