// server/metrics.h — the server's Prometheus metrics (docs/http-api.md lists them). Counters
// are this process's own; job counts are read from the store at scrape time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "kvq/jobs.h"

namespace kvq::server {

class Metrics {
 public:
  void request(const std::string& route, unsigned status);
  void accepted(const std::string& type, double waited_seconds);
  void finished(const std::string& type);
  // The whole exposition, including kvq_jobs counted now through `jobs`.
  std::string render(jobs::Jobs& jobs);

 private:
  static constexpr std::array<double, 12> kBuckets{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30};
  std::mutex mu_;
  std::map<std::pair<std::string, unsigned>, uint64_t> requests_;
  std::map<std::string, uint64_t> accepts_;
  std::map<std::string, uint64_t> finishes_;
  std::array<uint64_t, kBuckets.size()> wait_buckets_{};
  uint64_t wait_count_ = 0;
  double wait_sum_ = 0;
};

}  // namespace kvq::server
