// kvq backup: a consistent copy of an LMDB data directory, taken while servers keep using it
// (backup_lmdb_store in kvq/lmdb_store.h).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "exit_codes.h"
#include "invocation.h"
#include "kvq/lmdb_store.h"
#include "output.h"

namespace kvq::cli {
namespace {

constexpr char kBackupUsage[] =
    "usage: kvq backup DEST [--data DIR] [--no-compact] [--json]\n"
    "\n"
    "Copies the LMDB data directory DIR (default ./kvq-data) into the new or empty directory\n"
    "DEST, while kvq serve and other processes keep reading and writing DIR. The copy is one\n"
    "committed state of the store, on disk when the command returns, and a data directory of its\n"
    "own (kvq serve --data DEST). It leaves out free pages unless --no-compact: the data file\n"
    "never shrinks, and the copy holds only live data. --json prints {data, destination, bytes,\n"
    "compact, seconds}. For etcd stores, use etcdctl snapshot save (docs/operations.md).\n"
    "exit codes: 0 copied, 1 the copy failed, 2 usage or a DEST that is not new or empty,\n"
    "5 DIR holds no data.\n";

int exit_code_for_backup(const Status& status) {
  switch (status.code()) {
    case Code::kNotFound: return kExitNotFound;
    case Code::kInvalidArgument: return kExitUsage;
    default: return kExitError;
  }
}

}  // namespace

int run_backup(int argc, char** argv) {
  const std::vector<std::string> words(argv, argv + argc);
  auto args = parse_args(words, {{"data", true}, {"no-compact", false}});
  const auto usage_error = [](const std::string& message) {
    std::fprintf(stderr, "kvq backup: %s\n\n%s", message.c_str(), kBackupUsage);
    return kExitUsage;
  };
  if (!args.ok()) return usage_error(args.status().message());
  if (args->flag("help")) {
    std::fputs(kBackupUsage, stdout);
    return kExitOk;
  }
  if (args->has("url") || args->has("token")) {
    return usage_error("it copies a local data directory (--data), not a server's");
  }
  if (args->positional.size() != 1) return usage_error("give one destination directory");
  const std::string data = args->value("data", "./kvq-data");
  const std::string& destination = args->positional[0];
  const bool compact = !args->flag("no-compact");

  const auto started = std::chrono::steady_clock::now();
  auto bytes = backup_lmdb_store(data, destination, {.compact = compact});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!bytes.ok()) {
    std::fprintf(stderr, "kvq backup: %s\n", bytes.status().message().c_str());
    return exit_code_for_backup(bytes.status());
  }
  if (args->flag("json")) {
    print_json({{"data", data},
                {"destination", destination},
                {"bytes", *bytes},
                {"compact", compact},
                {"seconds", seconds}});
  } else {
    std::printf("kvq backup: copied %s to %s (%s%s) in %.2f s\n", data.c_str(), destination.c_str(),
                format_bytes(*bytes).c_str(), compact ? ", compacted" : "", seconds);
  }
  return kExitOk;
}

}  // namespace kvq::cli
