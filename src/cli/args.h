// cli/args.h — the command line of a client command: options, positionals, numbers, and the
// connection and TLS settings they name. Pure functions (tested in cli_test.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client.h"
#include "kvq/status.h"

namespace kvq::cli {

struct OptionSpec {
  std::string name;  // without the leading "--"
  bool takes_value = false;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;  // options with a value (last one wins)
  // Every value of each option given with one, in the order given (a repeatable option).
  std::map<std::string, std::vector<std::string>> all_values;
  std::set<std::string> flags;  // options without a value

  bool flag(const std::string& name) const { return flags.count(name) != 0; }
  bool has(const std::string& name) const { return values.count(name) != 0; }
  std::string value(const std::string& name, std::string fallback = {}) const {
    auto it = values.find(name);
    return it == values.end() ? std::move(fallback) : it->second;
  }
  std::vector<std::string> every(const std::string& name) const {
    auto it = all_values.find(name);
    return it == all_values.end() ? std::vector<std::string>{} : it->second;
  }
};

// Parses args[1..] (args[0] is the command name). Options are "--name VALUE", "--name=VALUE" or
// "--name"; "-h" is "--help"; "--" ends the options. The common options (--url, --token,
// --ca-cert, --client-cert, --client-key, --json, --help) are always accepted. An unknown option
// or a missing value is kInvalidArgument, its message for the user ("unknown option '--x'").
Result<ParsedArgs> parse_args(const std::vector<std::string>& args,
                              const std::vector<OptionSpec>& specs);

// Strict number parsing: the whole text must be the number.
std::optional<int64_t> parse_int(std::string_view text);
std::optional<double> parse_double(std::string_view text);
// A duration as a number and a unit — "500ms", "30s", "5m", "2h", "1d" — or a bare number of
// seconds ("1.5"), in whole milliseconds (rounded up); nullopt unless it is > 0 and at most
// 3650 days.
std::optional<int64_t> parse_duration_ms(std::string_view text);

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

}  // namespace kvq::cli
