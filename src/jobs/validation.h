// jobs/validation.h — checks on everything a caller hands the jobs layer, done before any
// store access so that bad input changes nothing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kvq/jobs.h"
#include "kvq/status.h"

namespace kvq::jobs {

// Types: 1..kMaxTypeBytes of [A-Za-z0-9_.:-] (they appear in URLs and metric labels).
Status validate_type(std::string_view type);
// Schedule names: 1..kMaxScheduleNameBytes of the characters a type may contain (they appear
// in URLs and in the ids of the jobs a schedule enqueues).
Status validate_schedule_name(std::string_view name);
// Ids: 1..kMaxIdBytes bytes, no ASCII control characters.
Status validate_id(std::string_view id);
// Groups (AddOptions::group): "" (none), or 1..kMaxGroupBytes bytes without ASCII control
// characters.
Status validate_group(std::string_view group);
// Worker names (recorded on accepted jobs): 0..256 bytes, no ASCII control characters.
Status validate_worker(std::string_view worker);
// Worker types (workers layer) recorded beside a worker name: "" (none), or a name as types are.
Status validate_worker_type(std::string_view worker_type);
// Checks that `data` is a JSON object and returns it without the whitespace between tokens (so
// that re-adding the same data with other spacing is recognised as no change). Keys keep the
// producer's order, duplicates included, and numbers and strings their spelling.
// kInvalidArgument if it is not a JSON object or its compact form is over `max_bytes`.
Result<std::string> normalize_data(std::string_view data, size_t max_bytes);
// normalize_data for data of `format`: bytes (DataFormat::kBytes) are kept exactly as given,
// never parsed, and only their size is checked.
Result<std::string> normalize_data(std::string_view data, DataFormat format, size_t max_bytes);
// A job's own timeout (AddOptions::timeout): nullopt, or 1 ms..kMaxJobTimeout.
Status validate_job_timeout(std::optional<Millis> timeout);
// AddOptions::traceparent: "" (none), or a W3C traceparent (util/trace_context.h).
Status validate_traceparent(std::string_view traceparent);
// The same for any JSON value (an update's progress, a finish's result, an error's details),
// its messages naming it as `what`.
Result<std::string> normalize_value(std::string_view value, size_t max_bytes,
                                    std::string_view what);

// A worker's report of a failed attempt, as the job keeps it.
struct ErrorReport {
  std::string kind;
  std::string message;
  std::string details;  // compact JSON, "" for none
};
// Checks a fail's error (kInvalidArgument: an empty message, a kind of 0 or more than
// kMaxErrorKindBytes bytes, text that is not UTF-8 or a kind with control characters, details
// that are not JSON or longer than `max_details_bytes`) and cuts it to what a job keeps: a
// message over kMaxErrorMessageBytes ends, at a UTF-8 boundary, with "…"; details whose compact
// JSON is over kMaxErrorDetailsBytes become {"truncated": "<as much of that JSON as fits>"}.
Result<ErrorReport> validate_error(std::string_view kind, std::string_view message,
                                   const std::optional<std::string>& details,
                                   size_t max_details_bytes);

// The checks every accept entry point makes on its options before touching the store.
Status validate_accept(std::string_view type, const AcceptOptions& options);

}  // namespace kvq::jobs
