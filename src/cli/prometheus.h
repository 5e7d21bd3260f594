// cli/prometheus.h — reads the Prometheus text exposition format that the server's /metrics
// serves (kvq top). A pure function (tested in cli_test.cc).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvq::cli {

// One sample: `name{label="value",...} value [timestamp]`.
struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The samples of `text`, in order; comments and malformed lines are skipped.
std::vector<MetricSample> parse_metrics(std::string_view text);

}  // namespace kvq::cli
