// cli/bench_load.cc — see bench_load.h.
#include "bench_load.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "output.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kStallLimit = std::chrono::seconds(120);

struct Shared {
  const BenchConfig& config;
  Clock::time_point epoch = Clock::now();
  std::atomic<int64_t> added{0};
  std::atomic<int64_t> finished{0};
  std::atomic<int64_t> halted{0};
  std::atomic<int64_t> retries{0};
  std::atomic<bool> stop{false};
  std::vector<std::atomic<bool>> done;  // per job index
  util::Mutex mu;
  std::optional<Response> failure KVQ_GUARDED_BY(mu);  // the first failed answer
  std::string failed_call KVQ_GUARDED_BY(mu);          // "add", "accept" or "finish"
  std::vector<double> latencies_ms KVQ_GUARDED_BY(mu);
  Clock::time_point first_add KVQ_GUARDED_BY(mu) = Clock::time_point::max();
  Clock::time_point last_finish KVQ_GUARDED_BY(mu) = Clock::time_point::min();

  explicit Shared(const BenchConfig& c) : config(c), done(static_cast<size_t>(c.jobs)) {}

  void fail(const char* call, Response response) KVQ_EXCLUDES(mu) {
    util::MutexLock lock(mu);
    if (!failure) {
      failure = std::move(response);
      failed_call = call;
    }
    stop = true;
  }
  int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - epoch).count();
  }
};

// Calls `call` until it returns a response that is not 503 unavailable (backing off), or the
// bench stops.
template <typename Call>
Response with_retries(Shared& shared, Call&& call) {
  for (int attempt = 0;; ++attempt) {
    Response r = call();
    if (r.status != 503 || shared.stop || attempt >= 50) return r;
    ++shared.retries;
    std::this_thread::sleep_for(milliseconds(std::min(200, 5 << std::min(attempt, 5))));
  }
}

// Adds jobs [begin, end), `batch` per request (POST /v1/jobs/{type}/batch when batch > 1).
void producer(const Invocation& inv, Shared& shared, int64_t begin, int64_t end) {
  Client client(inv.client->url(), inv.connection.token, inv.tls);
  const BenchConfig& config = shared.config;
  const std::string single = path("/v1/jobs", {config.type});
  const std::string batched = path("/v1/jobs", {config.type, "batch"});
  const size_t payload = static_cast<size_t>(config.payload);
  for (int64_t i = begin; i < end && !shared.stop;) {
    const auto started = Clock::now();
    {
      util::MutexLock lock(shared.mu);
      shared.first_add = std::min(shared.first_add, started);
    }
    Json list = Json::array();
    const int64_t stop_at = std::min<int64_t>(end, i + config.batch);
    for (; i < stop_at; ++i) {
      Json data = {{"i", i}, {"t_us", int64_t{0}}, {"pad", ""}};
      const size_t base = data.dump().size() + 16;  // t_us digits
      data["pad"] = std::string(payload > base ? payload - base : 0, 'x');
      data["t_us"] = shared.now_us();
      list.push_back({{"id", "job-" + std::to_string(i)}, {"data", std::move(data)}});
    }
    const size_t count = list.size();
    Response r = config.batch > 1
                     ? with_retries(shared,
                                    [&] {
                                      return client.post(batched, Json{{"jobs", list}});
                                    })
                     : with_retries(shared, [&] { return client.post(single, list[0]); });
    if (!r.ok()) return shared.fail("add", std::move(r));
    shared.added += count;
  }
}

// One worker thread's jobs in hand and what it measured.
struct WorkerState {
  std::vector<Json> held;   // accepted, not yet finished
  int64_t accepted_us = 0;  // when `held` arrived
  std::vector<double> latencies;
  Clock::time_point last = Clock::time_point::min();
};

// The finish of `job`, asking with "next" for the worker's next job when config.next. Its wait
// is 1 s while more jobs are still to be added than there are workers, and none after: near
// the end some workers' waits can find no job, and the finish they carry would be counted only
// when the wait ends (on etcd the last jobs of a run came in up to a second late that way).
// Returns false when the bench must stop.
bool finish_one(Client& client, Shared& shared, const Json& job, int64_t accepted_us,
                WorkerState& w) {
  const BenchConfig& config = shared.config;
  const std::string id = value_of(job, "id", std::string());
  const Json data = value_of(job, "data", Json());
  Json body = {{"lock", value_of(job, "lock", std::string())}};
  if (config.next)
    body["next"] = {{"timeout", config.jobs - shared.added.load() > config.workers ? 1 : 0}};
  Response f = with_retries(shared, [&] {
    return client.post(path("/v1/jobs", {config.type, id, "finish"}), body, milliseconds(20000));
  });
  if (f.status == 409 && f.error == "halted") {
    ++shared.halted;
    return true;
  }
  if (!f.ok()) {
    shared.fail("finish", std::move(f));
    return false;
  }
  const int64_t finished_us = shared.now_us();
  if (const Json next = value_of(f.body, "next", Json()); next.is_object()) {
    w.held.push_back(next);
    w.accepted_us = finished_us;
  }
  const int64_t index = value_of(data, "i", int64_t{-1});
  if (index < 0 || index >= config.jobs) return true;
  if (shared.done[static_cast<size_t>(index)].exchange(true)) return true;
  w.latencies.push_back(static_cast<double>(accepted_us - value_of(data, "t_us", accepted_us)) /
                        1000.0);
  w.last = Clock::now();
  ++shared.finished;
  return true;
}

void worker(const Invocation& inv, Shared& shared) {
  Client client(inv.client->url(), inv.connection.token, inv.tls);
  const BenchConfig& config = shared.config;
  const std::string accept = path("/v1/accept", {config.type});
  const Json accept_body = {{"timeout", 1}, {"count", config.batch}};
  WorkerState w;
  while (!shared.stop && shared.finished < config.jobs) {
    if (w.held.empty()) {
      Response r = with_retries(
          shared, [&] { return client.post(accept, accept_body, milliseconds(20000)); });
      if (!r.ok()) {
        shared.fail("accept", std::move(r));
        break;
      }
      if (r.status == 204) continue;
      w.accepted_us = shared.now_us();
      for (const auto& job : value_of(r.body, "jobs", Json::array())) w.held.push_back(job);
    }
    std::vector<Json> hand;
    hand.swap(w.held);
    const int64_t accepted_us = w.accepted_us;
    bool go_on = true;
    for (const auto& job : hand) {
      if (!(go_on = finish_one(client, shared, job, accepted_us, w))) break;
    }
    if (!go_on) break;
  }
  const auto& latencies = w.latencies;
  const Clock::time_point last = w.last;
  util::MutexLock lock(shared.mu);
  shared.latencies_ms.insert(shared.latencies_ms.end(), latencies.begin(), latencies.end());
  shared.last_finish = std::max(shared.last_finish, last);
}

void print_progress(const Shared& shared, bool final_line) {
  const long long jobs = static_cast<long long>(shared.config.jobs);
  const long long added = static_cast<long long>(shared.added.load());
  const long long finished = static_cast<long long>(shared.finished.load());
  if (final_line) {
    std::fprintf(stderr, "\r  added %lld/%lld  finished %lld/%lld%20s\n", added, jobs, finished,
                 jobs, "");
    return;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - shared.epoch).count();
  std::fprintf(stderr, "\r  added %lld/%lld  finished %lld/%lld  %.0f jobs/s   ", added, jobs,
               finished, jobs, secs > 0 ? static_cast<double>(finished) / secs : 0.0);
}

}  // namespace

BenchOutcome run_bench_load(const Invocation& inv, const BenchConfig& config,
                            const std::atomic<bool>& stop) {
  Shared shared(config);
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < config.workers; ++w) {
    threads.emplace_back(worker, std::cref(inv), std::ref(shared));
  }
  for (int64_t p = 0; p < config.producers; ++p) {
    const int64_t begin = config.jobs * p / config.producers;
    const int64_t end = config.jobs * (p + 1) / config.producers;
    threads.emplace_back(producer, std::cref(inv), std::ref(shared), begin, end);
  }

  BenchOutcome out;
  int64_t last_finished = -1;
  auto last_progress = Clock::now();
  while (shared.finished < config.jobs && !shared.stop && !stop) {
    std::this_thread::sleep_for(milliseconds(250));
    const int64_t finished = shared.finished;
    const auto now = Clock::now();
    if (finished != last_finished) {
      last_finished = finished;
      last_progress = now;
    } else if (now - last_progress > kStallLimit) {
      out.stall = "no job finished for 120 s (" + std::to_string(finished) + " of " +
                  std::to_string(config.jobs) + " done)";
      break;
    }
    print_progress(shared, false);
  }
  shared.stop = true;
  for (auto& t : threads) t.join();
  print_progress(shared, true);

  out.added = shared.added;
  out.finished = shared.finished;
  out.halted = shared.halted;
  out.retries = shared.retries;
  // Every thread has been joined: the lock only lets the analysis check these reads.
  util::MutexLock lock(shared.mu);
  out.failure = std::move(shared.failure);
  out.failed_call = std::move(shared.failed_call);
  out.latencies_ms = std::move(shared.latencies_ms);
  std::sort(out.latencies_ms.begin(), out.latencies_ms.end());
  // Until a job is both added and finished, the bounds are still their sentinels (max and min),
  // whose difference overflows: then no span was measured.
  out.seconds = 1e-9;
  if (shared.last_finish > shared.first_add) {
    const std::chrono::duration<double> span = shared.last_finish - shared.first_add;
    out.seconds = std::max(out.seconds, span.count());
  }
  return out;
}

}  // namespace kvq::cli
