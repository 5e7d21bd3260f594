#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace kvq::server {

ApiError from_status(const Status& status) {
  switch (status.code()) {
    case Code::kInvalidArgument: return {400, "invalid_argument", status.message()};
    case Code::kNotFound: return {404, "not_found", status.message()};
    case Code::kAlreadyExists: return {409, "already_exists", status.message()};
    // A fenced worker: stop working on the job.
    case Code::kFailedPrecondition: return {409, "halted", status.message()};
    case Code::kNoTimeout: return {409, "no_timeout", status.message()};
    case Code::kTypeHasJobs: return {409, "type_has_jobs", status.message()};
    case Code::kWrongState: return {409, "wrong_state", status.message()};
    case Code::kPermissionDenied: return {403, "wrong_token", status.message()};
    case Code::kAborted:
    case Code::kUnavailable:
    case Code::kUnknownResult:
    case Code::kDeadlineExceeded: return {503, "unavailable", status.to_string()};
    // A full disk (or map, or etcd's quota): the server is up and serving reads, but this write
    // can only succeed once an operator frees space; its own name, so that clients can tell.
    case Code::kResourceExhausted: return {503, "resource_exhausted", status.message()};
    default: return {500, "internal", status.to_string()};
  }
}

std::string error_body(const ApiError& error) {
  return nlohmann::json{{"error", error.name}, {"message", error.message}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvq::server
