// jobs/validation.h — checks on everything a caller hands the jobs layer, done before any
// store access so that bad input changes nothing.
#pragma once

#include <string>
#include <string_view>

#include "kvq/status.h"

namespace kvq::jobs {

// Types: 1..kMaxTypeBytes of [A-Za-z0-9_.:-] (they appear in URLs and metric labels).
Status validate_type(std::string_view type);
// Ids: 1..kMaxIdBytes bytes, no ASCII control characters.
Status validate_id(std::string_view id);
// Worker names (recorded on accepted jobs): 0..256 bytes, no ASCII control characters.
Status validate_worker(std::string_view worker);
// Parses `data` as a JSON object and returns it compacted (so that re-adding equal data in
// another layout is recognised as no change). kInvalidArgument if it is not a JSON object or
// its compact form is over `max_bytes`.
Result<std::string> normalize_data(std::string_view data, size_t max_bytes);

}  // namespace kvq::jobs
