// cli/commands_schedules.cc — kvq schedule (put, ls, get, rm, pause, resume): cron schedules that
// enqueue jobs.
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

constexpr char kScheduleUsage[] =
    "usage: kvq schedule put NAME --type TYPE --cron EXPR [--timezone ZONE] [--data JSON]\n"
    "                             [--priority N] [--catch-up none|one|all]\n"
    "       kvq schedule ls\n"
    "       kvq schedule get NAME\n"
    "       kvq schedule rm NAME\n"
    "       kvq schedule pause NAME | resume NAME\n"
    "\n"
    "A schedule adds a job of TYPE at every time its cron expression names, once per time\n"
    "however many servers run (the job's id is NAME@TIME, TIME in UTC to the second).\n"
    "  put NAME ...     creates or replaces the schedule; prints it with its next five times.\n"
    "                   --cron: five fields (minute hour day-of-month month day-of-week, as\n"
    "                   crontab(5)), six with seconds first, or @hourly, @daily, @weekly,\n"
    "                   @monthly, @yearly. --timezone: an IANA zone the times are wall times\n"
    "                   in (default UTC). --data: each job's data (a JSON object, default {};\n"
    "                   - reads standard input). --priority: each job's priority (default 0).\n"
    "                   --catch-up: what occurrences missed while no server ran become: none,\n"
    "                   only the latest (one, the default), or all\n"
    "  ls               lists the schedules\n"
    "  get NAME         prints the schedule, where it stands and its next five times\n"
    "  rm NAME          removes the schedule (the jobs it added stay)\n"
    "  pause NAME       no server enqueues its occurrences until it is resumed; those that come\n"
    "                   due meanwhile are never enqueued\n"
    "  resume NAME      it goes on from its first occurrence after now\n";

// Where a schedule's next run stands: its time, or "paused".
std::string next_run_cell(const Json& s) {
  if (value_of(s, "paused", false)) return "paused";
  return time_cell(value_of(s, "next_run", Json()));
}

// A schedule (GET /v1/schedules/{name}) as key: value lines, then its next runs, one a line.
std::string format_schedule(const Json& s) {
  std::string out = format_key_values({
      {"name", cell(s, "name")},
      {"type", cell(s, "type")},
      {"cron", cell(s, "cron")},
      {"timezone", cell(s, "timezone")},
      {"catch_up", cell(s, "catch_up")},
      {"priority", cell(s, "priority")},
      {"data", compact(value_of(s, "data", Json::object()))},
      {"next_run", next_run_cell(s)},
      {"last_run", time_cell(value_of(s, "last_run", Json()))},
      {"last_job_id", cell(s, "last_job_id")},
      {"enqueued", cell(s, "enqueued")},
      {"skipped", cell(s, "skipped")},
      {"last_error", cell(s, "last_error")},
  });
  const Json next = value_of(s, "next_runs", Json::array());
  if (!next.empty()) {
    out += "next runs:\n";
    for (const auto& t : next) out += "  " + time_cell(t) + "\n";
  }
  return out;
}

// Prints a schedule answer: as JSON with --json, else as format_schedule.
int print_schedule(const Invocation& inv, const Response& r) {
  if (inv.json) {
    print_json(r.body);
  } else {
    std::fputs(format_schedule(r.body).c_str(), stdout);
  }
  return kExitOk;
}

int run_schedule_put(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "schedule put", kScheduleUsage,
                             {{"type", true},
                              {"cron", true},
                              {"timezone", true},
                              {"data", true},
                              {"priority", true},
                              {"catch-up", true}},
                             1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto body = schedule_body(inv.args, std::cin);
  if (!body.ok()) return inv.usage_error(body.status().message());
  Response r = inv.client->put(path("/v1/schedules", {inv.args.positional[0]}), *body);
  if (!r.ok()) return inv.fail(r);
  return print_schedule(inv, r);
}

int run_schedule_ls(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "schedule ls", kScheduleUsage, {}, 0, 0);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r = inv.client->get("/v1/schedules");
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json schedules = value_of(r.body, "schedules", Json::array());
  if (schedules.empty()) {
    std::puts("no schedules");
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : schedules) {
    rows.push_back({cell(s, "name"), cell(s, "type"), next_run_cell(s), cell(s, "enqueued"),
                    cell(s, "skipped"), cell(s, "timezone"), cell(s, "cron")});
  }
  // The cron last: it holds spaces, and so reads best where nothing follows it.
  std::fputs(
      format_table({"NAME", "TYPE", "NEXT-RUN", "ENQUEUED", "SKIPPED", "TIMEZONE", "CRON"}, rows)
          .c_str(),
      stdout);
  return kExitOk;
}

int run_schedule_get(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "schedule get", kScheduleUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r = inv.client->get(path("/v1/schedules", {inv.args.positional[0]}));
  if (!r.ok()) return inv.fail(r);
  return print_schedule(inv, r);
}

int run_schedule_rm(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "schedule rm", kScheduleUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const std::string& name = inv.args.positional[0];
  Response r = inv.client->del(path("/v1/schedules", {name}));
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("removed schedule %s\n", name.c_str());
  }
  return kExitOk;
}

// kvq schedule pause NAME / resume NAME (`pause` says which).
int run_schedule_pause(int argc, char** argv, bool pause) {
  const char* verb = pause ? "pause" : "resume";
  auto begun = begin_command(argc, argv, pause ? "schedule pause" : "schedule resume",
                             kScheduleUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const std::string& name = inv.args.positional[0];
  Response r = inv.client->post(path("/v1/schedules", {name, verb}), Json::object());
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else if (pause) {
    std::printf("paused schedule %s\n", name.c_str());
  } else {
    std::printf("resumed schedule %s; next run %s\n", name.c_str(), next_run_cell(r.body).c_str());
  }
  return kExitOk;
}

}  // namespace

int run_schedule(int argc, char** argv) {
  if (argc >= 2) {
    const std::string_view sub = argv[1];
    if (sub == "put") return run_schedule_put(argc - 1, argv + 1);
    if (sub == "ls") return run_schedule_ls(argc - 1, argv + 1);
    if (sub == "get") return run_schedule_get(argc - 1, argv + 1);
    if (sub == "rm") return run_schedule_rm(argc - 1, argv + 1);
    if (sub == "pause") return run_schedule_pause(argc - 1, argv + 1, true);
    if (sub == "resume") return run_schedule_pause(argc - 1, argv + 1, false);
  }
  // Anything else: --help prints the usage, the rest is a usage error naming what was given.
  auto begun = begin_command(argc, argv, "schedule", kScheduleUsage, {}, 0, 0);
  if (!begun.invocation) return begun.exit_code;
  return begun.invocation->usage_error("give a subcommand: put, ls, get, rm, pause or resume");
}

}  // namespace kvq::cli
