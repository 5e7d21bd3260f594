// server/json_body.h — reading a request's JSON body strictly: an object, only the fields the
// route takes, each of the right type. Every problem is an ApiError naming the field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace kvq::server {

// 2^53 - 1: the largest integer a JSON number keeps exactly in every implementation (I-JSON,
// RFC 7493), and so the bound of every integer the API takes unless a field says less.
inline constexpr int64_t kMaxJsonInteger = (int64_t{1} << 53) - 1;

class JsonBody {
 public:
  // An empty body reads as {}. `allowed` lists the fields the route takes. A NUL byte anywhere
  // (even after the value) makes the body malformed.
  static std::variant<JsonBody, ApiError> parse(std::string_view text,
                                                std::initializer_list<std::string_view> allowed);
  explicit JsonBody(nlohmann::json object) : object_(std::move(object)) {}

  bool has(std::string_view field) const;
  // Each returns the field's value, std::nullopt if absent, or sets *error if of another type.
  std::optional<std::string> string(std::string_view field, ApiError* error) const;
  // An integer within [min, max] (by default the range every JSON implementation holds
  // exactly, ±kMaxJsonInteger); one outside it, however large, is an error naming the field,
  // never a wrapped value.
  std::optional<int64_t> integer(std::string_view field, ApiError* error,
                                 int64_t min = -kMaxJsonInteger,
                                 int64_t max = kMaxJsonInteger) const;
  std::optional<double> number(std::string_view field, ApiError* error) const;
  std::optional<bool> boolean(std::string_view field, ApiError* error) const;
  // A JSON object field, serialized (job data, worker info).
  std::optional<std::string> object_text(std::string_view field, ApiError* error) const;
  const nlohmann::json& json() const { return object_; }

 private:
  nlohmann::json object_;
};

// Parses `text` as JSON with nesting bounded; nullopt if malformed or too deep.
std::optional<nlohmann::json> parse_json(std::string_view text);

}  // namespace kvq::server
