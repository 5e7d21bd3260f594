// beanstalk/counters.h — what this process's beanstalkd front end has seen, for `stats` and
// `stats-tube`: commands by verb, connections, and per tube the connections using, watching and
// waiting on it, its puts, deletes and pauses.
//
// These are this process's counts, as beanstalkd's are its own: with several `kvq serve`
// sharing an etcd store, each answers for its own connections (docs/beanstalk.md). Job counts
// come from the store instead (Jobs::count).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "beanstalk/protocol.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::beanstalk {

// Per tube.
struct TubeCounts {
  int64_t using_ = 0;    // connections whose used tube it is
  int64_t watching = 0;  // connections watching it
  int64_t waiting = 0;   // connections in a reserve that watches it
  uint64_t puts = 0;     // "total-jobs": jobs put into it through this process
  uint64_t deletes = 0;
  uint64_t pauses = 0;
  uint32_t last_pause_seconds = 0;  // the delay of its last pause-tube here
};

struct ProcessCounts {
  std::array<uint64_t, static_cast<size_t>(Verb::kQuit) + 1> commands{};
  uint64_t connections = 0;        // open now
  uint64_t total_connections = 0;  // since start
  uint64_t producers = 0;          // open connections that have put a job
  uint64_t workers = 0;            // open connections that have reserved
  uint64_t waiting = 0;            // open connections in a reserve now
  uint64_t puts = 0;
};

class Counters {
 public:
  // For `stats`: when this process's front end started, and its random id (beanstalkd's "id").
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  const std::string id;

  Counters();
  void command(Verb verb) KVQ_EXCLUDES(mu_);
  void connection(int delta) KVQ_EXCLUDES(mu_);
  void producer(int delta) KVQ_EXCLUDES(mu_);
  void worker(int delta) KVQ_EXCLUDES(mu_);
  void waiting(int delta) KVQ_EXCLUDES(mu_);
  // `delta` added to one of the tube's gauges (&TubeCounts::using_, ::watching, ::waiting).
  void tube_gauge(const std::string& tube, int64_t TubeCounts::*gauge, int delta) KVQ_EXCLUDES(mu_);
  void put(const std::string& tube) KVQ_EXCLUDES(mu_);
  void deleted(const std::string& tube) KVQ_EXCLUDES(mu_);
  void paused(const std::string& tube, uint32_t seconds) KVQ_EXCLUDES(mu_);

  ProcessCounts process() const KVQ_EXCLUDES(mu_);
  TubeCounts tube(const std::string& tube) const KVQ_EXCLUDES(mu_);

 private:
  mutable util::Mutex mu_;
  ProcessCounts process_ KVQ_GUARDED_BY(mu_);
  std::map<std::string, TubeCounts> tubes_ KVQ_GUARDED_BY(mu_);
};

}  // namespace kvq::beanstalk
