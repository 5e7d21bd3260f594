// bench/peers/queue.h — the one queue interface the peer benchmark drives, so that kvq and the
// systems users would pick instead (beanstalkd, a PostgreSQL SKIP LOCKED table, a Redis reliable
// queue) run exactly the same workload through their own normal client protocol. kvq runs three
// ways: over HTTP, over the beanstalkd protocol (driven by the very client that drives
// beanstalkd) and in-process.
//
// A QueueSystem is one running server (or, for kvq-lib, one open store); connect() gives one
// client connection, used by one thread. Every call blocks until the system acknowledged it and
// throws std::runtime_error when the system reports an error: a benchmark run counts a job only
// once its finish (delete / acknowledge) was acknowledged.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvq::peers {

// A job a worker holds: whatever the system needs to finish it, and the payload it was added with.
struct Reserved {
  std::string handle;   // beanstalkd job id, PostgreSQL row id, Redis list element, kvq lock
  std::string id;       // kvq job id (kvq only)
  std::string payload;  // the JSON text given to add
};

class QueueClient {
 public:
  virtual ~QueueClient() = default;
  // Enqueues one job. `seq` is unique per benchmark run (kvq uses it as the job id).
  virtual void add(int64_t seq, const std::string& payload) = 0;
  // Takes one job, waiting up to `wait` for one; false if none came.
  virtual bool reserve(Reserved& out, std::chrono::milliseconds wait) = 0;
  // Acknowledges a reserved job as done (it must never be handed out again).
  virtual void finish(const Reserved& job) = 0;
  // Finishes `done` and takes the next job without waiting for one, in one round trip where
  // the system has a call for it (kvq: finish with "next", Jobs::finish_and_accept); true when
  // a job was due (it is in `next`), false when none was (the finish stands either way, and is
  // acknowledged at once). Elsewhere a finish alone, and false: the worker then reserves.
  virtual bool finish_and_reserve(const Reserved& done, Reserved& next) {
    (void)next;
    finish(done);
    return false;
  }

  // The batched path (queue_bench --batch): the system's own call for many jobs at once, in one
  // round trip where it has one (kvq: add_many, accept of up to N, finish_many; Redis: one LPUSH
  // of many values, pipelines). These defaults make one call per job, as a client of a system
  // without one must.
  // Enqueues payloads[i] as job first_seq + i.
  virtual void add_batch(int64_t first_seq, const std::vector<std::string>& payloads) {
    for (size_t i = 0; i < payloads.size(); ++i)
      add(first_seq + static_cast<int64_t>(i), payloads[i]);
  }
  // Takes up to `max` jobs into `out` (cleared first), waiting up to `wait` for the first.
  virtual void reserve_batch(std::vector<Reserved>& out, size_t max,
                             std::chrono::milliseconds wait) {
    out.clear();
    Reserved job;
    if (!reserve(job, wait)) return;
    out.push_back(std::move(job));
    while (out.size() < max && reserve(job, std::chrono::milliseconds(0)))
      out.push_back(std::move(job));
  }
  // Acknowledges every job of `jobs` as done.
  virtual void finish_batch(const std::vector<Reserved>& jobs) {
    for (const auto& job : jobs) finish(job);
  }
};

class QueueSystem {
 public:
  virtual ~QueueSystem() = default;
  // Creates the queue (table, type, ...) and empties it.
  virtual void prepare() = 0;
  virtual std::unique_ptr<QueueClient> connect() = 0;
  // Counters worth reporting beside the results (kvq-lib: transaction retries).
  virtual nlohmann::json stats() { return nlohmann::json::object(); }
  // Store commits the system made so far, as the system itself counts them (beanstalkd: binlog
  // records written; PostgreSQL: committed transactions of the database; kvq: LMDB write
  // transactions), or -1 when it keeps no such count (Redis). Read over a connection of its own.
  virtual int64_t commits() { return -1; }
};

// Round trips the clients of this process made (commands, statements, HTTP requests, library
// calls), empty reserves included: each adapter calls count_request() once per round trip.
inline std::atomic<int64_t> g_requests{0};
inline void count_request() { g_requests.fetch_add(1, std::memory_order_relaxed); }
inline int64_t requests_sent() { return g_requests.load(); }

// LMDB's last committed write transaction id in `data_dir` (`mdb_stat -e`): every write
// transaction increments it, so two readings give the commits between them. Throws
// std::runtime_error when it cannot be read.
int64_t lmdb_commits(const std::string& data_dir);

struct SystemOptions {
  std::string system;   // beanstalkd, postgres, redis, kvq-http, kvq-beanstalk, kvq-lib
  std::string address;  // host:port (peers, kvq-http, kvq-beanstalk); a data directory (kvq-lib)
  bool durable = true;  // kvq-lib: LMDB durable or relaxed
  // kvq-http, kvq-beanstalk: the server's data directory, where its commits are counted (none:
  // not counted).
  std::string data_dir;
};

// Throws std::invalid_argument for an unknown system name.
std::unique_ptr<QueueSystem> open_system(const SystemOptions& options);

std::unique_ptr<QueueSystem> open_beanstalkd(const std::string& address);
std::unique_ptr<QueueSystem> open_postgres(const std::string& address);
std::unique_ptr<QueueSystem> open_redis(const std::string& address);
std::unique_ptr<QueueSystem> open_kvq_http(const std::string& address, const std::string& data_dir);
// kvq serve's beanstalkd protocol listener (--beanstalk-listen), through beanstalkd's client.
std::unique_ptr<QueueSystem> open_kvq_beanstalk(const std::string& address,
                                                const std::string& data_dir);
std::unique_ptr<QueueSystem> open_kvq_lib(const std::string& data_dir, bool durable);

// "host:port" split; throws std::invalid_argument.
std::pair<std::string, int> split_host_port(const std::string& address);

}  // namespace kvq::peers
