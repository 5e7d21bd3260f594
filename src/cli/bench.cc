// cli/bench.cc — kvq bench: load-tests a server on a type of its own, and removes that type and
// its jobs when it ends, however it ends (done, failed, Ctrl-C or SIGTERM), so that it leaves the
// server's types as it found them.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>

#include "bench_load.h"
#include "commands.h"
#include "invocation.h"
#include "output.h"
#include "stats.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kBenchUsage[] =
    "usage: kvq bench [--producers N] [--workers M] [--jobs J] [--payload BYTES] [--batch B]\n"
    "                 [--type T] [--no-next]\n"
    "\n"
    "Load-tests the server on a type of its own: creates type T (default kvq-bench-XXXXXXXX,\n"
    "random) with a 60 s timeout; N producer threads (default 4) add J jobs (default 10000) of\n"
    "about BYTES of JSON each (default 200), B per request (the batch route when B > 1), and M\n"
    "worker threads (default 4) accept up to B at a time (default 1) and finish them. With B 1\n"
    "a worker finishes each job and takes its next in one request (finish with \"next\"): one\n"
    "request and one commit per job; --no-next (or B > 1) keeps two, an accept and a finish.\n"
    "A T that exists already is refused (exit 2): the bench never touches real work.\n"
    "When it ends, done or not (a failed call, Ctrl-C, SIGTERM), it removes T's jobs and then T\n"
    "(DELETE /v1/types/T/jobs, DELETE /v1/types/T); if that fails it says so, and\n"
    "kvq types rm T --with-jobs finishes it. Exit 130 when interrupted (after the cleanup).\n"
    "\n"
    "Prints the throughput from the first add to the last finish and the add->accept latency\n"
    "percentiles; --json prints {jobs, seconds, jobs_per_second, latency_ms: {p50, p90, p99},\n"
    "producers, workers, batch, next, payload, type, halted, retries}. Each thread has its own\n"
    "connection (over TLS for https://, with one TLS configuration loaded once).\n";

constexpr std::chrono::milliseconds kClearJobsTimeout{300'000};

// Set by SIGINT and SIGTERM while a bench runs; a lock-free atomic, so a handler may store it.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_interrupt(int) { g_interrupted.store(true); }

// Catches SIGINT and SIGTERM for its lifetime, once each: a second one acts as usual (ends the
// process), for a user who will not wait for the cleanup.
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

std::string random_type_name() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "kvq-bench-%08x", rd());
  return buf;
}

// --NAME as an integer in [lo, hi], `fallback` when absent.
Result<int64_t> bounded_option(const Invocation& inv, const char* name, int64_t fallback,
                               int64_t lo, int64_t hi, const char* range) {
  if (!inv.args.has(name)) return fallback;
  auto v = parse_int(inv.args.value(name));
  if (!v || *v < lo || *v > hi) return InvalidArgument(std::string("--") + name + ": " + range);
  return *v;
}

Result<BenchConfig> parse_config(const Invocation& inv) {
  BenchConfig c;
  KVQ_ASSIGN_OR_RETURN(c.producers, bounded_option(inv, "producers", 4, 1, 1024, "1-1024"));
  KVQ_ASSIGN_OR_RETURN(c.workers, bounded_option(inv, "workers", 4, 1, 1024, "1-1024"));
  KVQ_ASSIGN_OR_RETURN(c.jobs, bounded_option(inv, "jobs", 10000, 1, 100'000'000, "1-1e8"));
  KVQ_ASSIGN_OR_RETURN(c.payload, bounded_option(inv, "payload", 200, 0, 200'000, "0-200000"));
  KVQ_ASSIGN_OR_RETURN(c.batch, bounded_option(inv, "batch", 1, 1, 100, "1-100"));
  c.next = !inv.args.flag("no-next") && c.batch == 1;
  c.type = inv.args.has("type") ? inv.args.value("type") : random_type_name();
  if (c.type.empty()) return InvalidArgument("--type needs a name");
  return c;
}

// What the cleanup did: how many jobs it removed, or the answer that stopped it.
struct Cleanup {
  int64_t removed = 0;
  std::optional<Response> failure;
};

// Removes every job of `type`, then `type`; again when a job slipped in between (409
// type_has_jobs), up to three rounds. A type that is already gone (404 not_found) is removed.
// When the jobs cannot be removed the type is left alone, for deleting it would orphan them.
Cleanup remove_bench_type(const Invocation& inv, const std::string& type) {
  Cleanup out;
  for (int round = 0;; ++round) {
    Response cleared = inv.client->del(path("/v1/types", {type, "jobs"}), kClearJobsTimeout);
    const bool gone = cleared.status == 404 && cleared.error == "not_found";
    if (!cleared.ok() && !gone) {
      out.failure = std::move(cleared);
      return out;
    }
    out.removed += value_of(cleared.body, "removed", int64_t{0});
    Response r = inv.client->del(path("/v1/types", {type}));
    if (r.ok() || (r.status == 404 && r.error == "not_found")) return out;
    if (r.error != "type_has_jobs" || round >= 2) {
      out.failure = std::move(r);
      return out;
    }
  }
}

void print_report(const Invocation& inv, const BenchConfig& c, const BenchOutcome& o) {
  const double rate = static_cast<double>(c.jobs) / o.seconds;
  const double p50 = percentile(o.latencies_ms, 50);
  const double p90 = percentile(o.latencies_ms, 90);
  const double p99 = percentile(o.latencies_ms, 99);
  if (inv.json) {
    print_json(Json{{"jobs", c.jobs},
                    {"seconds", o.seconds},
                    {"jobs_per_second", rate},
                    {"latency_ms", {{"p50", p50}, {"p90", p90}, {"p99", p99}}},
                    {"producers", c.producers},
                    {"workers", c.workers},
                    {"batch", c.batch},
                    {"next", c.next},
                    {"payload", c.payload},
                    {"type", c.type},
                    {"halted", o.halted},
                    {"retries", o.retries}});
    return;
  }
  std::printf(
      "bench: %lld jobs of ~%lld bytes on type %s, %lld producers, %lld workers, "
      "batch %lld, %s\n",
      static_cast<long long>(c.jobs), static_cast<long long>(c.payload), c.type.c_str(),
      static_cast<long long>(c.producers), static_cast<long long>(c.workers),
      static_cast<long long>(c.batch), c.next ? "finish with next" : "accept then finish");
  std::printf("  time:        %.3f s (first add to last finish)\n", o.seconds);
  std::printf("  throughput:  %.0f jobs/s\n", rate);
  std::printf("  add->accept: p50 %.2f ms  p90 %.2f ms  p99 %.2f ms\n", p50, p90, p99);
  if (o.halted > 0 || o.retries > 0) {
    std::printf("  halted finishes: %lld  retries (503): %lld\n", static_cast<long long>(o.halted),
                static_cast<long long>(o.retries));
  }
}

// Creates the type and runs the load; returns the exit code so far (the cleanup follows).
int create_and_load(const Invocation& inv, const BenchConfig& config) {
  Response set = inv.client->put(path("/v1/types", {config.type}), Json{{"timeout", 60}});
  if (!set.ok()) return inv.fail(set);
  BenchOutcome outcome = run_bench_load(inv, config, g_interrupted);
  if (g_interrupted) return kExitInterrupted;
  if (outcome.failure) {
    const Response& r = *outcome.failure;
    std::fprintf(stderr, "%s: %s: %s\n", inv.name.c_str(), outcome.failed_call.c_str(),
                 r.describe().c_str());
    return exit_code_for(r.status, r.error);
  }
  if (!outcome.stall.empty()) {
    std::fprintf(stderr, "%s: %s\n", inv.name.c_str(), outcome.stall.c_str());
    return kExitError;
  }
  print_report(inv, config, outcome);
  return kExitOk;
}

}  // namespace

int run_bench(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "bench", kBenchUsage,
                             {{"producers", true},
                              {"workers", true},
                              {"jobs", true},
                              {"type", true},
                              {"payload", true},
                              {"batch", true},
                              {"no-next", false}},
                             0, 0);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto config = parse_config(inv);
  if (!config.ok()) return inv.usage_error(config.status().message());
  const std::string& type = config->type;

  Response existing = inv.client->get(path("/v1/types", {type}));
  if (existing.ok()) {
    return inv.usage_error("type " + type +
                           " exists already; kvq bench makes and removes a type of its own: "
                           "give --type a new name, or leave it out");
  }
  if (!(existing.status == 404 && existing.error == "not_found")) return inv.fail(existing);

  g_interrupted = false;
  InterruptGuard guard;
  int code = create_and_load(inv, *config);
  if (code == kExitInterrupted) {
    std::fprintf(stderr, "%s: interrupted; removing type %s and its jobs\n", inv.name.c_str(),
                 type.c_str());
  }
  const Cleanup cleanup = remove_bench_type(inv, type);
  if (cleanup.failure) {
    // On stderr only: with --json, stdout holds the report.
    std::fprintf(stderr,
                 "%s: could not remove type %s and its jobs (%s); kvq types rm %s --with-jobs "
                 "removes them\n",
                 inv.name.c_str(), type.c_str(), cleanup.failure->describe().c_str(), type.c_str());
    if (code == kExitOk) code = exit_code_for(cleanup.failure->status, cleanup.failure->error);
  }
  return g_interrupted ? kExitInterrupted : code;
}

}  // namespace kvq::cli
