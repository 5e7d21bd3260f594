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

// One field (of a body, or a query parameter) as read: its value, nullopt when absent, or the
// ApiError naming it. Returned instead of taking an error out-parameter.
template <typename T>
class Field {
 public:
  // Implicit, so that a reader returns a value, std::nullopt or an ApiError as it is.
  Field(std::nullopt_t) {}                      // NOLINT(google-explicit-constructor)
  Field(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Field(std::optional<T> value)
      : value_(std::move(value)) {}                    // NOLINT(google-explicit-constructor)
  Field(ApiError error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return !error_; }
  const std::optional<ApiError>& error() const { return error_; }
  // The value (nullopt when absent); read it only when ok().
  const std::optional<T>& value() const { return value_; }

 private:
  std::optional<T> value_;
  std::optional<ApiError> error_;
};

// The first error among `fields`, in argument order; nullopt when all are ok.
template <typename... Fields>
std::optional<ApiError> first_error(const Fields&... fields) {
  std::optional<ApiError> error;
  ((error = error ? error : fields.error()), ...);
  return error;
}

class JsonBody {
 public:
  // An empty body reads as {}. `allowed` lists the fields the route takes. A NUL byte anywhere
  // (even after the value) makes the body malformed.
  static std::variant<JsonBody, ApiError> parse(std::string_view text,
                                                std::initializer_list<std::string_view> allowed);
  explicit JsonBody(nlohmann::json object) : object_(std::move(object)) {}

  bool has(std::string_view field) const;
  // Each returns the field's value, nullopt if absent (or null), or an error if of another type.
  Field<std::string> string(std::string_view field) const;
  // An integer within [min, max] (by default the range every JSON implementation holds
  // exactly, ±kMaxJsonInteger); one outside it, however large, is an error naming the field,
  // never a wrapped value.
  Field<int64_t> integer(std::string_view field, int64_t min = -kMaxJsonInteger,
                         int64_t max = kMaxJsonInteger) const;
  Field<double> number(std::string_view field) const;
  Field<bool> boolean(std::string_view field) const;
  // A JSON object field, serialized (job data, worker info).
  Field<std::string> object_text(std::string_view field) const;
  // Any JSON value but null, serialized (a job's result or progress, an error's details).
  Field<std::string> value_text(std::string_view field) const;
  const nlohmann::json& json() const { return object_; }

 private:
  nlohmann::json object_;
};

// Parses `text` as JSON with nesting bounded; nullopt if malformed or too deep.
std::optional<nlohmann::json> parse_json(std::string_view text);

}  // namespace kvq::server
