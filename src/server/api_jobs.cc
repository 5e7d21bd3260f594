// The job routes: producers, workers' job calls, and watching jobs.
#include <cmath>

#include "server/api.h"
#include "server/json_body.h"
#include "server/long_poll.h"

namespace kvq::server {
namespace {

using Ex = std::shared_ptr<Exchange>;
constexpr double kMaxWaitSeconds = 300;
constexpr size_t kMaxBatchAdd = jobs::kMaxAddMany;
constexpr int64_t kMaxAcceptCount = 100;
constexpr int64_t kMaxListLimit = 10000;

// The body of one job to add, checked.
std::variant<jobs::NewJob, ApiError> read_new_job(const JsonBody& body) {
  auto id = body.string("id");
  auto data = body.object_text("data");
  auto at = body.integer("scheduled_time");
  auto priority = body.integer("priority");
  if (auto error = first_error(id, data, at, priority)) return *error;
  if (!id.value()) return invalid_argument("field 'id' is required");
  jobs::NewJob job{*id.value(),
                   data.value().value_or("{}"),
                   {.scheduled_time_ms = at.value(), .priority = priority.value().value_or(0)}};
  return job;
}

// The batch route's list of jobs, each checked as the single add's body is.
std::variant<std::vector<jobs::NewJob>, ApiError> read_batch(const JsonBody& body) {
  const auto& list = body.json().value("jobs", nlohmann::json());
  if (!list.is_array() || list.empty() || list.size() > kMaxBatchAdd) {
    return invalid_argument("'jobs' must be an array of 1 to 1000 jobs");
  }
  std::vector<jobs::NewJob> batch;
  for (const auto& item : list) {
    if (!item.is_object()) return invalid_argument("each entry of 'jobs' must be an object");
    for (const auto& [key, value] : item.items()) {
      if (key != "id" && key != "data" && key != "scheduled_time" && key != "priority") {
        return unknown_field("a job does not take a field '" + key + "'");
      }
    }
    auto job = read_new_job(JsonBody(item));
    if (auto* e = std::get_if<ApiError>(&job)) return *e;
    batch.push_back(std::move(std::get<jobs::NewJob>(job)));
  }
  return batch;
}

template <typename Parsed>
const JsonBody* body_or_reply(Parsed& parsed, Exchange& ex) {
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    reply_error(ex, *e);
    return nullptr;
  }
  return &std::get<JsonBody>(parsed);
}

nlohmann::json handle_json(const jobs::Job& job) {
  return {{"type", job.type}, {"id", job.id}, {"lock", job.lock}, {"data", embed(job.data)}};
}

void add_producer_routes(Router& router, Api& api) {
  router.add(
      "POST", "/v1/jobs/{type}/batch",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, {"jobs"});
        const JsonBody* body = body_or_reply(parsed, *ex);
        if (!body) return;
        auto batch = read_batch(*body);
        if (auto* e = std::get_if<ApiError>(&batch)) return reply_error(*ex, *e);
        const size_t added = std::get<0>(batch).size();
        api.jobs.add_many_async(r.params["type"], std::move(std::get<0>(batch)),
                                [ex, added](Result<jobs::AddManyResult> s) {
                                  if (!s.ok()) return reply_status(*ex, s.status());
                                  reply_json(*ex, 200, {{"added", added}});
                                });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, {"id", "data", "scheduled_time", "priority"});
        const JsonBody* body = body_or_reply(parsed, *ex);
        if (!body) return;
        auto read = read_new_job(*body);
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& job = std::get<jobs::NewJob>(read);
        api.jobs.add_async(r.params["type"], job.id, job.data, job.options,
                           [ex, id = job.id](Result<jobs::AddResult> s) {
                             if (!s.ok()) return reply_status(*ex, s.status());
                             reply_json(*ex, 200, {{"id", id}});
                           });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add("GET", "/v1/jobs/{type}", [&api](Request& r, Ex ex) {
    jobs::ListOptions options;
    if (auto it = r.query.find("state"); it != r.query.end() && !it->second.empty()) {
      auto state = jobs::parse_state(it->second);
      if (!state.ok()) return reply_status(*ex, state.status());
      options.state = *state;
    }
    if (auto it = r.query.find("worker"); it != r.query.end()) options.worker = it->second;
    if (auto it = r.query.find("worker_type"); it != r.query.end())
      options.worker_type = it->second;
    if (auto it = r.query.find("cursor"); it != r.query.end()) options.cursor = it->second;
    auto limit = query_integer(r, "limit", 1, kMaxListLimit);
    if (!limit.ok()) return reply_error(*ex, *limit.error());
    if (limit.value()) options.limit = static_cast<size_t>(*limit.value());
    auto page = api.jobs.list(r.params["type"], options);
    if (!page.ok()) return reply_status(*ex, page.status());
    auto list = nlohmann::json::array();
    for (const auto& info : page->jobs) list.push_back(job_json(info));
    reply_json(*ex, 200, {{"jobs", list}, {"next_cursor", page->next_cursor}});
  });
  router.add("GET", "/v1/jobs/{type}/{id}", [&api](Request& r, Ex ex) {
    auto info = api.jobs.get(r.params["type"], r.params["id"]);
    if (!info.ok()) return reply_status(*ex, info.status());
    reply_json(*ex, 200, job_json(*info));
  });
  router.add("DELETE", "/v1/jobs/{type}/{id}", [&api](Request& r, Ex ex) {
    Status s = api.jobs.remove(r.params["type"], r.params["id"]);
    if (!s.ok()) return reply_status(*ex, s);
    reply_json(*ex, 200, nlohmann::json::object());
  });
}

// An accept's request body, checked.
struct AcceptRequest {
  jobs::AcceptOptions options;
  size_t count = 1;
};

std::variant<AcceptRequest, ApiError> read_accept(const JsonBody& body) {
  AcceptRequest a;
  auto timeout = seconds_field(body.number("timeout"), kMaxWaitSeconds, "timeout");
  auto worker = body.string("worker");
  auto worker_type = body.string("worker_type");
  auto max_priority = body.integer("max_priority");
  auto max_scheduled_time = body.integer("max_scheduled_time");
  auto count = body.integer("count", 1, kMaxAcceptCount);
  if (auto error =
          first_error(timeout, worker, worker_type, max_priority, max_scheduled_time, count))
    return *error;
  if (timeout.value()) a.options.timeout = *timeout.value();
  if (worker.value()) a.options.worker = *worker.value();
  if (worker_type.value()) a.options.worker_type = *worker_type.value();
  a.options.max_priority = max_priority.value();
  a.options.max_scheduled_time_ms = max_scheduled_time.value();
  a.count = static_cast<size_t>(count.value().value_or(1));
  return a;
}

void add_accept_route(Router& router, Api& api) {
  router.add(
      "POST", "/v1/accept/{type}",
      [&api](Request& r, Ex ex) {
        auto parsed = JsonBody::parse(r.body, {"timeout", "worker", "worker_type", "max_priority",
                                               "max_scheduled_time", "count"});
        const JsonBody* body = body_or_reply(parsed, *ex);
        if (!body) return;
        auto read = read_accept(*body);
        if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
        const auto& accept = std::get<AcceptRequest>(read);
        auto poll = LongPoll::create(api);
        auto done = [&api, ex, poll, type = r.params["type"],
                     started = kv::Clock::now()](Result<std::vector<jobs::Job>> taken) {
          poll->finish([&] {
            if (!taken.ok()) {
              const auto code = taken.status().code();
              if (code == Code::kDeadlineExceeded || code == Code::kCancelled)
                return ex->reply({204, ""});
              return reply_status(*ex, taken.status());
            }
            // The first job is the one the call may have waited for.
            auto list = nlohmann::json::array();
            for (const auto& job : *taken) {
              const auto waited =
                  list.empty() ? kv::Clock::now() - started : kv::Clock::duration::zero();
              api.metrics.accepted(type, std::chrono::duration<double>(waited).count());
              list.push_back(handle_json(job));
            }
            reply_json(*ex, 200, {{"jobs", list}});
          });
        };
        const uint64_t ticket =
            api.jobs.accept_batch_async(r.params["type"], accept.count, accept.options, done);
        // Giving up cancels the wait, whose kCancelled then answers 204.
        if (ticket)
          poll->arm(*ex, std::nullopt,
                    [&api, ticket](LongPoll&) { api.jobs.cancel_accept(ticket); });
      },
      Router::Access::kToken, Router::Runs::kInline);
}

void add_worker_call_routes(Router& router, Api& api) {
  struct Call {
    std::string lock;
    std::optional<std::string> data;
    std::optional<int64_t> scheduled_time;
  };
  auto read_call = [](Request& r, Exchange& ex, bool resubmit) -> std::optional<Call> {
    auto parsed = resubmit ? JsonBody::parse(r.body, {"lock", "data", "scheduled_time"})
                           : JsonBody::parse(r.body, {"lock", "data"});
    const JsonBody* body = body_or_reply(parsed, ex);
    if (!body) return std::nullopt;
    auto lock = body->string("lock");
    auto data = body->object_text("data");
    auto scheduled_time = resubmit ? body->integer("scheduled_time") : Field<int64_t>(std::nullopt);
    auto error = first_error(lock, data, scheduled_time);
    if (!error && (!lock.value() || lock.value()->empty()))
      error = invalid_argument("field 'lock' is required");
    if (error) {
      reply_error(ex, *error);
      return std::nullopt;
    }
    return Call{*lock.value(), data.value(), scheduled_time.value()};
  };
  router.add(
      "POST", "/v1/jobs/{type}/{id}/update",
      [&api, read_call](Request& r, Ex ex) {
        auto call = read_call(r, *ex, false);
        if (!call) return;
        jobs::Job job{r.params["type"], r.params["id"], call->lock, "", ""};
        api.jobs.update_async(job, {.progress = std::nullopt, .data = call->data},
                              [ex](Result<jobs::UpdateResult> result) {
                                if (!result.ok()) return reply_status(*ex, result.status());
                                reply_json(*ex, 200, {{"resubmitted", result->resubmitted}});
                              });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}/{id}/finish",
      [&api, read_call](Request& r, Ex ex) {
        auto call = read_call(r, *ex, false);
        if (!call) return;
        jobs::Job job{r.params["type"], r.params["id"], call->lock, "", ""};
        api.jobs.finish_async(job, {.result = std::nullopt, .data = call->data},
                              [&api, ex, type = job.type](Status s) {
                                if (!s.ok()) return reply_status(*ex, s);
                                api.metrics.finished(type);
                                reply_json(*ex, 200, nlohmann::json::object());
                              });
      },
      Router::Access::kToken, Router::Runs::kInline);
  router.add(
      "POST", "/v1/jobs/{type}/{id}/resubmit",
      [&api, read_call](Request& r, Ex ex) {
        auto call = read_call(r, *ex, true);
        if (!call) return;
        jobs::Job job{r.params["type"], r.params["id"], call->lock, "", ""};
        api.jobs.resubmit_async(
            job, {.scheduled_time_ms = call->scheduled_time, .data = call->data}, [ex](Status s) {
              if (!s.ok()) return reply_status(*ex, s);
              reply_json(*ex, 200, nlohmann::json::object());
            });
      },
      Router::Access::kToken, Router::Runs::kInline);
}

// A wait's query, checked.
struct WaitRequest {
  jobs::State state = jobs::State::kFinished;
  jobs::Millis timeout = std::chrono::seconds(30);
};

std::variant<WaitRequest, ApiError> read_wait(const Request& r) {
  WaitRequest w;
  auto timeout = seconds_field(query_number(r, "timeout"), kMaxWaitSeconds, "timeout");
  if (!timeout.ok()) return *timeout.error();
  if (timeout.value()) w.timeout = *timeout.value();
  if (auto it = r.query.find("state"); it != r.query.end() && !it->second.empty()) {
    auto state = jobs::parse_state(it->second);
    if (!state.ok()) return from_status(state.status());
    w.state = *state;
  }
  return w;
}

void add_watch_routes(Router& router, Api& api) {
  router.add("GET", "/v1/jobs/{type}/{id}/wait", [&api](Request& r, Ex ex) {
    auto read = read_wait(r);
    if (auto* e = std::get_if<ApiError>(&read)) return reply_error(*ex, *e);
    const auto& wait = std::get<WaitRequest>(read);
    // Following: a finished job may yet be added again, or go.
    auto sub = api.jobs.subscribe(r.params["type"], r.params["id"], {.follow = true});
    if (!sub.ok()) return reply_status(*ex, sub.status());
    std::shared_ptr<jobs::Subscription> shared = std::move(*sub);
    auto poll = LongPoll::create(api);
    poll->keep(shared);
    poll->arm(*ex, kv::Clock::now() + wait.timeout, [ex](LongPoll& p) {
      p.finish([&] { ex->reply({204, ""}); });
    });
    shared->wait_async(wait.state, [ex, poll](Result<jobs::JobEvent> e) {
      poll->finish([&] {
        if (!e.ok()) return reply_status(*ex, e.status());
        reply_json(*ex, 200, event_json(*e));
      });
    });
  });

  router.add("GET", "/v1/jobs/{type}/{id}/events", [&api](Request& r, Ex ex) {
    auto follow = query_boolean(r, "follow");
    if (!follow.ok()) return reply_error(*ex, *follow.error());
    const bool follows = follow.value().value_or(false);
    auto sub = api.jobs.subscribe(r.params["type"], r.params["id"], {.follow = follows});
    if (!sub.ok()) return reply_status(*ex, sub.status());
    std::shared_ptr<jobs::Subscription> shared = std::move(*sub);
    auto poll = LongPoll::create(api);
    poll->keep(shared);
    auto end = [ex](LongPoll& p) { p.finish([&] { ex->end_stream(); }); };
    ex->start_stream();
    ex->send_event("job", dump(event_json(shared->initial())));
    poll->arm(*ex, std::nullopt, end);
    if (shared->ended()) return end(*poll);  // it had finished, and the stream does not follow
    shared->on_event([ex, poll, end, follows](const jobs::JobEvent& e) {
      poll->while_open([&] { ex->send_event("job", dump(event_json(e))); });
      if (!e.found || (!follows && e.state == jobs::State::kFinished)) end(*poll);
    });
  });
}

}  // namespace

void add_job_routes(Router& router, Api& api) {
  add_producer_routes(router, api);
  add_accept_route(router, api);
  add_worker_call_routes(router, api);
  add_watch_routes(router, api);
}

}  // namespace kvq::server
