// cli/stats.cc — see stats.h.
#include "stats.h"

#include <algorithm>
#include <cmath>

namespace kvq::cli {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

}  // namespace kvq::cli
