// cli/commands_workers.cc — kvq workers: the registered workers of a worker type.
#include <cstdio>

#include "commands.h"
#include "invocation.h"
#include "output.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kWorkersUsage[] =
    "usage: kvq workers WTYPE\n\nLists the registered workers of WTYPE and the membership "
    "version.\n";

}  // namespace

int run_workers(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "workers", kWorkersUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r = inv.client->get(path("/v1/workers", {inv.args.positional[0]}));
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  std::printf("version: %s\n", cell(r.body, "version").c_str());
  const Json workers = value_of(r.body, "workers", Json::array());
  if (workers.empty()) {
    std::puts("no workers");
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : workers) {
    rows.push_back({cell(w, "id"), time_cell(value_of(w, "registered_at", Json())),
                    time_cell(value_of(w, "last_heartbeat", Json())),
                    seconds_cell(value_of(w, "health_timeout", Json())),
                    truncate(compact(value_of(w, "info", Json())), 60)});
  }
  std::fputs(
      format_table({"ID", "REGISTERED", "LAST_HEARTBEAT", "HEALTH_TIMEOUT", "INFO"}, rows).c_str(),
      stdout);
  return kExitOk;
}

}  // namespace kvq::cli
