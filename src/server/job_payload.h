// server/job_payload.h — a job's data over HTTP, in one place. A job's data is a JSON object
// (DataFormat::kJson), shown as itself in "data", or bytes (DataFormat::kBytes: the beanstalkd
// protocol's bodies, any bytes, NUL included), which JSON cannot hold as they are: such a job
// shows "data": null and its bytes as "body" (a string, when they are valid UTF-8) or else
// "body_base64" (standard base64, padded). Every reply that shows a job's data (get, list,
// accept, finish's next, events, the dashboard) goes through put_data_fields, and every request
// that gives data (add, batch add, update, finish, resubmit) through read_payload.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvq/jobs.h"
#include "server/json_body.h"

namespace kvq::server {

// Sets out["data"], out["data_format"] ("json" or "bytes") and, for bytes, out["body"] or
// out["body_base64"].
void put_data_fields(nlohmann::json& out, const std::string& data, jobs::DataFormat format);

// Data as a request gives it: the text to store and its format.
struct Payload {
  std::string data;
  jobs::DataFormat format = jobs::DataFormat::kJson;
};

// At most one of "data" (a JSON object), "body" (a string: its UTF-8 bytes) or "body_base64"
// (standard base64, padding required) — the fields the route allows; nullopt when none is given;
// an ApiError naming the field (or the two given together) otherwise.
Field<Payload> read_payload(const JsonBody& body);

std::string base64_encode(std::string_view bytes);
// nullopt unless `text` is standard base64 (A-Z a-z 0-9 + /) with its padding, length a
// multiple of 4.
std::optional<std::string> base64_decode(std::string_view text);
// Whether `text` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view text);

}  // namespace kvq::server
