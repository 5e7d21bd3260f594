// server/api.h — the routes of docs/http-api.md over the public library API (kvq/jobs.h,
// kvq/workers.h). Handlers validate before acting and answer through api_error.h's names.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <variant>

#include <nlohmann/json.hpp>

#include "kvq/jobs.h"
#include "kvq/workers.h"
#include "server/http.h"
#include "server/json_body.h"
#include "server/metrics.h"
#include "server/router.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/timer_queue.h"

namespace kvq::server {

// Deadlines for long-polls, on one thread: far cheaper than a timer per connection's thread.
using Timers = util::TimerQueue<std::function<void()>>;

struct Api {
  jobs::Jobs& jobs;
  workers::Workers& workers;
  kv::Store& store;
  Metrics& metrics;
  Timers timers{util::run_each};

  // Everything still waiting (long-polls, streams), so shutdown can end it; each entry ends
  // its exchange when called.
  util::Mutex waiting_mu;
  std::map<uint64_t, std::function<void()>> waiting KVQ_GUARDED_BY(waiting_mu);
  uint64_t next_waiting KVQ_GUARDED_BY(waiting_mu) = 1;
  uint64_t hold(std::function<void()> end) KVQ_EXCLUDES(waiting_mu);
  void release(uint64_t id) KVQ_EXCLUDES(waiting_mu);
  // Ends every waiting exchange (long-polls answer 204, streams close).
  void end_all_waiting() KVQ_EXCLUDES(waiting_mu);
};

void add_meta_routes(Router& router, Api& api);
void add_type_routes(Router& router, Api& api);
void add_job_routes(Router& router, Api& api);
void add_worker_routes(Router& router, Api& api);
// The schedule routes (api_schedules.cc).
void add_schedule_routes(Router& router, Api& api);
// The batch routes (api_batches.cc).
void add_batch_routes(Router& router, Api& api);
// The dashboard's page (public) and GET /v1/stats.
void add_dashboard_routes(Router& router, Api& api);
// Every route above: the whole API of docs/http-api.md.
void add_api_routes(Router& router, Api& api);

// ---- helpers shared by the route files ----
void reply_json(Exchange& ex, unsigned status, const nlohmann::json& body);
void reply_error(Exchange& ex, const ApiError& error);
void reply_status(Exchange& ex, const Status& status);
std::string dump(const nlohmann::json& j);
// Job data / info stored as JSON text, embedded as JSON.
nlohmann::json embed(const std::string& json_text);
nlohmann::json job_json(const jobs::JobInfo& info);
nlohmann::json event_json(const jobs::JobEvent& event);
// A job as accept hands it to its worker: {"type", "id", "lock", "attempt", "traceparent" (only
// when the job has one), data fields (job_payload.h)}. job_json and event_json show
// "traceparent" the same way.
nlohmann::json accepted_job_json(const jobs::Job& job);
// {"type", "timeout", "finished_retention", "max_lost_runs", "max_attempts", "backoff": {"base",
// "factor", "cap", "jitter"}, "paused", "paused_until", "max_running", "rate": {"limit",
// "period_ms"}, "max_running_per_group", "has_groups"}: durations in seconds but for the rate's
// period (ms), paused_until in ms since the epoch; each unset setting null.
nlohmann::json type_json(const std::string& type, const jobs::TypeSettings& settings);
// A query parameter as a number; nullopt if absent; an ApiError if malformed or beyond
// ±kMaxJsonInteger (json_body.h), so that a cast to int64_t never wraps.
Field<double> query_number(const Request& r, const std::string& name);
// A query parameter as a decimal integer in [min, max]; nullopt if absent; an ApiError naming
// the parameter and its range otherwise (never a wrapped or truncated value).
Field<int64_t> query_integer(const Request& r, const std::string& name, int64_t min, int64_t max);
// A query parameter `true` or `false`; nullopt if absent; an ApiError naming the parameter
// otherwise.
Field<bool> query_boolean(const Request& r, const std::string& name);
// Seconds (a JSON number or query value, as read) to milliseconds, checked against
// [0, max_seconds]; an error of `value` passes through.
Field<jobs::Millis> seconds_field(const Field<double>& value, double max_seconds,
                                  const std::string& name);

}  // namespace kvq::server
