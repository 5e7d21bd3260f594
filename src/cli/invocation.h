// cli/invocation.h — what every client command shares: its parsed command line, its Client,
// how it reports a usage error or a failed response, and the options several commands take.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "client.h"
#include "exit_codes.h"
#include "kvq/status.h"

namespace kvq::cli {

// The text appended to every client command's usage: the common options and the exit codes.
extern const char kCommonOptionsHelp[];

// One parsed client command line with its Client.
struct Invocation {
  std::string name;   // "kvq add"
  std::string usage;  // the command's usage text (without the common options)
  ParsedArgs args;
  bool json = false;
  Connection connection;
  std::shared_ptr<const TlsContext> tls;  // for https:// URLs; shared by every Client made here
  std::unique_ptr<Client> client;

  // Prints "<name>: <message>", then the usage, to stderr; returns kExitUsage.
  int usage_error(const std::string& message) const;
  // Reports a failed response (stderr, with a hint naming --token and $KVQ_TOKEN for a 401;
  // also the error body on stdout with --json) and returns its exit_code_for.
  int fail(const Response& response) const;
};

// The outcome of begin_command: an Invocation to run, or the exit code of a command that is
// over already (--help: 0; a usage error, reported: 2).
struct Begun {
  std::optional<Invocation> invocation;
  int exit_code = kExitOk;
};

// Parses a command line (argv[0] is the command name) and makes its Client.
Begun begin_command(int argc, char** argv, const char* name, const char* usage,
                    const std::vector<OptionSpec>& options, size_t min_positional,
                    size_t max_positional);

// Parses DATA_JSON ("-" reads standard input); invalid JSON is kInvalidArgument.
Result<nlohmann::json> parse_data_arg(const std::string& text);

// --NAME as an integer: nullopt when absent; kInvalidArgument when not an integer.
Result<std::optional<int64_t>> int_option(const Invocation& inv, const std::string& name);
// --NAME as seconds >= 0: `fallback` when absent; kInvalidArgument when not such a number.
Result<double> seconds_option(const Invocation& inv, const std::string& name, double fallback);

// The client-side bound of a long poll that the server holds up to `seconds`.
std::chrono::milliseconds poll_timeout(double seconds);

// "type/id", as messages name a job.
std::string job_name(const std::string& type, const std::string& id);

// Prints a JSON value (compact, one line) to stdout.
void print_json(const nlohmann::json& value);

}  // namespace kvq::cli
