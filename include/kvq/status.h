// kvq/status.h — errors as values.
//
// Every fallible kvq call returns a Status or a Result<T>; no exception crosses the public API.
// Each code has a retry meaning, so a caller can decide what to do without parsing messages:
//
//   kAborted            a transaction conflict: retry the whole transaction (kv::run does).
//   kUnavailable        the store is unreachable for now: back off and retry (kv::run does).
//   kUnknownResult      a commit may or may not have applied (the connection dropped after the
//                       request was sent). kv::run retries it, so transactional functions must be
//                       idempotent: read first, write only what is still missing.
//   kFailedPrecondition the caller's view is stale — for jobs and workers, the worker was fenced
//                       out ("halt": its job was removed, re-enqueued or taken by another run, or
//                       the worker was replaced or declared dead). Never retry; stop working on
//                       the job. (The kv layer also uses it for a misused transaction and for an
//                       LMDB directory opened with another durability: errors of the program
//                       or its setup, not of a request.)
//   kNoTimeout          jobs: the job's type has no activity timeout, i.e. the type does not
//                       exist, so no job can be added to it. Retry only after the type is created
//                       (Jobs::set_type_timeout).
//   kTypeHasJobs        jobs: the type still has jobs, so it cannot be deleted (its jobs would be
//                       orphaned). Retry after removing them (Jobs::remove_all_jobs).
//   kWrongState         jobs: the job is not in a state the call applies to (rerun of a job
//                       that has not finished, cancel of one that has)
//   kPermissionDenied   the caller presented a secret (a worker token) that does not grant
//                       what it asked; nothing changed. Never retry with the same secret.
//   kNotFound, kAlreadyExists, kInvalidArgument, kResourceExhausted, kDeadlineExceeded,
//   kCancelled, kInternal: as named; not retried.
//
// Status and Result are values: cheap to move, safe to copy, not tied to any thread.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kvq {

enum class Code {
  kOk = 0,
  kAborted,
  kUnavailable,
  kUnknownResult,
  kNotFound,
  kAlreadyExists,
  kInvalidArgument,
  kResourceExhausted,
  kDeadlineExceeded,
  kFailedPrecondition,
  kCancelled,
  kInternal,
  kPermissionDenied,
  kNoTimeout,
  kTypeHasJobs,
  // The job is not in a state the call applies to (rerun of a job that has not finished,
  // cancel of one that has).
  kWrongState,
};

// The stable snake_case name of a code ("aborted", "not_found", ...), used in logs and by the
// HTTP and CLI layers.
std::string_view code_name(Code code);

// True for the codes a transaction retry loop should retry: kAborted, kUnavailable,
// kUnknownResult.
bool is_retryable(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  bool retryable() const { return is_retryable(code_); }

  // "not_found: job 'x' of type 't' does not exist"; "ok" when OK.
  std::string to_string() const;

  // Returns a status with the same code and `context + ": " + message`.
  Status with_context(std::string_view context) const;

  // Explicitly drops a status the caller has decided not to act on.
  void ignore() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status UnknownResult(std::string m) { return {Code::kUnknownResult, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}
inline Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status NoTimeout(std::string m) { return {Code::kNoTimeout, std::move(m)}; }
inline Status TypeHasJobs(std::string m) { return {Code::kTypeHasJobs, std::move(m)}; }
inline Status WrongState(std::string m) { return {Code::kWrongState, std::move(m)}; }

// A value of type T, or the Status that explains why there is none. Never holds an OK status
// without a value.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "a Result built from a Status must be an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  Code code() const { return status_.code(); }
  // For a call made for its effect, whose value and outcome the caller does not need.
  void ignore() const {}

  // REQUIRES: ok()
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return *std::move(value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  Status status_;  // OK exactly when value_ holds a value
  std::optional<T> value_;
};

namespace internal {
inline const Status& status_of(const Status& status) { return status; }
template <typename T>
const Status& status_of(const Result<T>& result) {
  return result.status();
}
}  // namespace internal

}  // namespace kvq

#define KVQ_CONCAT_INNER_(a, b) a##b
#define KVQ_CONCAT_(a, b) KVQ_CONCAT_INNER_(a, b)

// Returns the status of `expr` (a Status, or a Result whose value is not needed) from the
// enclosing function if it is not OK.
#define KVQ_RETURN_IF_ERROR(expr)                                   \
  do {                                                              \
    ::kvq::Status kvq_status_ = ::kvq::internal::status_of((expr)); \
    if (!kvq_status_.ok()) return kvq_status_;                      \
  } while (0)

// Evaluates `expr` (a Result<T>); on error returns its status, else moves the value into `lhs`.
#define KVQ_ASSIGN_OR_RETURN(lhs, expr) \
  KVQ_ASSIGN_OR_RETURN_IMPL_(KVQ_CONCAT_(kvq_result_, __LINE__), lhs, expr)
#define KVQ_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
