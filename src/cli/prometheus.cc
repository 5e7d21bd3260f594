// cli/prometheus.cc — see prometheus.h.
#include "prometheus.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "args.h"  // parse_double

namespace kvq::cli {

std::vector<MetricSample> parse_metrics(std::string_view text) {
  std::vector<MetricSample> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    MetricSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = std::string(line.substr(0, i));
    bool bad = s.name.empty();
    if (!bad && i < line.size() && line[i] == '{') {
      ++i;
      while (!bad && i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          bad = true;
          break;
        }
        std::string key(line.substr(i, eq - i));
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) {
          bad = true;
          break;
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) bad = true;
      ++i;  // '}'
    }
    if (bad) continue;
    while (i < line.size() && line[i] == ' ') ++i;
    std::string_view rest = line.substr(std::min(i, line.size()));
    rest = rest.substr(0, rest.find(' '));  // drop an optional timestamp
    std::optional<double> v;
    if (rest == "+Inf")
      v = HUGE_VAL;
    else if (rest == "-Inf")
      v = -HUGE_VAL;
    else if (rest == "NaN")
      v = NAN;
    else
      v = parse_double(rest);
    if (!v) continue;
    s.value = *v;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kvq::cli
