// cli/commands_worker_calls.cc — kvq accept, update, finish and resubmit: a worker's calls.
#include <cstdio>
#include <string_view>

#include "commands.h"
#include "invocation.h"
#include "output.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kAcceptUsage[] =
    "usage: kvq accept TYPE [--timeout SECONDS] [--worker W [--worker-type WT]] [--count N]\n"
    "\n"
    "Takes due jobs of TYPE to work on; prints each job's type, id, lock and data.\n"
    "  --timeout SECONDS   wait up to SECONDS for a job (default 0, at most 300); exit 3 if none\n"
    "  --worker W          accept as registered worker W\n"
    "  --worker-type WT    W's worker type (kvq workers WT): a worker id is unique only within\n"
    "                      its worker type; needs --worker\n"
    "  --count N           take up to N jobs (default 1, at most 100)\n";
constexpr char kUpdateUsage[] =
    "usage: kvq update TYPE ID --lock L [DATA_JSON]\n"
    "\n"
    "Reports progress on an accepted job (keeps it alive), optionally replacing its data.\n"
    "Exit 4 if the job was halted.\n";
constexpr char kFinishUsage[] =
    "usage: kvq finish TYPE ID --lock L [DATA_JSON]\n"
    "\n"
    "Finishes an accepted job, optionally with final data. Exit 4 if the job was halted.\n";
constexpr char kResubmitUsage[] =
    "usage: kvq resubmit TYPE ID --lock L [--at MS] [DATA_JSON]\n"
    "\n"
    "Puts an accepted job back to pending (at MS, default now), optionally with new data.\n"
    "Exit 4 if the job was halted.\n";

// update / finish / resubmit: TYPE ID --lock L [DATA_JSON] (+ --at for resubmit).
int worker_call(int argc, char** argv, const char* name, const char* usage, const char* done) {
  const bool resubmit = std::string_view(name) == "resubmit";
  std::vector<OptionSpec> options = {{"lock", true}};
  if (resubmit) options.push_back({"at", true});
  auto begun = begin_command(argc, argv, name, usage, options, 2, 3);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  if (!inv.args.has("lock")) return inv.usage_error("--lock is required");
  const auto& type = inv.args.positional[0];
  const auto& id = inv.args.positional[1];
  Json body = {{"lock", inv.args.value("lock")}};
  if (inv.args.positional.size() > 2) {
    auto data = parse_data_arg(inv.args.positional[2]);
    if (!data.ok()) return inv.usage_error(data.status().message());
    body["data"] = std::move(*data);
  }
  if (resubmit) {
    auto at = int_option(inv, "at");
    if (!at.ok()) return inv.usage_error(at.status().message());
    if (*at) body["scheduled_time"] = **at;
  }
  Response r = inv.client->post(path("/v1/jobs", {type, id, name}), body);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else if (r.body.is_object() && value_of(r.body, "resubmitted", false)) {
    std::printf("%s %s (resubmitted meanwhile: it runs again after you finish)\n", done,
                job_name(type, id).c_str());
  } else {
    std::printf("%s %s\n", done, job_name(type, id).c_str());
  }
  return kExitOk;
}

}  // namespace

int run_accept(int argc, char** argv) {
  auto begun = begin_command(
      argc, argv, "accept", kAcceptUsage,
      {{"timeout", true}, {"worker", true}, {"worker-type", true}, {"count", true}}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto timeout = seconds_option(inv, "timeout", 0);
  if (!timeout.ok()) return inv.usage_error(timeout.status().message());
  auto count = int_option(inv, "count");
  if (!count.ok()) return inv.usage_error(count.status().message());
  Json body = Json::object();
  if (inv.args.has("timeout")) body["timeout"] = *timeout;
  if (inv.args.has("worker-type") && !inv.args.has("worker")) {
    return inv.usage_error("--worker-type needs --worker");
  }
  if (inv.args.has("worker")) body["worker"] = inv.args.value("worker");
  if (inv.args.has("worker-type")) body["worker_type"] = inv.args.value("worker-type");
  if (*count) body["count"] = **count;
  Response r =
      inv.client->post(path("/v1/accept", {inv.args.positional[0]}), body, poll_timeout(*timeout));
  if (!r.ok()) return inv.fail(r);
  if (r.status == 204) {
    std::fprintf(stderr, "%s: no job within %s\n", inv.name.c_str(),
                 format_seconds(*timeout).c_str());
    return kExitTimeout;
  }
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  bool first = true;
  for (const auto& job : value_of(r.body, "jobs", Json::array())) {
    if (!first) std::fputc('\n', stdout);
    first = false;
    std::fputs(format_job(job).c_str(), stdout);
  }
  return kExitOk;
}

int run_update(int argc, char** argv) {
  return worker_call(argc, argv, "update", kUpdateUsage, "updated");
}
int run_finish(int argc, char** argv) {
  return worker_call(argc, argv, "finish", kFinishUsage, "finished");
}
int run_resubmit(int argc, char** argv) {
  return worker_call(argc, argv, "resubmit", kResubmitUsage, "resubmitted");
}

}  // namespace kvq::cli
