// server/metrics.h — the server's Prometheus metrics (docs/http-api.md lists them). Counters
// are this process's own (the HTTP ones here, the jobs' from Jobs::type_stats()); job counts
// are read from the store at scrape time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/jobs.h"
#include "util/mutex.h"

namespace kvq::server {

// A label value escaped as the text format requires.
std::string label(std::string_view value);
// The shortest text that reads back as `v`: bounds stay "0.005", and sums keep every digit
// (a stream's default six would round a long run's seconds).
std::string number(double v);

// The jobs of one type by state (Jobs::count: pending and its scheduled part, running,
// finished and its dead and cancelled parts).
struct TypeCounts {
  std::string type;
  jobs::Jobs::StateCounts counts;
};
inline constexpr size_t kCountLimit = 100'000;
// Every type's jobs by state, each counted from the indexes up to kCountLimit, in
// type order. A type whose count fails is left out, so one failed read does not blank the rest.
Result<std::vector<TypeCounts>> count_jobs(jobs::Jobs& jobs);

class Metrics {
 public:
  // An answered request: its method as sent (HttpServer::Observer), `seconds` from its header
  // read until its answer was queued (a long poll's wait included).
  void request(const std::string& method, const std::string& route, unsigned status,
               double seconds);
  void accepted(const std::string& type, double waited_seconds);
  void finished(const std::string& type);
  // A failed accept(2): reason "emfile", "enfile", "nomem" or "other" (http_server.h).
  void accept_error(std::string_view reason);
  // The whole exposition, including kvq_jobs counted now through `jobs`.
  std::string render(jobs::Jobs& jobs);

  // This process's accepts and finishes so far, by type (the counters /metrics exposes).
  struct Totals {
    std::map<std::string, uint64_t> accepts;
    std::map<std::string, uint64_t> finishes;
  };
  Totals totals();

 private:
  static constexpr std::array<double, 12> kBuckets{0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,  0.5,   1,    2.5,   10,   30};
  // Request durations: finer at the low end, where a request without a wait answers.
  static constexpr std::array<double, 14> kRequestBuckets{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30};
  struct Durations {
    std::array<uint64_t, kRequestBuckets.size()> buckets{};  // per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  util::Mutex mu_;
  struct RequestKey {
    std::string route;
    std::string_view method;  // one of kMethods' names: no label value a client can invent
    unsigned status;
    friend auto operator<=>(const RequestKey&, const RequestKey&) = default;
  };
  std::map<RequestKey, uint64_t> requests_ KVQ_GUARDED_BY(mu_);
  std::map<std::string, Durations> durations_ KVQ_GUARDED_BY(mu_);  // by route
  std::map<std::string, uint64_t> accepts_ KVQ_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> finishes_ KVQ_GUARDED_BY(mu_);
  std::map<std::string, uint64_t, std::less<>> accept_errors_ KVQ_GUARDED_BY(mu_){
      {"emfile", 0}, {"enfile", 0}, {"nomem", 0}, {"other", 0}};
  std::array<uint64_t, kBuckets.size()> wait_buckets_ KVQ_GUARDED_BY(mu_){};
  uint64_t wait_count_ KVQ_GUARDED_BY(mu_) = 0;
  double wait_sum_ KVQ_GUARDED_BY(mu_) = 0;
};

}  // namespace kvq::server
