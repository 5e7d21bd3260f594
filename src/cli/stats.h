// cli/stats.h — the statistics kvq bench reports. Pure functions (tested in cli_test.cc).
#pragma once

#include <vector>

namespace kvq::cli {

// The nearest-rank percentile (0 < p <= 100) of `sorted` (ascending); 0 when empty.
double percentile(const std::vector<double>& sorted, double p);

}  // namespace kvq::cli
