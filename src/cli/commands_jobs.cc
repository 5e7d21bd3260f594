// cli/commands_jobs.cc — kvq add, get, ls and rm.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "invocation.h"
#include "output.h"
#include "requests.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kAddUsage[] =
    "usage: kvq add TYPE ID [DATA_JSON] [--at MS] [--priority N] [--group G]\n"
    "                       [--if-exists update|keep] [--depends-on TYPE/ID]...\n"
    "                       [--on-dependency-failure cancel|run] [--batch B]\n"
    "                       [--debounce DELAY[:MAX_DELAY]] [--unique-for SECONDS]\n"
    "\n"
    "Adds job ID of TYPE with DATA_JSON (default {}; '-' reads stdin), its input.\n"
    "  --at MS              schedule it at MS (milliseconds since the epoch); default now\n"
    "  --priority N         lower runs first (default 0)\n"
    "  --group G            the job's group (a tenant, a customer; 1 to 128 bytes): accepts take\n"
    "                       turns between groups, and kvq types set --max-running-per-group caps\n"
    "                       each group's running jobs (kvq groups TYPE lists them)\n"
    "  --if-exists update   when job ID exists: replace it (the default). A pending job gets\n"
    "                       the new data and time; a running one runs again after its run; a\n"
    "                       finished one starts over (its attempts, errors and result cleared)\n"
    "  --if-exists keep     when job ID exists, in any state, leave it alone and print \"kept\":\n"
    "                       an add retried after a timeout never runs a job twice\n"
    "  --depends-on TYPE/ID the job waits (state waiting, never accepted) until job ID of TYPE\n"
    "                       has ended; repeat for each dependency (at most 100; each must\n"
    "                       exist). kvq deps TYPE ID lists them with their results\n"
    "  --on-dependency-failure cancel|run\n"
    "                       when a dependency ends dead or cancelled: cancel this job and the\n"
    "                       jobs waiting on it (the default), or run it anyway\n"
    "  --batch B            the job joins batch B (kvq batch put; it must exist and not be\n"
    "                       sealed): B's callback is added once every member has ended\n"
    "  --debounce DELAY[:MAX_DELAY]\n"
    "                       due DELAY seconds from now; while job ID is pending, each such add\n"
    "                       replaces its data and pushes it out again, but never past\n"
    "                       MAX_DELAY seconds (default 365 days) after the first of them; a\n"
    "                       running job runs again after its run (as --if-exists update)\n"
    "  --unique-for SECONDS for SECONDS from this add, every add of job ID (in any state) keeps\n"
    "                       it as it is and prints \"kept\"; the window is counted from the\n"
    "                       first add, and a remove ends it\n";
constexpr char kGetUsage[] =
    "usage: kvq get TYPE ID\n"
    "\n"
    "Prints job ID of TYPE: its state and outcome, group, attempts, data (its input), result,\n"
    "progress, and its last errors (attempt, time, worker, kind: message; oldest first; --json has "
    "each\n"
    "error's details).\n";
constexpr char kLsUsage[] =
    "usage: kvq ls TYPE [--state S] [--worker W] [--worker-type WT] [--limit N] [--cursor C]\n"
    "\n"
    "Lists the jobs of TYPE in id order.\n"
    "  --state S     only the jobs in state S: pending, running, finished or waiting (on\n"
    "                dependencies); scheduled\n"
    "                (pending, not yet due) or due; or finished with outcome succeeded, dead or\n"
    "                cancelled\n"
    "  --worker W    only jobs accepted by worker W\n"
    "  --worker-type WT\n"
    "                only jobs accepted by a worker of worker type WT\n"
    "  --limit N     at most N jobs (1-10000, default 100)\n"
    "  --cursor C    continue from a previous listing's next cursor\n";
constexpr char kDepsUsage[] =
    "usage: kvq deps TYPE ID\n"
    "\n"
    "Lists the dependencies job ID of TYPE was added with (kvq add --depends-on): each one's\n"
    "type and id, how it resolved (succeeded, dead or cancelled; empty while it has not ended),\n"
    "its state now and its result.\n";
constexpr char kRmUsage[] =
    "usage: kvq rm TYPE ID\n\nRemoves job ID of TYPE (a worker running it is halted).\n";

}  // namespace

int run_add(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "add", kAddUsage,
                             {{"at", true},
                              {"priority", true},
                              {"group", true},
                              {"if-exists", true},
                              {"depends-on", true},
                              {"on-dependency-failure", true},
                              {"batch", true},
                              {"debounce", true},
                              {"unique-for", true}},
                             2, 3);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const std::string& type = inv.args.positional[0];
  const std::string& id = inv.args.positional[1];
  auto body = add_body(inv.args, std::cin);
  if (!body.ok()) return inv.usage_error(body.status().message());
  Response r = inv.client->post(path("/v1/jobs", {type}), *body);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else if (value_of(r.body, "debounced", false)) {
    std::printf("debounced %s (due %s)\n", job_name(type, id).c_str(),
                time_cell(value_of(r.body, "scheduled_time", Json())).c_str());
  } else if (value_of(r.body, "added", true)) {
    std::printf("added %s\n", job_name(type, id).c_str());
  } else if (value_of(r.body, "kept", false)) {
    std::printf("kept %s (its unique window is open until %s)\n", job_name(type, id).c_str(),
                time_cell(value_of(r.body, "unique_until", Json())).c_str());
  } else {
    std::printf("kept %s (it exists; --if-exists keep left it alone)\n",
                job_name(type, id).c_str());
  }
  return kExitOk;
}

int run_get(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "get", kGetUsage, {}, 2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r = inv.client->get(path("/v1/jobs", {inv.args.positional[0], inv.args.positional[1]}));
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::fputs(format_job(r.body).c_str(), stdout);
  }
  return kExitOk;
}

int run_ls(int argc, char** argv) {
  auto begun = begin_command(
      argc, argv, "ls", kLsUsage,
      {{"state", true}, {"worker", true}, {"worker-type", true}, {"limit", true}, {"cursor", true}},
      1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto limit = int_option(inv, "limit");
  if (!limit.ok()) return inv.usage_error(limit.status().message());
  const std::string target = path("/v1/jobs", {inv.args.positional[0]}) +
                             query_string({{"state", inv.args.value("state")},
                                           {"worker", inv.args.value("worker")},
                                           {"worker_type", inv.args.value("worker-type")},
                                           {"limit", *limit ? std::to_string(**limit) : ""},
                                           {"cursor", inv.args.value("cursor")}});
  Response r = inv.client->get(target);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json jobs = value_of(r.body, "jobs", Json::array());
  if (jobs.empty()) {
    std::puts("no jobs");
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& job : jobs) {
      rows.push_back({cell(job, "id"), cell(job, "state"), cell(job, "outcome"),
                      cell(job, "priority"), time_cell(value_of(job, "scheduled_time", Json())),
                      cell(job, "attempts"), cell(job, "worker"),
                      truncate(compact(value_of(job, "data", Json())), 60)});
    }
    std::fputs(
        format_table(
            {"ID", "STATE", "OUTCOME", "PRIORITY", "SCHEDULED", "ATTEMPTS", "WORKER", "DATA"}, rows)
            .c_str(),
        stdout);
  }
  const std::string next = value_of(r.body, "next_cursor", std::string());
  if (!next.empty()) std::printf("more: --cursor %s\n", next.c_str());
  return kExitOk;
}

int run_deps(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "deps", kDepsUsage, {}, 2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r = inv.client->get(
      path("/v1/jobs", {inv.args.positional[0], inv.args.positional[1], "dependencies"}));
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json deps = value_of(r.body, "dependencies", Json::array());
  if (deps.empty()) {
    std::puts("no dependencies");
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& dep : deps) {
    const Json job = value_of(dep, "job", Json());
    rows.push_back({cell(dep, "type"), cell(dep, "id"), cell(dep, "resolved"),
                    job.is_object() ? cell(job, "state") : "removed",
                    job.is_object() ? truncate(compact(value_of(job, "result", Json())), 60) : ""});
  }
  std::fputs(format_table({"TYPE", "ID", "RESOLVED", "STATE", "RESULT"}, rows).c_str(), stdout);
  return kExitOk;
}

int run_rm(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "rm", kRmUsage, {}, 2, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const auto& type = inv.args.positional[0];
  const auto& id = inv.args.positional[1];
  Response r = inv.client->del(path("/v1/jobs", {type, id}));
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("removed %s\n", job_name(type, id).c_str());
  }
  return kExitOk;
}

}  // namespace kvq::cli
