// cli/commands_worker_calls.cc — kvq accept, update, finish, resubmit, fail and snooze: a worker's
// calls.
#include <cstdio>
#include <iostream>
#include <string_view>

#include "commands.h"
#include "invocation.h"
#include "output.h"
#include "requests.h"

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
    "usage: kvq update TYPE ID --lock L [PROGRESS_JSON | --progress JSON] [--data JSON]\n"
    "\n"
    "Reports progress on an accepted job and keeps it alive. PROGRESS_JSON (any JSON; '-' reads\n"
    "stdin) is the job's progress until the run ends or another update replaces it; the job's\n"
    "data, its input, stays.\n"
    "  --data JSON    replace the job's data with JSON (for workers that keep their state there)\n"
    "Exit 4 if the job was halted.\n";
constexpr char kFinishUsage[] =
    "usage: kvq finish TYPE ID --lock L [RESULT_JSON] [--data JSON]\n"
    "\n"
    "Finishes an accepted job: it succeeded. RESULT_JSON (any JSON; '-' reads stdin) is kept as\n"
    "the job's result, beside its data (its input), which stays.\n"
    "  --data JSON    replace the job's data with JSON as well\n"
    "Exit 4 if the job was halted.\n";
constexpr char kResubmitUsage[] =
    "usage: kvq resubmit TYPE ID --lock L [--at MS] [DATA_JSON]\n"
    "\n"
    "Puts an accepted job back to pending (at MS, default now), optionally with new data.\n"
    "Exit 4 if the job was halted.\n";
constexpr char kFailUsage[] =
    "usage: kvq fail TYPE ID --lock L --message M [--kind K] [--details JSON]\n"
    "                [--retry-in SECONDS | --no-retry]\n"
    "\n"
    "Reports that this attempt at an accepted job failed. The error is kept with the job (its "
    "last\n"
    "errors: kvq get). The job runs again after its type's backoff (kvq types get TYPE), or ends\n"
    "dead once its attempts reach the type's max attempts. Prints which.\n"
    "  --message M          what went wrong (required)\n"
    "  --kind K             a short class of error, as the worker names them (\"timeout\",\n"
    "                       \"ValueError\", ...)\n"
    "  --details JSON       anything else worth keeping (a stack trace, ...)\n"
    "  --retry-in SECONDS   retry after SECONDS instead of the type's backoff\n"
    "  --no-retry           do not retry: the job ends dead now\n"
    "Exit 4 if the job was halted (the lock no longer holds it).\n";
constexpr char kSnoozeUsage[] =
    "usage: kvq snooze TYPE ID --lock L [--delay SECONDS | --at MS]\n"
    "\n"
    "Hands an accepted job back to run later, without counting a failed attempt (nothing went\n"
    "wrong: it is not time yet). Default: due again now.\n"
    "  --delay SECONDS   due again SECONDS from now\n"
    "  --at MS           due again at MS (milliseconds since the epoch)\n"
    "Exit 4 if the job was halted.\n";

// Posts `body` to /v1/jobs/{type}/{id}/{call} and prints "<done> type/id" (or the JSON).
int post_worker_call(const Invocation& inv, const std::string& call, const Json& body,
                     const char* done) {
  const auto& type = inv.args.positional[0];
  const auto& id = inv.args.positional[1];
  Response r = inv.client->post(path("/v1/jobs", {type, id, call}), body);
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

// update and finish: TYPE ID --lock L [JSON] [--data JSON] (+ --progress for update).
int report_call(int argc, char** argv, const char* name, const char* usage, const char* done) {
  const bool update = std::string_view(name) == "update";
  std::vector<OptionSpec> options = {{"lock", true}, {"data", true}};
  if (update) options.push_back({"progress", true});
  auto begun = begin_command(argc, argv, name, usage, options, 2, 3);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto body = update ? update_body(inv.args, std::cin) : finish_body(inv.args, std::cin);
  if (!body.ok()) return inv.usage_error(body.status().message());
  return post_worker_call(inv, name, *body, done);
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
  return report_call(argc, argv, "update", kUpdateUsage, "updated");
}
int run_finish(int argc, char** argv) {
  return report_call(argc, argv, "finish", kFinishUsage, "finished");
}

int run_resubmit(int argc, char** argv) {
  auto begun =
      begin_command(argc, argv, "resubmit", kResubmitUsage, {{"lock", true}, {"at", true}}, 2, 3);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  if (!inv.args.has("lock")) return inv.usage_error("--lock is required");
  Json body = {{"lock", inv.args.value("lock")}};
  if (inv.args.positional.size() > 2) {
    auto data = parse_data_arg(inv.args.positional[2]);
    if (!data.ok()) return inv.usage_error(data.status().message());
    body["data"] = std::move(*data);
  }
  auto at = int_option(inv, "at");
  if (!at.ok()) return inv.usage_error(at.status().message());
  if (*at) body["scheduled_time"] = **at;
  return post_worker_call(inv, "resubmit", body, "resubmitted");
}

int run_fail(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "fail", kFailUsage,
                             {{"lock", true},
                              {"message", true},
                              {"kind", true},
                              {"details", true},
                              {"retry-in", true},
                              {"no-retry", false}},
                             2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto body = fail_body(inv.args);
  if (!body.ok()) return inv.usage_error(body.status().message());
  const auto& type = inv.args.positional[0];
  const auto& id = inv.args.positional[1];
  Response r = inv.client->post(path("/v1/jobs", {type, id, "fail"}), *body);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("failed %s: %s\n", job_name(type, id).c_str(), format_fail_answer(r.body).c_str());
  }
  return kExitOk;
}

int run_snooze(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "snooze", kSnoozeUsage,
                             {{"lock", true}, {"delay", true}, {"at", true}}, 2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto body = snooze_body(inv.args);
  if (!body.ok()) return inv.usage_error(body.status().message());
  return post_worker_call(inv, "snooze", *body, "snoozed");
}

}  // namespace kvq::cli
