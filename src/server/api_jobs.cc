// The job routes: producers, workers' job calls, and watching jobs.
#include <cmath>

#include "server/api.h"
#include "server/json_body.h"

namespace kvq::server {
namespace {

using Ex = std::shared_ptr<Exchange>;
constexpr double kMaxWaitSeconds = 300;
constexpr size_t kMaxBatchAdd = 1000;
constexpr int64_t kMaxAcceptCount = 100;
constexpr int64_t kMaxListLimit = 10000;

// The body of one job to add, checked.
struct NewJob {
  std::string id;
  std::string data = "{}";
  jobs::AddOptions options;
};

std::optional<NewJob> read_new_job(const JsonBody& body, ApiError* error) {
  NewJob job;
  auto id = body.string("id", error);
  auto data = body.object_text("data", error);
  auto at = body.integer("scheduled_time", error);
  auto priority = body.integer("priority", error);
  if (error->status) return std::nullopt;
  if (!id) {
    *error = invalid_argument("field 'id' is required");
    return std::nullopt;
  }
  job.id = *id;
  if (data) job.data = *data;
  job.options.scheduled_time_ms = at;
  if (priority) job.options.priority = *priority;
  return job;
}

// A worker call's lock check and error refinement: a fenced worker hears "halted".
void reply_worker_status(Exchange& ex, const Status& s) {
  if (s.code() == Code::kFailedPrecondition) return reply_error(ex, {409, "halted", s.message()});
  reply_status(ex, s);
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
  router.add("POST", "/v1/jobs/{type}/batch", [&api](Request& r, Ex ex) {
    auto parsed = JsonBody::parse(r.body, {"jobs"});
    const JsonBody* body = body_or_reply(parsed, *ex);
    if (!body) return;
    const auto& list = body->json().value("jobs", nlohmann::json());
    if (!list.is_array() || list.empty() || list.size() > kMaxBatchAdd) {
      return reply_error(*ex, invalid_argument("'jobs' must be an array of 1 to 1000 jobs"));
    }
    std::vector<NewJob> batch;
    for (const auto& item : list) {
      if (!item.is_object()) return reply_error(*ex, invalid_argument("each entry of 'jobs' must be an object"));
      for (const auto& [key, value] : item.items()) {
        if (key != "id" && key != "data" && key != "scheduled_time" && key != "priority") {
          return reply_error(*ex, unknown_field("a job does not take a field '" + key + "'"));
        }
      }
      ApiError error{0, "", ""};
      auto job = read_new_job(JsonBody(item), &error);
      if (error.status) return reply_error(*ex, error);
      batch.push_back(std::move(*job));
    }
    // Shared by the tries of one transaction (a retry may run on another thread).
    auto jobs = std::make_shared<const std::vector<NewJob>>(std::move(batch));
    kv::run_async(api.store, [&api, jobs, type = r.params["type"]](kv::Transaction& txn) -> Status {
      for (const auto& job : *jobs) KVQ_RETURN_IF_ERROR(api.jobs.add(txn, type, job.id, job.data, job.options));
      return Status::OK();
    }, [ex, added = jobs->size()](Status s) {
      if (s.code() == Code::kFailedPrecondition) return reply_error(*ex, {409, "no_timeout", s.message()});
      if (!s.ok()) return reply_status(*ex, s);
      reply_json(*ex, 200, {{"added", added}});
    });
  }, Router::Access::kToken, Router::Runs::kInline);
  router.add("POST", "/v1/jobs/{type}", [&api](Request& r, Ex ex) {
    auto parsed = JsonBody::parse(r.body, {"id", "data", "scheduled_time", "priority"});
    const JsonBody* body = body_or_reply(parsed, *ex);
    if (!body) return;
    ApiError error{0, "", ""};
    auto job = read_new_job(*body, &error);
    if (error.status) return reply_error(*ex, error);
    api.jobs.add_async(r.params["type"], job->id, job->data, job->options, [ex, id = job->id](Status s) {
      if (s.code() == Code::kFailedPrecondition) return reply_error(*ex, {409, "no_timeout", s.message()});
      if (!s.ok()) return reply_status(*ex, s);
      reply_json(*ex, 200, {{"id", id}});
    });
  }, Router::Access::kToken, Router::Runs::kInline);
  router.add("GET", "/v1/jobs/{type}", [&api](Request& r, Ex ex) {
    jobs::ListOptions options;
    ApiError error{0, "", ""};
    if (auto it = r.query.find("state"); it != r.query.end() && !it->second.empty()) {
      auto state = jobs::parse_state(it->second);
      if (!state.ok()) return reply_status(*ex, state.status());
      options.state = *state;
    }
    if (auto it = r.query.find("worker"); it != r.query.end()) options.worker = it->second;
    if (auto it = r.query.find("worker_type"); it != r.query.end()) options.worker_type = it->second;
    if (auto it = r.query.find("cursor"); it != r.query.end()) options.cursor = it->second;
    auto limit = query_integer(r, "limit", 1, kMaxListLimit, &error);
    if (error.status) return reply_error(*ex, error);
    if (limit) options.limit = static_cast<size_t>(*limit);
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

void add_accept_route(Router& router, Api& api) {
  router.add("POST", "/v1/accept/{type}", [&api](Request& r, Ex ex) {
    auto parsed = JsonBody::parse(r.body, {"timeout", "worker", "worker_type", "max_priority", "max_scheduled_time", "count"});
    const JsonBody* body = body_or_reply(parsed, *ex);
    if (!body) return;
    ApiError error{0, "", ""};
    jobs::AcceptOptions options;
    auto timeout = seconds_field(body->number("timeout", &error), kMaxWaitSeconds, "timeout", &error);
    auto worker = body->string("worker", &error);
    auto worker_type = body->string("worker_type", &error);
    auto max_priority = body->integer("max_priority", &error);
    auto max_time = body->integer("max_scheduled_time", &error);
    auto count = body->integer("count", &error, 1, kMaxAcceptCount);
    if (error.status) return reply_error(*ex, error);
    if (timeout) options.timeout = *timeout;
    if (worker) options.worker = *worker;
    if (worker_type) options.worker_type = *worker_type;
    options.max_priority = max_priority;
    options.max_scheduled_time_ms = max_time;
    const std::string type = r.params["type"];
    const int64_t want = count.value_or(1);
    const auto started = kv::Clock::now();

    struct Wait {
      std::mutex mu;
      bool done = false;
      uint64_t ticket = 0;
      uint64_t held = 0;
    };
    auto wait = std::make_shared<Wait>();
    // Up to `n` jobs due now, taken in one transaction, appended to `list`; then `then` gets
    // any error other than "none due". Never blocks on a nonblocking store; elsewhere it runs on
    // the pool (this route does, and so does `after_first`).
    auto take_due = [&api, type, options](nlohmann::json list, int64_t n,
                                          std::function<void(nlohmann::json, Status)> then) {
      api.jobs.accept_due_async(type, static_cast<size_t>(n), options,
                                [&api, type, list = std::move(list), then](Result<std::vector<jobs::Job>> due) mutable {
                                  if (!due.ok()) {
                                    const bool none = due.status().code() == Code::kDeadlineExceeded;
                                    return then(std::move(list), none ? Status::OK() : due.status());
                                  }
                                  for (const auto& job : *due) {
                                    api.metrics.accepted(type, 0);
                                    list.push_back(handle_json(job));
                                  }
                                  then(std::move(list), Status::OK());
                                });
    };
    // The first job's callback may run where its commit settled, which must not block (kv.h):
    // taking the rest waits for a commit only on a store that is not nonblocking.
    auto after_first = [&api, ex](std::function<void()> rest) {
      if (api.store.nonblocking()) return rest();
      ex->offload(std::move(rest));
    };
    auto complete = [&api, ex, type, want, started, wait, take_due, after_first](Result<jobs::Job> first) {
      {
        std::lock_guard lock(wait->mu);
        if (wait->done) return;
        wait->done = true;
        if (wait->held) api.release(wait->held);
      }
      if (!first.ok()) {
        const auto code = first.status().code();
        if (code == Code::kDeadlineExceeded || code == Code::kCancelled) return ex->reply({204, ""});
        return reply_status(*ex, first.status());
      }
      auto list = nlohmann::json::array({handle_json(*first)});
      api.metrics.accepted(type, std::chrono::duration<double>(kv::Clock::now() - started).count());
      if (want == 1) return reply_json(*ex, 200, {{"jobs", list}});
      after_first([ex, want, take_due, list = std::move(list)]() mutable {
        // The first is handed out already: a failure to take more still answers with it.
        take_due(std::move(list), want - 1, [ex](nlohmann::json all, Status) { reply_json(*ex, 200, {{"jobs", all}}); });
      });
    };
    auto queue = [&api, ex, type, options, wait, complete] {
      const uint64_t ticket = api.jobs.accept_async(type, options, complete);
      if (ticket == 0) return;  // already answered
      std::lock_guard lock(wait->mu);
      if (wait->done) return;
      wait->ticket = ticket;
      wait->held = api.hold([&api, ticket] { api.jobs.cancel_accept(ticket); });
      ex->on_disconnect([&api, ticket] { api.jobs.cancel_accept(ticket); });
    };
    if (want == 1 && options.timeout.count() > 0) return queue();
    // Whatever is due now, in one transaction; only when nothing is (and the caller waits), wait
    // for the first.
    take_due(nlohmann::json::array(), want, [ex, queue, waits = options.timeout.count() > 0](nlohmann::json list, Status s) {
      if (!s.ok()) return reply_status(*ex, s);
      if (!list.empty()) return reply_json(*ex, 200, {{"jobs", list}});
      if (!waits) return ex->reply({204, ""});
      queue();
    });
  }, Router::Access::kToken, Router::Runs::kInline);
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
    ApiError error{0, "", ""};
    Call call;
    auto lock = body->string("lock", &error);
    call.data = body->object_text("data", &error);
    if (resubmit) call.scheduled_time = body->integer("scheduled_time", &error);
    if (!error.status && (!lock || lock->empty())) error = invalid_argument("field 'lock' is required");
    if (error.status) {
      reply_error(ex, error);
      return std::nullopt;
    }
    call.lock = *lock;
    return call;
  };
  router.add("POST", "/v1/jobs/{type}/{id}/update", [&api, read_call](Request& r, Ex ex) {
    auto call = read_call(r, *ex, false);
    if (!call) return;
    jobs::Job job{r.params["type"], r.params["id"], call->lock, "", ""};
    api.jobs.update_async(job, call->data, [ex](Result<jobs::UpdateResult> result) {
      if (!result.ok()) return reply_worker_status(*ex, result.status());
      reply_json(*ex, 200, {{"resubmitted", result->resubmitted}});
    });
  }, Router::Access::kToken, Router::Runs::kInline);
  router.add("POST", "/v1/jobs/{type}/{id}/finish", [&api, read_call](Request& r, Ex ex) {
    auto call = read_call(r, *ex, false);
    if (!call) return;
    jobs::Job job{r.params["type"], r.params["id"], call->lock, "", ""};
    api.jobs.finish_async(job, call->data, [&api, ex, type = job.type](Status s) {
      if (!s.ok()) return reply_worker_status(*ex, s);
      api.metrics.finished(type);
      reply_json(*ex, 200, nlohmann::json::object());
    });
  }, Router::Access::kToken, Router::Runs::kInline);
  router.add("POST", "/v1/jobs/{type}/{id}/resubmit", [&api, read_call](Request& r, Ex ex) {
    auto call = read_call(r, *ex, true);
    if (!call) return;
    jobs::Job job{r.params["type"], r.params["id"], call->lock, "", ""};
    api.jobs.resubmit_async(job, {.scheduled_time_ms = call->scheduled_time, .data = call->data}, [ex](Status s) {
      if (!s.ok()) return reply_worker_status(*ex, s);
      reply_json(*ex, 200, nlohmann::json::object());
    });
  }, Router::Access::kToken, Router::Runs::kInline);
}

// State shared by a wait or an event stream and the callbacks that feed it.
struct Watcher {
  std::mutex mu;
  std::shared_ptr<jobs::Subscription> sub;
  bool done = false;
  uint64_t timer = 0;
  uint64_t held = 0;
};

// Unsubscribes off the calling thread: the caller may be the subscription's own listener.
void release_later(Api& api, std::shared_ptr<jobs::Subscription> sub) {
  if (sub) api.timers.at(kv::Clock::now(), [sub = std::move(sub)] {});
}

void add_watch_routes(Router& router, Api& api) {
  router.add("GET", "/v1/jobs/{type}/{id}/wait", [&api](Request& r, Ex ex) {
    ApiError error{0, "", ""};
    auto timeout = seconds_field(query_number(r, "timeout", &error), kMaxWaitSeconds, "timeout", &error);
    if (error.status) return reply_error(*ex, error);
    jobs::State want = jobs::State::kFinished;
    if (auto it = r.query.find("state"); it != r.query.end() && !it->second.empty()) {
      auto parsed = jobs::parse_state(it->second);
      if (!parsed.ok()) return reply_status(*ex, parsed.status());
      want = *parsed;
    }
    auto sub = api.jobs.subscribe(r.params["type"], r.params["id"]);
    if (!sub.ok()) return reply_status(*ex, sub.status());
    auto w = std::make_shared<Watcher>();
    // Completes the wait once: with an event, or 204 (nullopt) at the deadline or shutdown.
    auto finish = [&api, ex, w](std::optional<jobs::JobEvent> event) {
      std::shared_ptr<jobs::Subscription> drop;
      {
        std::lock_guard lock(w->mu);
        if (w->done) return;
        w->done = true;
        drop = std::move(w->sub);
        if (w->timer) api.timers.cancel(w->timer);
        if (w->held) api.release(w->held);
      }
      release_later(api, std::move(drop));
      if (event) reply_json(*ex, 200, event_json(*event));
      else ex->reply({204, ""});
    };
    auto check = [w, want, finish] {
      std::optional<jobs::JobEvent> hit;
      {
        std::lock_guard lock(w->mu);
        if (w->done || !w->sub) return;
        auto e = w->sub->wait(want, kv::Clock::now());
        if (e.ok()) hit = *e;
      }
      if (hit) finish(hit);
    };
    std::shared_ptr<jobs::Subscription> keep = std::move(*sub);
    {
      std::lock_guard lock(w->mu);
      w->sub = keep;
    }
    keep->set_listener(check);  // may complete the wait at once
    {
      std::lock_guard lock(w->mu);
      if (w->done) return;
      w->timer = api.timers.at(kv::Clock::now() + timeout.value_or(std::chrono::seconds(30)), [finish] { finish(std::nullopt); });
      w->held = api.hold([finish] { finish(std::nullopt); });
    }
    check();
    ex->on_disconnect([finish] { finish(std::nullopt); });
  });

  router.add("GET", "/v1/jobs/{type}/{id}/events", [&api](Request& r, Ex ex) {
    auto sub = api.jobs.subscribe(r.params["type"], r.params["id"]);
    if (!sub.ok()) return reply_status(*ex, sub.status());
    auto w = std::make_shared<Watcher>();
    auto end = [&api, ex, w] {
      std::shared_ptr<jobs::Subscription> drop;
      {
        std::lock_guard lock(w->mu);
        if (w->done) return;
        w->done = true;
        drop = std::move(w->sub);
        if (w->held) api.release(w->held);
      }
      release_later(api, std::move(drop));
      ex->end_stream();
    };
    // Sends whatever is queued; ends the stream after the final event.
    auto pump = [ex, w, end] {
      bool final = false;
      {
        std::lock_guard lock(w->mu);
        if (w->done || !w->sub) return;
        for (;;) {
          auto e = w->sub->next(kv::Clock::now());
          if (!e.ok()) {
            final = e.status().code() == Code::kNotFound;
            break;
          }
          ex->send_event("job", dump(event_json(*e)));
          if (!e->found || e->state == jobs::State::kFinished) {
            final = true;
            break;
          }
        }
      }
      if (final) end();
    };
    ex->start_stream();
    const jobs::JobEvent initial = (*sub)->initial();
    ex->send_event("job", dump(event_json(initial)));
    std::shared_ptr<jobs::Subscription> keep = std::move(*sub);
    {
      std::lock_guard lock(w->mu);
      w->sub = keep;
      w->held = api.hold(end);
    }
    if (initial.state == jobs::State::kFinished) return end();
    keep->set_listener(pump);
    pump();
    ex->on_disconnect(end);
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
