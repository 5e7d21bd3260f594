// cli/commands_ops.cc — kvq top (live counts) and kvq bench (drives a server).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "commands.h"

namespace kvq::cli {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr char kTopUsage[] =
    "usage: kvq top [--interval SECONDS] [--once]\n"
    "\n"
    "Shows live job counts per type and state, refreshing every SECONDS (default 2).\n"
    "Counts come from the server's /metrics (kvq_jobs, counted up to 100,000 each); the\n"
    "accept and finish rates are those of the server process answering.\n"
    "  --once    print one table and exit (with --json: {\"types\": [...]})\n";

constexpr char kBenchUsage[] =
    "usage: kvq bench [--producers N] [--workers M] [--jobs J] [--type T] [--payload BYTES]\n"
    "                 [--batch B]\n"
    "\n"
    "Drives the server: sets T's timeout to 60 s, N producer threads (default 4) add J jobs\n"
    "(default 10000) of about BYTES of JSON each (default 200) to type T (default bench), B per\n"
    "request (the batch route when B > 1), and M worker threads (default 4) accept up to B at a\n"
    "time (default 1) and finish them. Prints\n"
    "the throughput from the first add to the last finish and the add->accept latency\n"
    "percentiles; --json prints {jobs, seconds, jobs_per_second, latency_ms: {p50, p90, p99},\n"
    "producers, workers, batch}. Each thread has its own connection (over TLS for https://,\n"
    "with one TLS configuration loaded once).\n";

struct TypeRow {
  std::string type;
  Json timeout;
  std::optional<double> pending, running, finished;
  std::optional<double> accepts, finishes;  // counters
};

// Collects one snapshot: the types, and their counts from /metrics (or /pending).
bool snapshot(Client& client, std::vector<TypeRow>* rows, std::string* error) {
  Response types = client.get("/v1/types");
  if (!types.ok()) {
    *error = types.describe();
    return false;
  }
  std::map<std::string, TypeRow> by_type;
  for (const auto& t : value_of(types.body, "types", Json::array())) {
    const std::string name = value_of(t, "type", std::string());
    by_type[name] = TypeRow{name, value_of(t, "timeout", Json()), std::nullopt, std::nullopt,
                            std::nullopt, std::nullopt, std::nullopt};
  }
  Response metrics = client.get("/metrics");
  bool have_gauge = false;
  if (metrics.ok()) {
    for (const auto& s : parse_metrics(metrics.text)) {
      auto type_it = s.labels.find("type");
      if (type_it == s.labels.end()) continue;
      TypeRow& row = by_type[type_it->second];
      row.type = type_it->second;
      if (s.name == "kvq_jobs") {
        have_gauge = true;
        const auto state = s.labels.find("state");
        if (state == s.labels.end()) continue;
        if (state->second == "pending") row.pending = s.value;
        if (state->second == "running") row.running = s.value;
        if (state->second == "finished") row.finished = s.value;
      } else if (s.name == "kvq_accepts_total") {
        row.accepts = s.value;
      } else if (s.name == "kvq_finishes_total") {
        row.finishes = s.value;
      }
    }
  }
  rows->clear();
  for (auto& [name, row] : by_type) {
    if (!have_gauge) {  // no usable /metrics: due pending jobs only
      Response p = client.get(path("/v1/types", {name}) + "/pending");
      if (p.ok()) row.pending = value_of(p.body, "pending", 0.0);
    } else {
      if (!row.pending) row.pending = 0;
      if (!row.running) row.running = 0;
      if (!row.finished) row.finished = 0;
    }
    rows->push_back(row);
  }
  return true;
}

std::string count_cell(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", *v);
  return buf;
}

std::string rate_cell(const std::optional<double>& now, const std::optional<double>& before,
                      double seconds) {
  if (!now || !before || seconds <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::max(0.0, *now - *before) / seconds);
  return buf;
}

std::string format_top(const std::vector<TypeRow>& rows, const std::vector<TypeRow>& previous,
                       double seconds) {
  std::map<std::string, const TypeRow*> prev;
  for (const auto& r : previous) prev[r.type] = &r;
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    const TypeRow* p = prev.count(r.type) ? prev[r.type] : nullptr;
    table.push_back({r.type,
                     r.timeout.is_number() ? format_seconds(r.timeout.get<double>()) : "-",
                     count_cell(r.pending), count_cell(r.running), count_cell(r.finished),
                     rate_cell(r.accepts, p ? p->accepts : std::nullopt, seconds),
                     rate_cell(r.finishes, p ? p->finishes : std::nullopt, seconds)});
  }
  if (table.empty()) return "no types\n";
  return format_table({"TYPE", "TIMEOUT", "PENDING", "RUNNING", "FINISHED", "ACCEPTS/S", "FINISHES/S"}, table);
}

Json top_json(const std::vector<TypeRow>& rows) {
  Json types = Json::array();
  for (const auto& r : rows) {
    Json t = {{"type", r.type}, {"timeout", r.timeout}};
    t["pending"] = r.pending ? Json(static_cast<int64_t>(*r.pending)) : Json();
    t["running"] = r.running ? Json(static_cast<int64_t>(*r.running)) : Json();
    t["finished"] = r.finished ? Json(static_cast<int64_t>(*r.finished)) : Json();
    types.push_back(std::move(t));
  }
  return Json{{"types", std::move(types)}};
}

}  // namespace

int run_top(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "top", kTopUsage, {{"interval", true}, {"once", false}}, 0,
                           0, &code);
  if (!inv) return code;
  double interval = 2;
  if (inv->args.has("interval")) {
    auto v = parse_double(inv->args.value("interval"));
    if (!v || *v <= 0) return inv->usage_error("--interval needs a number of seconds > 0");
    interval = *v;
  }
  const bool once = inv->args.flag("once");
  std::vector<TypeRow> rows, previous;
  auto previous_at = Clock::now();
  for (bool first = true;; first = false) {
    std::string error;
    const auto at = Clock::now();
    const bool ok = snapshot(*inv->client, &rows, &error);
    const double elapsed = std::chrono::duration<double>(at - previous_at).count();
    if (once) {
      if (!ok) {
        std::fprintf(stderr, "%s: %s\n", inv->name.c_str(), error.c_str());
        return kExitError;
      }
      if (inv->json) {
        print_json(top_json(rows));
      } else {
        std::fputs(format_top(rows, {}, 0).c_str(), stdout);
      }
      return kExitOk;
    }
    if (inv->json) {
      if (ok) print_json(top_json(rows));
      else std::fprintf(stderr, "%s: %s\n", inv->name.c_str(), error.c_str());
    } else {
      const auto wall = std::chrono::system_clock::now();
      std::string screen = "\x1b[H\x1b[2J";
      screen += "kvq top  " + inv->client->url().base + "  " +
                format_time_ms(std::chrono::duration_cast<milliseconds>(wall.time_since_epoch())
                                   .count()) +
                "  (every " + format_seconds(interval) + ", Ctrl-C to quit)\n\n";
      screen += ok ? format_top(rows, first ? std::vector<TypeRow>() : previous, elapsed)
                   : "error: " + error + "\n";
      std::fputs(screen.c_str(), stdout);
      std::fflush(stdout);
    }
    if (ok) {
      previous = rows;
      previous_at = at;
    }
    std::this_thread::sleep_for(milliseconds(static_cast<int64_t>(interval * 1000)));
  }
}

// ---- bench -----------------------------------------------------------------------------------

namespace {

struct BenchShared {
  int64_t jobs = 0;
  std::string type;
  std::string run;  // identifies this run's jobs
  Clock::time_point epoch;
  std::atomic<int64_t> added{0};
  std::atomic<int64_t> finished{0};
  std::atomic<int64_t> halted{0};
  std::atomic<int64_t> retries{0};
  std::atomic<bool> stop{false};
  std::vector<std::atomic<bool>> done;  // per job index
  std::mutex mu;
  std::string error;  // the first fatal error
  std::vector<double> latencies_ms;
  Clock::time_point first_add{Clock::time_point::max()};
  Clock::time_point last_finish{Clock::time_point::min()};

  explicit BenchShared(int64_t n) : jobs(n), done(static_cast<size_t>(n)) {}

  void fatal(const std::string& message) {
    std::lock_guard lock(mu);
    if (error.empty()) error = message;
    stop = true;
  }
  int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - epoch).count();
  }
};

// Calls `call` until it returns a response that is not 503 unavailable (backing off), or the
// bench stops.
template <typename Call>
Response with_retries(BenchShared& shared, Call&& call) {
  for (int attempt = 0;; ++attempt) {
    Response r = call();
    if (r.status != 503 || shared.stop || attempt >= 50) return r;
    ++shared.retries;
    std::this_thread::sleep_for(milliseconds(std::min(200, 5 << std::min(attempt, 5))));
  }
}

// Adds jobs [begin, end), `batch` per request (POST /v1/jobs/{type}/batch when batch > 1).
void producer(const Invocation& inv, BenchShared& shared, int64_t begin, int64_t end,
              size_t payload, int batch) {
  Client client(inv.client->url(), inv.connection.token, inv.tls);
  const std::string single = path("/v1/jobs", {shared.type});
  const std::string batched = path("/v1/jobs", {shared.type, "batch"});
  for (int64_t i = begin; i < end && !shared.stop;) {
    const auto started = Clock::now();
    {
      std::lock_guard lock(shared.mu);
      shared.first_add = std::min(shared.first_add, started);
    }
    Json list = Json::array();
    const int64_t stop_at = std::min<int64_t>(end, i + batch);
    for (; i < stop_at; ++i) {
      Json data = {{"run", shared.run}, {"i", i}, {"t_us", int64_t{0}}, {"pad", ""}};
      const size_t base = data.dump().size() + 16;  // t_us digits
      data["pad"] = std::string(payload > base ? payload - base : 0, 'x');
      data["t_us"] = shared.now_us();
      list.push_back({{"id", shared.run + "-" + std::to_string(i)}, {"data", std::move(data)}});
    }
    const size_t count = list.size();
    Response r = batch > 1 ? with_retries(shared, [&] { return client.post(batched, Json{{"jobs", list}}); })
                           : with_retries(shared, [&] { return client.post(single, list[0]); });
    if (!r.ok()) {
      shared.fatal("add: " + r.describe());
      return;
    }
    shared.added += count;
  }
}

void worker(const Invocation& inv, BenchShared& shared, int batch) {
  Client client(inv.client->url(), inv.connection.token, inv.tls);
  const std::string accept = path("/v1/accept", {shared.type});
  const Json accept_body = {{"timeout", 1}, {"count", batch}};
  std::vector<double> latencies;
  Clock::time_point last = Clock::time_point::min();
  while (!shared.stop && shared.finished < shared.jobs) {
    Response r = with_retries(shared, [&] { return client.post(accept, accept_body, milliseconds(20000)); });
    if (!r.ok()) {
      shared.fatal("accept: " + r.describe());
      break;
    }
    if (r.status == 204) continue;
    const int64_t accepted_us = shared.now_us();
    for (const auto& job : value_of(r.body, "jobs", Json::array())) {
      const std::string id = value_of(job, "id", std::string());
      const Json data = value_of(job, "data", Json());
      const bool ours = value_of(data, "run", std::string()) == shared.run;
      const Json body = {{"lock", value_of(job, "lock", std::string())}};
      Response f = with_retries(shared, [&] {
        return client.post(path("/v1/jobs", {shared.type, id, "finish"}), body);
      });
      if (f.status == 409 && f.error == "halted") {
        ++shared.halted;
        continue;
      }
      if (!f.ok()) {
        shared.fatal("finish: " + f.describe());
        break;
      }
      if (!ours) continue;  // a leftover from an earlier run: cleared, not counted
      const int64_t index = value_of(data, "i", int64_t{-1});
      if (index < 0 || index >= shared.jobs) continue;
      if (shared.done[static_cast<size_t>(index)].exchange(true)) continue;
      latencies.push_back(
          static_cast<double>(accepted_us - value_of(data, "t_us", accepted_us)) / 1000.0);
      last = Clock::now();
      ++shared.finished;
    }
  }
  std::lock_guard lock(shared.mu);
  shared.latencies_ms.insert(shared.latencies_ms.end(), latencies.begin(), latencies.end());
  shared.last_finish = std::max(shared.last_finish, last);
}

std::string random_run_id() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "bench-%08x", rd());
  return buf;
}

}  // namespace

int run_bench(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "bench", kBenchUsage,
                           {{"producers", true},
                            {"workers", true},
                            {"jobs", true},
                            {"type", true},
                            {"payload", true},
                            {"batch", true}},
                           0, 0, &code);
  if (!inv) return code;
  auto number = [&](const char* name, int64_t fallback, int64_t lo, int64_t hi,
                    int64_t* out) -> bool {
    *out = fallback;
    if (!inv->args.has(name)) return true;
    auto v = parse_int(inv->args.value(name));
    if (!v || *v < lo || *v > hi) return false;
    *out = *v;
    return true;
  };
  int64_t producers, workers, jobs, payload, batch;
  if (!number("producers", 4, 1, 1024, &producers)) return inv->usage_error("--producers: 1-1024");
  if (!number("workers", 4, 1, 1024, &workers)) return inv->usage_error("--workers: 1-1024");
  if (!number("jobs", 10000, 1, 100'000'000, &jobs)) return inv->usage_error("--jobs: 1-1e8");
  if (!number("payload", 200, 0, 200'000, &payload)) return inv->usage_error("--payload: 0-200000");
  if (!number("batch", 1, 1, 100, &batch)) return inv->usage_error("--batch: 1-100");
  const std::string type = inv->args.value("type", "bench");

  Response set = inv->client->put(path("/v1/types", {type}), Json{{"timeout", 60}});
  if (!set.ok()) return inv->fail(set);

  BenchShared shared(jobs);
  shared.type = type;
  shared.run = random_run_id();
  shared.epoch = Clock::now();
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w) {
    threads.emplace_back(worker, std::cref(*inv), std::ref(shared), static_cast<int>(batch));
  }
  for (int64_t p = 0; p < producers; ++p) {
    const int64_t begin = jobs * p / producers, end = jobs * (p + 1) / producers;
    threads.emplace_back(producer, std::cref(*inv), std::ref(shared), begin, end,
                         static_cast<size_t>(payload), static_cast<int>(batch));
  }

  // Progress, and a stall guard: no job finished for 120 s ends the bench.
  int64_t last_finished = -1;
  auto last_progress = Clock::now();
  while (shared.finished < jobs && !shared.stop) {
    std::this_thread::sleep_for(milliseconds(250));
    const int64_t finished = shared.finished;
    const auto now = Clock::now();
    if (finished != last_finished) {
      last_finished = finished;
      last_progress = now;
    } else if (now - last_progress > std::chrono::seconds(120)) {
      shared.fatal("no job finished for 120 s (" + std::to_string(finished) + " of " +
                   std::to_string(jobs) + " done)");
    }
    const double secs = std::chrono::duration<double>(now - shared.epoch).count();
    std::fprintf(stderr, "\r  added %lld/%lld  finished %lld/%lld  %.0f jobs/s   ",
                 static_cast<long long>(shared.added.load()), static_cast<long long>(jobs),
                 static_cast<long long>(finished), static_cast<long long>(jobs),
                 secs > 0 ? static_cast<double>(finished) / secs : 0.0);
  }
  shared.stop = true;
  for (auto& t : threads) t.join();
  std::fprintf(stderr, "\r  added %lld/%lld  finished %lld/%lld%20s\n",
               static_cast<long long>(shared.added.load()), static_cast<long long>(jobs),
               static_cast<long long>(shared.finished.load()), static_cast<long long>(jobs), "");
  if (!shared.error.empty()) {
    std::fprintf(stderr, "%s: %s\n", inv->name.c_str(), shared.error.c_str());
    return kExitError;
  }

  std::sort(shared.latencies_ms.begin(), shared.latencies_ms.end());
  const double seconds =
      std::max(1e-9, std::chrono::duration<double>(shared.last_finish - shared.first_add).count());
  const double rate = static_cast<double>(jobs) / seconds;
  const double p50 = percentile(shared.latencies_ms, 50);
  const double p90 = percentile(shared.latencies_ms, 90);
  const double p99 = percentile(shared.latencies_ms, 99);
  if (inv->json) {
    print_json(Json{{"jobs", jobs},
                    {"seconds", seconds},
                    {"jobs_per_second", rate},
                    {"latency_ms", {{"p50", p50}, {"p90", p90}, {"p99", p99}}},
                    {"producers", producers},
                    {"workers", workers},
                    {"batch", batch},
                    {"payload", payload},
                    {"type", type},
                    {"halted", shared.halted.load()},
                    {"retries", shared.retries.load()}});
  } else {
    std::printf("bench: %lld jobs of ~%lld bytes on type %s, %lld producers, %lld workers, "
                "batch %lld\n",
                static_cast<long long>(jobs), static_cast<long long>(payload), type.c_str(),
                static_cast<long long>(producers), static_cast<long long>(workers),
                static_cast<long long>(batch));
    std::printf("  time:        %.3f s (first add to last finish)\n", seconds);
    std::printf("  throughput:  %.0f jobs/s\n", rate);
    std::printf("  add->accept: p50 %.2f ms  p90 %.2f ms  p99 %.2f ms\n", p50, p90, p99);
    if (shared.halted > 0 || shared.retries > 0) {
      std::printf("  halted finishes: %lld  retries (503): %lld\n",
                  static_cast<long long>(shared.halted.load()),
                  static_cast<long long>(shared.retries.load()));
    }
  }
  return kExitOk;
}

}  // namespace kvq::cli
