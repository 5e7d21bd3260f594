// server/api_accept.h — how workers get jobs over HTTP: the accept routes (one type, several
// types at once) and the accept half of a finish with "next", which finishes a job and accepts
// the worker's next one in one request and one transaction (Jobs::finish_and_accept).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvq/jobs.h"
#include "server/api.h"
#include "server/json_body.h"

namespace kvq::server {

// What a finish's "next" asks for: an accept over `types`, waiting up to options.timeout.
struct NextRequest {
  std::vector<std::string> types;
  jobs::AcceptOptions options;
};

// The finish body's "next" — absent or null: nullopt; an object {"types"?, "timeout"?,
// "worker"?, "worker_type"?, "max_priority"?, "max_scheduled_time"?} — checked, its types
// defaulting to `own_type` (the finished job's). Errors name the field within "next".
Field<NextRequest> read_next(const JsonBody& body, const std::string& own_type);

// Finishes `job` and, in the same transaction, accepts the next due job of `next.types`; answers
// 200 {"next": the job as accept shows it, or null}, or the finish's error (then nothing was
// finished or accepted). When none is due at the commit and next.options.timeout > 0, it
// long-polls for one after the commit; that wait ends (answering null) at its timeout, when the
// client goes or the server stops — the finish has committed by then and stays.
void finish_with_next(Api& api, std::shared_ptr<Exchange> ex, jobs::Job job,
                      jobs::FinishOptions finish, NextRequest next);

// POST /v1/accept/{type} and POST /v1/accept.
void add_accept_routes(Router& router, Api& api);

}  // namespace kvq::server
