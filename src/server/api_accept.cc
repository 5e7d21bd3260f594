// The accept routes, and the accept half of a finish with "next" (api_accept.h).
#include "server/api_accept.h"

#include <algorithm>

#include "server/long_poll.h"

namespace kvq::server {
namespace {

using Ex = std::shared_ptr<Exchange>;
constexpr double kMaxWaitSeconds = 300;
constexpr int64_t kMaxAcceptCount = 100;

double seconds_since(kv::Clock::time_point start) {
  return std::chrono::duration<double>(kv::Clock::now() - start).count();
}

// The accept options every accept body takes (not "count", nor "types").
Field<jobs::AcceptOptions> read_accept_options(const JsonBody& body) {
  auto timeout = seconds_field(body.number("timeout"), kMaxWaitSeconds, "timeout");
  auto worker = body.string("worker");
  auto worker_type = body.string("worker_type");
  auto max_priority = body.integer("max_priority");
  auto max_scheduled_time = body.integer("max_scheduled_time");
  if (auto error = first_error(timeout, worker, worker_type, max_priority, max_scheduled_time))
    return *error;
  jobs::AcceptOptions options;
  if (timeout.value()) options.timeout = *timeout.value();
  if (worker.value()) options.worker = *worker.value();
  if (worker_type.value()) options.worker_type = *worker_type.value();
  options.max_priority = max_priority.value();
  options.max_scheduled_time_ms = max_scheduled_time.value();
  return options;
}

// "types": a list of 1..kMaxAcceptTypes distinct type names (the jobs layer checks the names).
Field<std::vector<std::string>> read_types(const JsonBody& body) {
  auto it = body.json().find("types");
  if (it == body.json().end() || it->is_null()) return std::nullopt;
  const std::string want = "field 'types' must be a list of 1 to " +
                           std::to_string(jobs::kMaxAcceptTypes) + " distinct type names";
  if (!it->is_array() || it->empty() || it->size() > jobs::kMaxAcceptTypes)
    return invalid_argument(want);
  std::vector<std::string> types;
  for (const auto& item : *it) {
    if (!item.is_string()) return invalid_argument(want);
    auto name = item.get<std::string>();
    if (std::find(types.begin(), types.end(), name) != types.end())
      return invalid_argument(want + ": '" + name + "' is given twice");
    types.push_back(std::move(name));
  }
  return types;
}

// What the accept routes answer with the jobs taken: 200 {"jobs": [...]}, 204 when none came
// in time (or the wait was cancelled), the error otherwise. The first job is the one the call
// may have waited for.
void reply_taken(Api& api, Exchange& ex, const Result<std::vector<jobs::Job>>& taken,
                 kv::Clock::time_point started) {
  if (!taken.ok()) {
    const auto code = taken.status().code();
    if (code == Code::kDeadlineExceeded || code == Code::kCancelled) return ex.reply({204, ""});
    return reply_status(ex, taken.status());
  }
  auto list = nlohmann::json::array();
  for (const auto& job : *taken) {
    api.metrics.accepted(job.type, list.empty() ? seconds_since(started) : 0.0);
    list.push_back(accepted_job_json(job));
  }
  reply_json(ex, 200, {{"jobs", list}});
}

// Arms `poll` so that the client going, or the server stopping, cancels the waiting accept
// `ticket`, whose kCancelled then answers. A ticket of 0 never waits: nothing to arm.
void cancel_on_give_up(Api& api, LongPoll& poll, Exchange& ex, uint64_t ticket) {
  if (ticket)
    poll.arm(ex, std::nullopt, [&api, ticket](LongPoll&) { api.jobs.cancel_accept(ticket); });
}

void add_accept_one_type(Router& router, Api& api) {
  router.add(
      "POST", "/v1/accept/{type}",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, {"timeout", "worker", "worker_type", "max_priority",
                                               "max_scheduled_time", "count"});
        if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
        const auto& body = std::get<JsonBody>(parsed);
        auto options = read_accept_options(body);
        auto count = body.integer("count", 1, kMaxAcceptCount);
        if (auto e = first_error(options, count)) return reply_error(*ex, *e);
        auto poll = LongPoll::create(api);
        const uint64_t ticket = api.jobs.accept_batch_async(
            r.params["type"], static_cast<size_t>(count.value().value_or(1)), *options.value(),
            [&api, ex, poll, started = kv::Clock::now()](Result<std::vector<jobs::Job>> taken) {
              poll->finish([&] { reply_taken(api, *ex, taken, started); });
            });
        cancel_on_give_up(api, *poll, *ex, ticket);
      },
      Router::Access::kToken, Router::Runs::kInline);
}

void add_accept_any(Router& router, Api& api) {
  router.add(
      "POST", "/v1/accept",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, {"types", "timeout", "worker", "worker_type",
                                               "max_priority", "max_scheduled_time"});
        if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(*ex, *e);
        const auto& body = std::get<JsonBody>(parsed);
        auto types = read_types(body);
        auto options = read_accept_options(body);
        if (auto e = first_error(types, options)) return reply_error(*ex, *e);
        if (!types.value()) return reply_error(*ex, invalid_argument("field 'types' is required"));
        auto poll = LongPoll::create(api);
        const uint64_t ticket = api.jobs.accept_any_async(
            *types.value(), *options.value(),
            [&api, ex, poll, started = kv::Clock::now()](Result<jobs::Job> taken) {
              // A Result is built from a Status only when that is an error (status.h).
              Result<std::vector<jobs::Job>> list =
                  taken.ok() ? Result<std::vector<jobs::Job>>(std::vector{std::move(*taken)})
                             : Result<std::vector<jobs::Job>>(taken.status());
              poll->finish([&] { reply_taken(api, *ex, list, started); });
            });
        cancel_on_give_up(api, *poll, *ex, ticket);
      },
      Router::Access::kToken, Router::Runs::kInline);
}

}  // namespace

Field<NextRequest> read_next(const JsonBody& body, const std::string& own_type) {
  auto it = body.json().find("next");
  if (it == body.json().end() || it->is_null()) return std::nullopt;
  if (!it->is_object())
    return invalid_argument("field 'next' must be an object {\"types\"?, \"timeout\"?, ...}");
  for (const auto& [key, value] : it->items()) {
    if (key != "types" && key != "timeout" && key != "worker" && key != "worker_type" &&
        key != "max_priority" && key != "max_scheduled_time")
      return unknown_field("'next' does not take a field '" + key + "'");
  }
  const JsonBody fields(*it);
  auto types = read_types(fields);
  auto options = read_accept_options(fields);
  if (auto e = first_error(types, options)) {
    e->message = "in 'next': " + e->message;
    return *e;
  }
  return NextRequest{types.value().value_or(std::vector<std::string>{own_type}), *options.value()};
}

void finish_with_next(Api& api, Ex ex, jobs::Job job, jobs::FinishOptions finish,
                      NextRequest next) {
  // One call: the finish, then the next job, waiting for one as POST /v1/accept does. Whatever
  // ends the wait — a job, the timeout, the client going (the ticket cancels it: a job taken
  // then goes back), the server stopping — the answer is 200 once the finish has committed, for
  // a worker must not take a finished job for undone; a failed wait answers null, and the
  // worker's next accept meets the error itself.
  const std::string type = job.type;
  auto poll = LongPoll::create(api);
  const uint64_t ticket = api.jobs.finish_and_accept_async(
      std::move(job), std::move(finish), std::move(next.types), next.options,
      [&api, ex, poll, type, started = kv::Clock::now()](Result<std::optional<jobs::Job>> r) {
        poll->finish([&] {
          if (!r.ok()) return reply_status(*ex, r.status());
          api.metrics.finished(type);
          nlohmann::json job = nullptr;
          if (r->has_value()) {
            api.metrics.accepted((*r)->type, seconds_since(started));
            job = accepted_job_json(**r);
          }
          reply_json(*ex, 200, {{"next", job}});
        });
      });
  cancel_on_give_up(api, *poll, *ex, ticket);
}

void add_accept_routes(Router& router, Api& api) {
  add_accept_one_type(router, api);
  add_accept_any(router, api);
}

}  // namespace kvq::server
