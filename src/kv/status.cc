#include "kvq/status.h"

namespace kvq {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kAborted: return "aborted";
    case Code::kUnavailable: return "unavailable";
    case Code::kUnknownResult: return "unknown_result";
    case Code::kNotFound: return "not_found";
    case Code::kAlreadyExists: return "already_exists";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kResourceExhausted: return "resource_exhausted";
    case Code::kDeadlineExceeded: return "deadline_exceeded";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kCancelled: return "cancelled";
    case Code::kInternal: return "internal";
    case Code::kPermissionDenied: return "permission_denied";
    case Code::kNoTimeout: return "no_timeout";
    case Code::kTypeHasJobs: return "type_has_jobs";
    case Code::kWrongState: return "wrong_state";
  }
  return "internal";
}

bool is_retryable(Code code) {
  return code == Code::kAborted || code == Code::kUnavailable || code == Code::kUnknownResult;
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out(code_name(code_));
  if (!message_.empty()) out += ": " + message_;
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

}  // namespace kvq
