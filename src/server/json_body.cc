#include "server/json_body.h"

#include <limits>

#include "util/text.h"

namespace kvq::server {
namespace {

constexpr int kMaxDepth = 64;

ApiError wrong_type(std::string_view field, std::string_view want) {
  return invalid_argument("field '" + std::string(field) + "' must be " + std::string(want));
}

}  // namespace

std::optional<nlohmann::json> parse_json(std::string_view text) {
  if (!util::json_depth_within(text, kMaxDepth)) return std::nullopt;
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

std::variant<JsonBody, ApiError> JsonBody::parse(std::string_view text,
                                                 std::initializer_list<std::string_view> allowed) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return JsonBody(nlohmann::json::object());
  // The parser stops at a NUL as at the end of input, so "{}\0junk" would pass.
  if (text.find('\0') != std::string_view::npos)
    return malformed_json("the request body contains a NUL byte");
  auto parsed = parse_json(text);
  if (!parsed)
    return malformed_json("the request body is not valid JSON (or nests deeper than 64 levels)");
  if (!parsed->is_object()) return malformed_json("the request body must be a JSON object");
  for (const auto& [key, value] : parsed->items()) {
    bool known = false;
    for (auto a : allowed) known = known || a == key;
    if (!known) return unknown_field("this route does not take a field '" + key + "'");
  }
  return JsonBody(std::move(*parsed));
}

bool JsonBody::has(std::string_view field) const { return object_.contains(field); }

Field<std::string> JsonBody::string(std::string_view field) const {
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return wrong_type(field, "a string");
  return it->get<std::string>();
}

Field<int64_t> JsonBody::integer(std::string_view field, int64_t min, int64_t max) const {
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  const std::string range = "an integer in " + std::to_string(min) + ".." + std::to_string(max);
  if (!it->is_number_integer()) return wrong_type(field, range);
  // An unsigned value above INT64_MAX would wrap negative in get<int64_t>().
  const bool fits =
      it->is_number_unsigned()
          ? it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                it->get<int64_t>() >= min && it->get<int64_t>() <= max
          : it->get<int64_t>() >= min && it->get<int64_t>() <= max;
  if (!fits) return wrong_type(field, range);
  return it->get<int64_t>();
}

Field<double> JsonBody::number(std::string_view field) const {
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return wrong_type(field, "a number");
  return it->get<double>();
}

Field<bool> JsonBody::boolean(std::string_view field) const {
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return wrong_type(field, "true or false");
  return it->get<bool>();
}

Field<std::string> JsonBody::object_text(std::string_view field) const {
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return wrong_type(field, "a JSON object");
  return it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Field<std::string> JsonBody::value_text(std::string_view field) const {
  auto it = object_.find(field);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  return it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvq::server
