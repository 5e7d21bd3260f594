// server/api_error.h — what the HTTP API answers when something is wrong: a status code and a
// body {"error": name, "message": text}. The names are the contract of docs/http-api.md.
#pragma once

#include <string>
#include <string_view>

#include "kvq/status.h"

namespace kvq::server {

struct ApiError {
  unsigned status;
  std::string name;
  std::string message;
};

// The one mapping from library codes to HTTP, for every route (routes do not refine it):
// kInvalidArgument 400 invalid_argument, kNotFound 404 not_found, kAlreadyExists 409
// already_exists, kFailedPrecondition 409 halted (a fenced worker), kNoTimeout 409 no_timeout,
// kTypeHasJobs 409 type_has_jobs, kPermissionDenied 403 wrong_token, kAborted / kUnavailable /
// kUnknownResult / kDeadlineExceeded 503 unavailable, kResourceExhausted (a full disk) 503
// resource_exhausted, others 500 internal.
ApiError from_status(const Status& status);

// {"error": ..., "message": ...}
std::string error_body(const ApiError& error);

inline ApiError malformed_json(std::string m) { return {400, "malformed_json", std::move(m)}; }
inline ApiError invalid_argument(std::string m) { return {400, "invalid_argument", std::move(m)}; }
inline ApiError unknown_field(std::string m) { return {400, "unknown_field", std::move(m)}; }

}  // namespace kvq::server
