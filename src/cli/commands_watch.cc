// cli/commands_watch.cc — kvq wait and watch: following one job.
#include <cstdio>

#include "commands.h"
#include "invocation.h"
#include "output.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kWaitUsage[] =
    "usage: kvq wait TYPE ID [--state S] [--timeout SECONDS]\n"
    "\n"
    "Waits until job ID of TYPE is in state S (pending, running or finished; default finished)\n"
    "and prints it. Exit 3 if SECONDS (default 30, at most 300) pass first, 5 if the job does\n"
    "not exist or is removed meanwhile.\n";
constexpr char kWatchUsage[] =
    "usage: kvq watch TYPE ID\n"
    "\n"
    "Prints job ID's state now and each change, one line each, until it is finished or removed.\n"
    "With --json, prints each event's JSON on its own line.\n";

}  // namespace

int run_wait(int argc, char** argv) {
  auto begun =
      begin_command(argc, argv, "wait", kWaitUsage, {{"state", true}, {"timeout", true}}, 2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto timeout = seconds_option(inv, "timeout", 30);
  if (!timeout.ok()) return inv.usage_error(timeout.status().message());
  const auto& type = inv.args.positional[0];
  const auto& id = inv.args.positional[1];
  const std::string target =
      path("/v1/jobs", {type, id, "wait"}) +
      query_string({{"state", inv.args.value("state")},
                    {"timeout", inv.args.has("timeout") ? inv.args.value("timeout") : ""}});
  Response r = inv.client->get(target, poll_timeout(*timeout));
  if (!r.ok()) return inv.fail(r);
  if (r.status == 204) {
    std::fprintf(stderr, "%s: %s not %s within %s\n", inv.name.c_str(), job_name(type, id).c_str(),
                 inv.args.value("state", "finished").c_str(), format_seconds(*timeout).c_str());
    return kExitTimeout;
  }
  const bool found = r.body.is_object() && value_of(r.body, "found", true);
  if (inv.json) {
    print_json(r.body);
  } else if (found) {
    std::fputs(format_job(r.body).c_str(), stdout);
  }
  if (!found) {
    std::fprintf(stderr, "%s: %s was removed\n", inv.name.c_str(), job_name(type, id).c_str());
    return kExitNotFound;
  }
  return kExitOk;
}

int run_watch(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "watch", kWatchUsage, {}, 2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const bool json = inv.json;
  Response r = inv.client->stream(
      path("/v1/jobs", {inv.args.positional[0], inv.args.positional[1], "events"}),
      [json](const SseEvent& event) {
        std::string line;
        if (json) {
          line = event.data;
        } else if (event.event == "job") {
          Json data = Json::parse(event.data, nullptr, false);
          line = data.is_discarded() ? event.data : format_job_event(data);
        } else {
          line = event.event + ": " + event.data;
        }
        std::fputs(line.c_str(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
        return true;
      });
  if (!r.ok()) return inv.fail(r);
  return kExitOk;
}

}  // namespace kvq::cli
