// server/add_windows_fields.h — an add's "debounce" and "unique_for" (kvq/add_windows.h) as the
// HTTP API reads them (seconds, checked here so each problem is a 400 naming its field), and
// what they add to the add's reply. The jobs layer decides what they do.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kvq/jobs.h"
#include "server/json_body.h"

namespace kvq::server {

// "debounce": absent or null (none), or {"delay": S, "max_delay"?: S} in seconds: delay 0 to
// 365 days, max_delay (default 365 days) at least delay and at most 365 days.
Field<jobs::Debounce> debounce_field(const JsonBody& body);

// "unique_for": absent or null (none), or seconds, more than 0 and at most 365 days.
Field<jobs::Millis> unique_for_field(const JsonBody& body);

// A single add's reply: {"id", "added"}; with "kept" and "unique_until" when the answer names a
// unique window (the add opened one, or one kept the job); with "debounced" and
// "scheduled_time" for an add with `debounce` that was not kept.
nlohmann::json add_reply(const std::string& id, const jobs::AddResult& result, bool debounce);

}  // namespace kvq::server
