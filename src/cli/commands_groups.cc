// cli/commands_groups.cc — kvq groups: a type's groups (kvq add --group), a page at a time.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "invocation.h"
#include "output.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kGroupsUsage[] =
    "usage: kvq groups TYPE [--limit N] [--after G]\n"
    "\n"
    "Lists the groups of TYPE that have pending or running jobs, by name: each group's running\n"
    "jobs, its pending ones (due or not, counted up to 10000), whether it is full (it holds\n"
    "the type's --max-running-per-group running jobs, so its pending ones wait) and when it is\n"
    "next in turn. Accepts take turns between the groups with due jobs.\n"
    "  --limit N     at most N groups (1-1000, default 100)\n"
    "  --after G     start after group G: a previous listing's \"more: --after G\"\n";

std::vector<std::string> group_row(const Json& g) {
  return {cell(g, "group"), cell(g, "running"), cell(g, "pending"),
          value_of(g, "full", false) ? "yes" : "no", time_cell(value_of(g, "in_turn_at", Json()))};
}

}  // namespace

int run_groups(int argc, char** argv) {
  auto begun =
      begin_command(argc, argv, "groups", kGroupsUsage, {{"limit", true}, {"after", true}}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto limit = int_option(inv, "limit");
  if (!limit.ok()) return inv.usage_error(limit.status().message());
  const std::string target = path("/v1/types", {inv.args.positional[0], "groups"}) +
                             query_string({{"limit", *limit ? std::to_string(**limit) : ""},
                                           {"after", inv.args.value("after")}});
  Response r = inv.client->get(target);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json groups = value_of(r.body, "groups", Json::array());
  if (groups.empty()) {
    std::puts("no groups");
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& g : groups) rows.push_back(group_row(g));
    std::fputs(format_table({"GROUP", "RUNNING", "PENDING", "FULL", "IN-TURN-AT"}, rows).c_str(),
               stdout);
  }
  const std::string next = value_of(r.body, "next_after", std::string());
  if (!next.empty()) std::printf("more: --after %s\n", next.c_str());
  return kExitOk;
}

}  // namespace kvq::cli
