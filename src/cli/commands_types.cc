// cli/commands_types.cc — kvq types (list, get, set, clear-jobs, rm), timeout, retention,
// max-lost-runs, pause and resume.
#include <cstdio>
#include <functional>
#include <string_view>

#include "commands.h"
#include "invocation.h"
#include "output.h"
#include "requests.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kTypesUsage[] =
    "usage: kvq types\n"
    "       kvq types get TYPE\n"
    "       kvq types set TYPE [--max-attempts N] [--backoff-base SECONDS] [--backoff-factor X]\n"
    "                          [--backoff-cap SECONDS] [--backoff-jitter X]\n"
    "                          [--max-running N|none] [--rate LIMIT/DURATION|none]\n"
    "                          [--max-running-per-group N|none]\n"
    "       kvq types clear-jobs TYPE\n"
    "       kvq types rm TYPE [--with-jobs]\n"
    "\n"
    "Lists the job types with their timeouts, max lost runs, finished-job retentions, max\n"
    "attempts, backoffs, pauses (kvq pause) and limits.\n"
    "  get TYPE                prints TYPE's settings\n"
    "  set TYPE ...            sets TYPE's retry policy and limits; only what is given changes.\n"
    "                          --max-running N: at most N of its jobs run at once across every\n"
    "                          server; --rate LIMIT/DURATION (10/1s, 600/1h): at most LIMIT\n"
    "                          accepts in any window of DURATION (1 to 1000 per 1ms to 1d);\n"
    "                          --max-running-per-group N: at most N jobs of any one group (kvq\n"
    "                          add --group) run at once across every server; none clears each.\n"
    "                          A failed job\n"
    "                          (kvq fail) runs again after its backoff, and ends dead when its\n"
    "                          attempts reach --max-attempts (default 25). The wait after the\n"
    "                          n-th failure is min(cap, base * factor^(n-1)), less a random part\n"
    "                          of up to jitter (0 to 1) of it; defaults: base 1s, factor 2, cap\n"
    "                          3600s, jitter 0.2. TYPE must have a timeout\n"
    "  clear-jobs TYPE         removes every job of TYPE, in any state (a worker running one is\n"
    "                          halted); the type and its settings stay\n"
    "  rm TYPE                 removes TYPE; refused (409 type_has_jobs, exit 2) while it has "
    "jobs\n"
    "  rm TYPE --with-jobs     removes its jobs, then TYPE\n";
constexpr char kTimeoutUsage[] =
    "usage: kvq timeout TYPE [SECONDS]\n"
    "       kvq timeout TYPE --clear\n"
    "\n"
    "Prints TYPE's timeout, sets it to SECONDS (> 0), or clears it (removes the type, as\n"
    "kvq types rm TYPE does: refused while it has jobs).\n"
    "A worker must update an accepted job within its type's timeout.\n";
constexpr char kRetentionUsage[] =
    "usage: kvq retention TYPE [SECONDS]\n"
    "       kvq retention TYPE --clear\n"
    "\n"
    "Prints how long TYPE's finished jobs are kept, sets it to SECONDS (> 0), or clears it\n"
    "(finished jobs are then kept until removed, the default). Once a finished job is older than\n"
    "its type's retention, the server removes it. TYPE must have a timeout.\n";
constexpr char kMaxLostRunsUsage[] =
    "usage: kvq max-lost-runs TYPE [N]\n"
    "       kvq max-lost-runs TYPE --clear\n"
    "\n"
    "Prints after how many lost runs in a row TYPE's jobs end dead, sets it to N (1 to 1000000),\n"
    "or clears it (no limit on lost runs in a row, the default). A run is lost when its worker\n"
    "stops updating the job for the type's timeout, or unregisters or dies; it counts as an\n"
    "attempt, so max_attempts (kvq types set) ends such a job in any case. A job that ends\n"
    "dead of lost runs has gave_up set and keeps its data. TYPE must have a timeout.\n";

constexpr char kPauseUsage[] =
    "usage: kvq pause TYPE [--for DURATION]\n"
    "\n"
    "Pauses TYPE in every server sharing the store: accepts, waiting ones included, get nothing\n"
    "until kvq resume TYPE (or, with --for, until DURATION has passed: 90s, 10m, 2h, 1d; a bare\n"
    "number is seconds). Adds are still taken and running jobs go on. Pausing a paused type\n"
    "replaces when its pause ends.\n";
constexpr char kResumeUsage[] =
    "usage: kvq resume TYPE\n"
    "\n"
    "Ends TYPE's pause (nothing if it is not paused); waiting accepts get its jobs at once.\n";

constexpr char kTypesGetUsage[] = "usage: kvq types get TYPE\n\nPrints TYPE's settings.\n";

// Removing every job of a type is one request that the server carries out in batches.
constexpr std::chrono::milliseconds kClearJobsTimeout{300'000};

std::string max_lost_runs_cell(const Json& value) {
  return value.is_null() ? "never" : compact(value);
}

// A finished_retention: null means the jobs stay until removed.
std::string retention_cell(const Json& value) {
  return value.is_null() ? "kept" : "removed after " + seconds_cell(value);
}

// A number as "%g" prints it ("2", "0.2"), anything else as JSON.
std::string number_cell(const Json& value) {
  if (!value.is_number()) return compact(value);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value.get<double>());
  return buf;
}

// A type's backoff {"base", "factor", "cap", "jitter"} as "1s x2 cap 3600s jitter 0.2".
std::string backoff_cell(const Json& backoff) {
  if (!backoff.is_object()) return compact(backoff);
  return seconds_cell(value_of(backoff, "base", Json())) + " x" +
         number_cell(value_of(backoff, "factor", Json())) + " cap " +
         seconds_cell(value_of(backoff, "cap", Json())) + " jitter " +
         number_cell(value_of(backoff, "jitter", Json()));
}

// A type's pause: "no", "yes", or "until TIME" for one that ends by itself.
std::string paused_cell(const Json& t) {
  if (!value_of(t, "paused", false)) return "no";
  const Json until = value_of(t, "paused_until", Json());
  return until.is_null() ? "yes" : "until " + time_cell(until);
}

// A max_running or rate: null means no limit.
std::string max_running_cell(const Json& value) {
  return value.is_null() ? "none" : compact(value);
}

// A rate {"limit", "period_ms"} as "10/1s", as --rate takes it.
std::string rate_cell(const Json& rate) {
  if (rate.is_null()) return "none";
  if (!rate.is_object()) return compact(rate);
  return compact(value_of(rate, "limit", Json())) + "/" +
         format_seconds(value_of(rate, "period_ms", 0.0) / 1000.0);
}

// A type (GET /v1/types/{type}) as key: value lines.
std::string format_type(const Json& t) {
  return format_key_values(
      {{"type", cell(t, "type")},
       {"timeout", seconds_cell(value_of(t, "timeout", Json()))},
       {"max_lost_runs", max_lost_runs_cell(value_of(t, "max_lost_runs", Json()))},
       {"retention", retention_cell(value_of(t, "finished_retention", Json()))},
       {"max_attempts", cell(t, "max_attempts")},
       {"backoff", backoff_cell(value_of(t, "backoff", Json()))},
       {"paused", paused_cell(t)},
       {"max_running", max_running_cell(value_of(t, "max_running", Json()))},
       {"rate", rate_cell(value_of(t, "rate", Json()))},
       {"max_running_per_group", max_running_cell(value_of(t, "max_running_per_group", Json()))}});
}

int list_types(const Invocation& inv) {
  Response r = inv.client->get("/v1/types");
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json types = value_of(r.body, "types", Json::array());
  if (types.empty()) {
    std::puts("no types");
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : types) {
    rows.push_back({cell(t, "type"), seconds_cell(value_of(t, "timeout", Json())),
                    max_lost_runs_cell(value_of(t, "max_lost_runs", Json())),
                    retention_cell(value_of(t, "finished_retention", Json())),
                    cell(t, "max_attempts"), backoff_cell(value_of(t, "backoff", Json())),
                    paused_cell(t), max_running_cell(value_of(t, "max_running", Json())),
                    rate_cell(value_of(t, "rate", Json())),
                    max_running_cell(value_of(t, "max_running_per_group", Json()))});
  }
  std::fputs(format_table({"TYPE", "TIMEOUT", "MAX-LOST-RUNS", "RETENTION", "MAX-ATTEMPTS",
                           "BACKOFF", "PAUSED", "MAX-RUNNING", "RATE", "PER-GROUP"},
                          rows)
                 .c_str(),
             stdout);
  return kExitOk;
}

// DELETE /v1/types/{type}/jobs: 200 {"removed": N}.
Response clear_jobs(const Invocation& inv, const std::string& type) {
  return inv.client->del(path("/v1/types", {type, "jobs"}), kClearJobsTimeout);
}

// Reports a failed DELETE /v1/types/{type}, saying how to remove the jobs that keep it.
int fail_type_removal(const Invocation& inv, const Response& r, const std::string& type) {
  const int code = inv.fail(r);
  if (r.error == "type_has_jobs") {
    std::fprintf(stderr, "%s: kvq types rm %s --with-jobs removes them and the type\n",
                 inv.name.c_str(), type.c_str());
  }
  return code;
}

int run_types_get(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "types get", kTypesGetUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r = inv.client->get(path("/v1/types", {inv.args.positional[0]}));
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::fputs(format_type(r.body).c_str(), stdout);
  }
  return kExitOk;
}

// Sends only the settings given, so a concurrent change of the others is never undone.
int run_types_set(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "types set", kTypesUsage,
                             {{"max-attempts", true},
                              {"backoff-base", true},
                              {"backoff-factor", true},
                              {"backoff-cap", true},
                              {"backoff-jitter", true},
                              {"max-running", true},
                              {"rate", true},
                              {"max-running-per-group", true}},
                             1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto body = type_settings_body(inv.args);
  if (!body.ok()) return inv.usage_error(body.status().message());
  Response r = inv.client->put(path("/v1/types", {inv.args.positional[0]}), *body);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::fputs(format_type(r.body).c_str(), stdout);
  }
  return kExitOk;
}

int run_clear_jobs(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "types clear-jobs", kTypesUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const std::string& type = inv.args.positional[0];
  Response r = clear_jobs(inv, type);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("removed %lld jobs of %s\n",
                static_cast<long long>(value_of(r.body, "removed", int64_t{0})), type.c_str());
  }
  return kExitOk;
}

int run_types_rm(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "types rm", kTypesUsage, {{"with-jobs", false}}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const std::string& type = inv.args.positional[0];
  const bool with_jobs = inv.args.flag("with-jobs");
  int64_t removed = 0;
  // A producer may add a job between the two calls; a few rounds outlast a brief one.
  for (int round = 0;; ++round) {
    if (with_jobs) {
      Response c = clear_jobs(inv, type);
      if (!c.ok()) return inv.fail(c);
      removed += value_of(c.body, "removed", int64_t{0});
    }
    Response r = inv.client->del(path("/v1/types", {type}));
    if (r.ok()) break;
    if (!with_jobs || r.error != "type_has_jobs" || round >= 2) {
      return fail_type_removal(inv, r, type);
    }
  }
  if (inv.json) {
    print_json(with_jobs ? Json{{"removed", removed}} : Json::object());
  } else if (with_jobs) {
    std::printf("removed %s and its %lld jobs\n", type.c_str(), static_cast<long long>(removed));
  } else {
    std::printf("removed %s\n", type.c_str());
  }
  return kExitOk;
}

// `kvq timeout`, `kvq retention` and `kvq max-lost-runs` take TYPE, then a VALUE to set,
// --clear, or nothing to print.
struct TypeSetting {
  std::string type;
  bool clear = false;
  std::optional<Json> value;  // to set
};

// `parse` turns the VALUE's text into the JSON to send, or nullopt when it breaks `rule`; such a
// VALUE, or both VALUE and --clear, is kInvalidArgument (a usage error).
Result<TypeSetting> parse_type_setting(
    const Invocation& inv, const std::string& value_name, const std::string& rule,
    const std::function<std::optional<Json>(const std::string&)>& parse) {
  TypeSetting out;
  out.type = inv.args.positional[0];
  out.clear = inv.args.flag("clear");
  const bool set = inv.args.positional.size() == 2;
  if (out.clear && set) return InvalidArgument("give " + value_name + " or --clear, not both");
  if (!set) return out;
  out.value = parse(inv.args.positional[1]);
  if (!out.value) {
    return InvalidArgument(value_name + " " + rule + ", not '" + inv.args.positional[1] + "'");
  }
  return out;
}

Result<TypeSetting> parse_seconds_setting(const Invocation& inv) {
  return parse_type_setting(inv, "SECONDS", "must be a number > 0",
                            [](const std::string& text) -> std::optional<Json> {
                              auto seconds = parse_double(text);
                              if (!seconds || *seconds <= 0) return std::nullopt;
                              return Json(*seconds);
                            });
}

// Sends only `field` (its value, or null to clear it), so a concurrent change of the type's other
// settings is never undone; with neither, reads the type.
Response put_or_get_setting(const Invocation& inv, const TypeSetting& setting, const char* field) {
  const std::string type_path = path("/v1/types", {setting.type});
  if (!setting.clear && !setting.value) return inv.client->get(type_path);
  return inv.client->put(type_path, Json{{field, setting.value.value_or(Json())}});
}

}  // namespace

int run_types(int argc, char** argv) {
  if (argc >= 2) {
    const std::string_view sub = argv[1];
    if (sub == "get") return run_types_get(argc - 1, argv + 1);
    if (sub == "set") return run_types_set(argc - 1, argv + 1);
    if (sub == "clear-jobs") return run_clear_jobs(argc - 1, argv + 1);
    if (sub == "rm") return run_types_rm(argc - 1, argv + 1);
  }
  auto begun = begin_command(argc, argv, "types", kTypesUsage, {}, 0, 0);
  if (!begun.invocation) return begun.exit_code;
  return list_types(*begun.invocation);
}

int run_timeout(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "timeout", kTimeoutUsage, {{"clear", false}}, 1, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto setting = parse_seconds_setting(inv);
  if (!setting.ok()) return inv.usage_error(setting.status().message());
  if (setting->clear) {
    Response r = inv.client->del(path("/v1/types", {setting->type}));
    if (!r.ok()) return fail_type_removal(inv, r, setting->type);
    if (inv.json) {
      print_json(r.body);
    } else {
      std::printf("cleared the timeout of %s\n", setting->type.c_str());
    }
    return kExitOk;
  }
  Response r = put_or_get_setting(inv, *setting, "timeout");
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("%s: timeout %s\n", setting->type.c_str(),
                seconds_cell(value_of(r.body, "timeout", Json())).c_str());
  }
  return kExitOk;
}

int run_retention(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "retention", kRetentionUsage, {{"clear", false}}, 1, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto setting = parse_seconds_setting(inv);
  if (!setting.ok()) return inv.usage_error(setting.status().message());
  Response r = put_or_get_setting(inv, *setting, "finished_retention");
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("%s: finished jobs %s\n", setting->type.c_str(),
                retention_cell(value_of(r.body, "finished_retention", Json())).c_str());
  }
  return kExitOk;
}

int run_max_lost_runs(int argc, char** argv) {
  auto begun =
      begin_command(argc, argv, "max-lost-runs", kMaxLostRunsUsage, {{"clear", false}}, 1, 2);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto setting = parse_type_setting(inv, "N", "must be a whole number from 1 to 1000000",
                                    [](const std::string& text) -> std::optional<Json> {
                                      auto n = parse_int(text);
                                      if (!n || *n < 1 || *n > 1'000'000) return std::nullopt;
                                      return Json(*n);
                                    });
  if (!setting.ok()) return inv.usage_error(setting.status().message());
  const std::string& type = setting->type;
  Response r = put_or_get_setting(inv, *setting, "max_lost_runs");
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json value = value_of(r.body, "max_lost_runs", Json());
  if (value.is_null()) {
    std::printf("%s: no limit on lost runs in a row (each counts as an attempt)\n", type.c_str());
  } else {
    std::printf("%s: jobs are given up after %s lost runs in a row\n", type.c_str(),
                compact(value).c_str());
  }
  return kExitOk;
}

int run_pause(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "pause", kPauseUsage, {{"for", true}}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto body = pause_body(inv.args);
  if (!body.ok()) return inv.usage_error(body.status().message());
  const std::string& type = inv.args.positional[0];
  Response r = inv.client->post(path("/v1/types", {type, "pause"}), *body);
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    const Json until = value_of(r.body, "paused_until", Json());
    const std::string ends = until.is_null() ? "" : " until " + time_cell(until);
    std::printf("paused %s%s\n", type.c_str(), ends.c_str());
  }
  return kExitOk;
}

int run_resume(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "resume", kResumeUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  const std::string& type = inv.args.positional[0];
  Response r = inv.client->post(path("/v1/types", {type, "resume"}), Json::object());
  if (!r.ok()) return inv.fail(r);
  if (inv.json) {
    print_json(r.body);
  } else {
    std::printf("resumed %s\n", type.c_str());
  }
  return kExitOk;
}

}  // namespace kvq::cli
