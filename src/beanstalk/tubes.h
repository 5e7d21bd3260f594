// beanstalk/tubes.h — a beanstalkd tube is a kvq job type: how the names map, and the settings
// a tube's type gets when a connection names it first.
//
// Tube names may hold + / ; $ ( ), which type names may not (A-Z a-z 0-9 _ . : -), and type
// names may hold ':', which tube names may not. So each of + / ; $ ( ) is written in the type
// name as ':' and two hex digits (':2B' for '+'), and a type name maps back to a tube only when
// it is made of tube characters and such escapes: the mapping is one-to-one both ways. A type
// name is at most 200 bytes (kMaxTypeBytes), as a tube name is, so every tube has a type but one
// whose name, once escaped, is longer than that: a long name holding some of + / ; $ ( ).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kvq/jobs.h"

namespace kvq::beanstalk {

// The type of tube `tube` (a valid name, is_valid_name), or nullopt when it would be over
// kMaxTypeBytes.
std::optional<std::string> type_of_tube(std::string_view tube);
// The tube of type `type`, or nullopt when `type` is no tube's type (a type made over HTTP
// with a name no tube has).
std::optional<std::string> tube_of_type(std::string_view type);

// What a tube's type is made with when a connection uses or watches it first (Jobs::ensure_type;
// an existing type is left as it is):
// - timeout 120 s: never used by beanstalk jobs, which all carry their own (the put's ttr), only
//   by jobs added to the type over HTTP without one;
// - retry: max_attempts kMaxAttemptsLimit, so that a job whose ttr keeps expiring comes back
//   each time as in beanstalkd (a job is buried only by `bury`) — after a million lost runs it
//   ends dead, the nearest kvq comes to "never";
// - finished jobs kept (no retention), no max_lost_runs, no flow control.
jobs::TypeSettings tube_type_settings();

}  // namespace kvq::beanstalk
