#include <cstdio>
#include <cstring>
#include <string_view>

#include "commands.h"
#include "kvq/server.h"

namespace {

constexpr char kUsage[] =
    "usage: kvq <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve [options]     run the HTTP/JSON server (kvq serve --help)\n"
    "  demo [--data DIR]   a short tour of the kvq library (storage and jobs) on an embedded\n"
    "                      LMDB data directory (default ./kvq-data)\n"
    "  version             print the version\n"
    "  help                print this help\n"
    "\n"
    "See README.md and docs/http-api.md.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string_view command = argv[1];
  if (command == "serve") return kvq::server::run_serve(argc - 1, argv + 1);
  if (command == "demo") return kvq::cli::run_demo(argc - 1, argv + 1);
  if (command == "version" || command == "--version") {
    std::puts("kvq 0.1.0");
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "kvq: unknown command '%s'\n\n%s", argv[1], kUsage);
  return 2;
}
