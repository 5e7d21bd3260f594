// util/trace_context.h — W3C Trace Context's `traceparent` (https://www.w3.org/TR/trace-context/),
// which an add may carry so that a job's run continues the producer's trace. The jobs layer
// keeps it as given; the front ends check a field before passing it on, and read the trace id
// of a request's header for their log lines.
#pragma once

#include <optional>
#include <string_view>

namespace kvq::util {

// The longest traceparent accepted: version 00's is 55 characters; a later version may append
// fields ("-..."), up to this many characters in all.
inline constexpr size_t kMaxTraceparentBytes = 256;

// Whether `text` is a traceparent as W3C Trace Context level 1 defines it:
//   version "-" trace-id "-" parent-id "-" trace-flags
// each lowercase hex: version 2 digits and not "ff", trace-id 32 and not all zero, parent-id 16
// and not all zero, trace-flags 2. Version 00 has exactly these 55 characters; a later version
// may continue with "-" and more visible ASCII, up to kMaxTraceparentBytes.
bool is_valid_traceparent(std::string_view text);

// The trace-id (32 hex digits) of a valid traceparent; nullopt for an invalid one.
std::optional<std::string_view> trace_id_of(std::string_view traceparent);

}  // namespace kvq::util
