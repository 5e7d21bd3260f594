// cli/bench_load.h — the load kvq bench puts on a server: producer threads add jobs to one type,
// worker threads accept and finish them, each thread on its own connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client.h"
#include "invocation.h"

namespace kvq::cli {

struct BenchConfig {
  int64_t producers = 4;
  int64_t workers = 4;
  int64_t jobs = 10000;
  int64_t payload = 200;  // bytes of JSON data per job, about
  int64_t batch = 1;      // jobs per add and per accept
  // Workers finish each job and accept their next in one request (finish's "next") instead of
  // two (finish, then accept). Only with batch 1: "next" takes one job.
  bool next = true;
  std::string type;  // the bench's own type; it exists, with a timeout
};

struct BenchOutcome {
  int64_t added = 0;
  int64_t finished = 0;              // distinct jobs finished
  int64_t halted = 0;                // finishes answered 409 halted
  int64_t retries = 0;               // calls repeated after 503 unavailable
  double seconds = 0;                // first add to last finish
  std::vector<double> latencies_ms;  // add -> accept, ascending
  // Why the load stopped before every job was finished: the first failed answer (its exit code
  // is exit_code_for it), or a stall; none when it completed or `stop` ended it.
  std::optional<Response> failure;
  std::string failed_call;  // of `failure`: "add", "accept" or "finish"
  std::string stall;
};

// Runs the load until every job is finished, a call fails, no job finishes for 120 s, or `stop`
// becomes true (polled every 250 ms); prints progress to stderr. Returns once every thread has
// ended, so nothing of the load touches the server after it returns.
BenchOutcome run_bench_load(const Invocation& inv, const BenchConfig& config,
                            const std::atomic<bool>& stop);

}  // namespace kvq::cli
