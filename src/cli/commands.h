// cli/commands.h — the kvq subcommands; each returns the process exit code.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client.h"
#include "output.h"

namespace kvq::cli {

int run_demo(int argc, char** argv);
int run_backup(int argc, char** argv);  // backup.cc

// HTTP client commands (commands_jobs.cc): argv[0] is the command name.
int run_add(int argc, char** argv);
int run_get(int argc, char** argv);
int run_ls(int argc, char** argv);
int run_rm(int argc, char** argv);
int run_accept(int argc, char** argv);
int run_update(int argc, char** argv);
int run_finish(int argc, char** argv);
int run_resubmit(int argc, char** argv);
int run_wait(int argc, char** argv);
int run_watch(int argc, char** argv);
int run_types(int argc, char** argv);
int run_timeout(int argc, char** argv);
int run_retention(int argc, char** argv);
int run_max_lost_runs(int argc, char** argv);
int run_workers(int argc, char** argv);

// Operations (commands_ops.cc).
int run_top(int argc, char** argv);
int run_bench(int argc, char** argv);

// ---- shared by the client commands -----------------------------------------------------------

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
  // Reports a failed response (stderr; also the error body on stdout with --json) and returns
  // its exit code.
  int fail(const Response& response) const;
};

// The exit code for a response: 0 for 2xx, 5 for 404, 4 for 409 halted, else 1.
int exit_code_for(const Response& response);

// Parses a command line. Returns nullopt with *exit_code set when the command is over already
// (--help: 0; a usage error: 2).
std::optional<Invocation> begin_command(int argc, char** argv, const char* name,
                                        const char* usage, const std::vector<OptionSpec>& options,
                                        size_t min_positional, size_t max_positional,
                                        int* exit_code);

// Parses DATA_JSON ("-" reads standard input). Returns nullopt and sets *error when invalid.
std::optional<nlohmann::json> parse_data_arg(const std::string& text, std::string* error);

// Prints a JSON value (pretty) to stdout.
void print_json(const nlohmann::json& value);

}  // namespace kvq::cli
