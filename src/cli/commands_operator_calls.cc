// cli/commands_operator_calls.cc — kvq rerun and cancel: an operator's calls on a job's outcome.
#include <cstdio>

#include "commands.h"
#include "invocation.h"
#include "output.h"
#include "requests.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

// One spelling, "rerun", as the HTTP API (POST .../rerun) and the library (Jobs::rerun) name it:
// "retry" is what a failed job does by itself after its backoff (kvq fail --retry-in), and an
// operator's command of the same name would read as that.
constexpr char kRerunUsage[] =
    "usage: kvq rerun TYPE ID [--at MS] [--priority N]\n"
    "       kvq rerun TYPE --all-dead | --all-cancelled\n"
    "\n"
    "Runs a finished job again (dead, cancelled or succeeded): pending at once (or at MS), its\n"
    "attempts starting over, its result and outcome cleared; its data and its errors stay.\n"
    "Refused (409 wrong_state, exit 2) for a job that is not finished.\n"
    "  --at MS           due at MS (milliseconds since the epoch); default now\n"
    "  --priority N      with this priority; default its own\n"
    "  --all-dead        rerun every dead job of TYPE; prints how many\n"
    "  --all-cancelled   rerun every cancelled job of TYPE; prints how many\n"
    "(Named rerun, not retry: a failed job retries by itself after its type's backoff; rerun is\n"
    "an operator's second chance for a job that ended.)\n";
constexpr char kCancelUsage[] =
    "usage: kvq cancel TYPE ID\n"
    "\n"
    "Cancels a pending or running job: it ends finished with outcome cancelled and keeps its data\n"
    "(kvq rerun runs it again). A worker running it is halted (its next call exits 4). Refused\n"
    "(409 wrong_state, exit 2) for a job already finished.\n";

}  // namespace

int run_rerun(int argc, char** argv) {
  auto begun = begin_command(
      argc, argv, "rerun", kRerunUsage,
      {{"at", true}, {"priority", true}, {"all-dead", false}, {"all-cancelled", false}}, 1, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto request = rerun_request(inv.args);
  if (!request.ok()) return inv.usage_error(request.status().message());
  Response r = inv.client->post(request->target, request->body);
  if (!r.ok()) return inv.fail(r);
  const std::string& type = inv.args.positional[0];
  if (inv.json) {
    print_json(r.body);
  } else if (request->outcome.empty()) {
    std::printf("rerun %s\n", job_name(type, inv.args.positional[1]).c_str());
  } else {
    std::printf("rerun %lld %s jobs of %s\n",
                static_cast<long long>(value_of(r.body, "rerun", int64_t{0})),
                request->outcome.c_str(), type.c_str());
  }
  return kExitOk;
}

int run_cancel(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "cancel", kCancelUsage, {}, 2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const auto& type = inv.args.positional[0];
  const auto& id = inv.args.positional[1];
  Response r = inv.client->post(path("/v1/jobs", {type, id, "cancel"}), Json::object());
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("cancelled %s\n", job_name(type, id).c_str());
  }
  return kExitOk;
}

}  // namespace kvq::cli
