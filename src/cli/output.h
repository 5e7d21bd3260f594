// cli/output.h — argument parsing and human-readable formatting shared by the client commands.
// Everything here is a pure function (tested in cli_test.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "client.h"

namespace kvq::cli {

// Exit codes of the client commands.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,     // an error from the server or the network
  kExitUsage = 2,     // bad command line
  kExitTimeout = 3,   // nothing happened in time (accept, wait)
  kExitHalted = 4,    // 409 halted: stop working on the job
  kExitNotFound = 5,  // 404
};

// The text appended to every client command's usage.
extern const char kCommonOptionsHelp[];

// ---- argument parsing ------------------------------------------------------------------------

struct OptionSpec {
  std::string name;  // without the leading "--"
  bool takes_value = false;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;  // options with a value (last one wins)
  std::set<std::string> flags;                // options without a value

  bool flag(const std::string& name) const { return flags.count(name) != 0; }
  bool has(const std::string& name) const { return values.count(name) != 0; }
  std::string value(const std::string& name, std::string fallback = {}) const {
    auto it = values.find(name);
    return it == values.end() ? std::move(fallback) : it->second;
  }
};

// Parses args[1..] (args[0] is the command name). Options are "--name VALUE", "--name=VALUE" or
// "--name"; "-h" is "--help"; "--" ends the options. The common options (--url, --token,
// --ca-cert, --client-cert, --client-key, --json, --help) are always accepted. Returns nullopt and sets *error on an unknown option or a
// missing value.
std::optional<ParsedArgs> parse_args(const std::vector<std::string>& args,
                                     const std::vector<OptionSpec>& specs, std::string* error);

// Strict number parsing: the whole text must be the number.
std::optional<int64_t> parse_int(std::string_view text);
std::optional<double> parse_double(std::string_view text);

// The connection options: --url, else $KVQ_URL, else http://127.0.0.1:7411; --token, else
// $KVQ_TOKEN.
struct Connection {
  std::string url;
  std::string token;
};
Connection connection_from(const ParsedArgs& args, const char* env_url, const char* env_token);

// The TLS options, each its flag, else its variable: --ca-cert / $KVQ_CA_CERT, --client-cert /
// $KVQ_CLIENT_CERT, --client-key / $KVQ_CLIENT_KEY. `explicit_flags` says whether any of the
// three flags was given (a usage error with an http:// URL, where the variables are ignored).
struct TlsFlags {
  TlsOptions options;
  bool explicit_flags = false;
};
TlsFlags tls_flags_from(const ParsedArgs& args, const char* env_ca, const char* env_cert,
                        const char* env_key);

// ---- formatting ------------------------------------------------------------------------------

// "2025-11-29T16:00:00.000Z" for milliseconds since the epoch (UTC).
std::string format_time_ms(int64_t ms);

// A JSON value as one compact line; strings without quotes when `bare_strings`.
std::string compact(const nlohmann::json& value, bool bare_strings = false);

// Cuts `text` to at most `width` characters, ending in "..." when cut.
std::string truncate(std::string text, size_t width);

// Aligned "key: value" lines ("state:     pending").
std::string format_key_values(const std::vector<std::pair<std::string, std::string>>& rows);

// A table: a header row and left-aligned columns separated by two spaces; no trailing spaces.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// A job object (GET /v1/jobs/{type}/{id}) as key: value lines.
std::string format_job(const nlohmann::json& job);

// One line for a job event: "running  seq=42  data={...}", or "removed".
std::string format_job_event(const nlohmann::json& event);

// obj[key] as a T, or `fallback` when obj is not an object, has no such key or another type.
template <typename T>
T value_of(const nlohmann::json& obj, const char* key, T fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

// Seconds as "30s", "1.5s".
std::string format_seconds(double seconds);

// A size as "512 B", "20.0 KiB", "1.5 GiB".
std::string format_bytes(uint64_t bytes);

// ---- metrics and statistics ------------------------------------------------------------------

// One sample of the Prometheus text format.
struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
// Parses the Prometheus text exposition format (comments and malformed lines are skipped).
std::vector<MetricSample> parse_metrics(std::string_view text);

// The nearest-rank percentile (0 < p <= 100) of `sorted` (ascending); 0 when empty.
double percentile(const std::vector<double>& sorted, double p);

}  // namespace kvq::cli
