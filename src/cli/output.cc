// cli/output.cc — see output.h.
#include "output.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iterator>

namespace kvq::cli {

const char kCommonOptionsHelp[] =
    "\n"
    "common options:\n"
    "  --url URL            server base URL (default $KVQ_URL, else http://127.0.0.1:7411);\n"
    "                       https://HOST[:PORT] for TLS (port 443 when omitted)\n"
    "  --token T            bearer token (default $KVQ_TOKEN); beyond loopback only over\n"
    "                       https://: over http:// anyone on the path can read it\n"
    "  --ca-cert FILE       https: trust the CAs in this PEM file for the server's\n"
    "                       certificate (default $KVQ_CA_CERT, else the system's store)\n"
    "  --client-cert FILE   https: present this certificate, to a server that asks for one\n"
    "  --client-key FILE    and its key (default $KVQ_CLIENT_CERT, $KVQ_CLIENT_KEY)\n"
    "  --json               print the server's JSON response instead of text\n"
    "  --help, -h           print this help\n"
    "\n"
    "exit codes: 0 ok, 1 server or network error, 2 usage error, 3 nothing happened in time,\n"
    "            4 halted (409: stop working on the job), 5 not found (404)\n";

std::optional<ParsedArgs> parse_args(const std::vector<std::string>& args,
                                     const std::vector<OptionSpec>& specs, std::string* error) {
  static const std::vector<OptionSpec> kCommon = {
      {"url", true},         {"token", true},      {"ca-cert", true}, {"client-cert", true},
      {"client-key", true},  {"json", false},      {"help", false}};
  auto find = [&](std::string_view name) -> const OptionSpec* {
    for (const auto* list : {&specs, &kCommon}) {
      for (const auto& spec : *list) {
        if (spec.name == name) return &spec;
      }
    }
    return nullptr;
  };
  ParsedArgs out;
  bool options_done = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_done || arg.size() < 2 || arg[0] != '-' ||
        (arg[1] != '-' && arg != "-h")) {
      out.positional.push_back(arg);  // includes "-" and negative numbers
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "-h") {
      out.flags.insert("help");
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptionSpec* spec = find(name);
    if (spec == nullptr) {
      *error = "unknown option '--" + name + "'";
      return std::nullopt;
    }
    if (!spec->takes_value) {
      if (value) {
        *error = "option '--" + name + "' takes no value";
        return std::nullopt;
      }
      out.flags.insert(name);
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        *error = "option '--" + name + "' needs a value";
        return std::nullopt;
      }
      value = args[++i];
    }
    out.values[name] = *value;
  }
  return out;
}

std::optional<int64_t> parse_int(std::string_view text) {
  if (text.empty() || text.size() > 24) return std::nullopt;
  std::string s(text);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0]))) {
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

std::optional<double> parse_double(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string s(text);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) ||
      std::isspace(static_cast<unsigned char>(s[0]))) {
    return std::nullopt;
  }
  return v;
}

Connection connection_from(const ParsedArgs& args, const char* env_url, const char* env_token) {
  Connection c;
  c.url = args.value("url", env_url != nullptr && *env_url != '\0' ? env_url
                                                                  : "http://127.0.0.1:7411");
  c.token = args.value("token", env_token != nullptr ? env_token : "");
  return c;
}

TlsFlags tls_flags_from(const ParsedArgs& args, const char* env_ca, const char* env_cert,
                        const char* env_key) {
  auto pick = [&](const char* flag, const char* env) {
    return args.value(flag, env != nullptr ? env : "");
  };
  TlsFlags t;
  t.options.ca_cert = pick("ca-cert", env_ca);
  t.options.client_cert = pick("client-cert", env_cert);
  t.options.client_key = pick("client-key", env_key);
  t.explicit_flags = args.has("ca-cert") || args.has("client-cert") || args.has("client-key");
  return t;
}

std::string format_time_ms(int64_t ms) {
  const int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  const int millis = static_cast<int>(ms - secs * 1000);
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(ms);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::string compact(const nlohmann::json& value, bool bare_strings) {
  if (bare_strings && value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string truncate(std::string text, size_t width) {
  if (text.size() <= width) return text;
  if (width <= 3) return text.substr(0, width);
  text.resize(width - 3);
  return text + "...";
}

std::string format_key_values(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t width = 0;
  for (const auto& [key, value] : rows) width = std::max(width, key.size() + 1);
  std::string out;
  for (const auto& [key, value] : rows) {
    std::string k = key + ":";
    k.resize(width, ' ');
    if (value.empty()) {
      out += key + ":";
    } else {
      out += k + " " + value;
    }
    out += '\n';
  }
  return out;
}

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (size_t i = 0; i < widths.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      if (i + 1 < widths.size()) {
        cell.resize(widths[i], ' ');
        cell += "  ";
      }
      out += cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string format_seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", seconds);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string format_job(const nlohmann::json& job) {
  static const std::vector<std::string> kOrder = {
      "type",        "id",       "state",       "priority",   "scheduled_time", "attempts",
      "worker",      "resubmitted", "created_at", "updated_at", "lock",        "seq",
      "found",       "data"};
  static const std::set<std::string> kTimes = {"scheduled_time", "created_at", "updated_at"};
  std::vector<std::pair<std::string, std::string>> rows;
  auto render = [&](const std::string& key, const nlohmann::json& value) {
    std::string text = compact(value, /*bare_strings=*/key != "data");
    if (kTimes.count(key) != 0 && value.is_number_integer()) {
      text += " (" + format_time_ms(value.get<int64_t>()) + ")";
    }
    rows.emplace_back(key, text);
  };
  if (!job.is_object()) return compact(job) + "\n";
  for (const auto& key : kOrder) {
    if (key == "data") continue;
    if (auto it = job.find(key); it != job.end()) render(key, *it);
  }
  for (const auto& [key, value] : job.items()) {
    if (key != "data" && std::find(kOrder.begin(), kOrder.end(), key) == kOrder.end()) {
      render(key, value);
    }
  }
  if (auto it = job.find("data"); it != job.end()) render("data", *it);
  return format_key_values(rows);
}

// One human line for a job event: "running  seq=42  data={...}", or "removed".
std::string format_job_event(const nlohmann::json& event) {
  if (!event.is_object()) return compact(event);
  if (!value_of(event, "found", true)) return "removed";
  std::string line = value_of(event, "state", std::string("?"));
  if (auto it = event.find("seq"); it != event.end()) line += "  seq=" + compact(*it);
  if (auto it = event.find("data"); it != event.end()) line += "  data=" + compact(*it);
  return line;
}

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
    if (rest == "+Inf") v = HUGE_VAL;
    else if (rest == "-Inf") v = -HUGE_VAL;
    else if (rest == "NaN") v = NAN;
    else v = parse_double(rest);
    if (!v) continue;
    s.value = *v;
    out.push_back(std::move(s));
  }
  return out;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

}  // namespace kvq::cli
