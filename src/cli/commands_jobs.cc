// cli/commands_jobs.cc — the HTTP client commands for jobs, types and workers.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>

#include "commands.h"

namespace kvq::cli {

using Json = nlohmann::json;
using std::chrono::milliseconds;

// ---- shared helpers --------------------------------------------------------------------------

int Invocation::usage_error(const std::string& message) const {
  std::fprintf(stderr, "%s: %s\n\n%s%s", name.c_str(), message.c_str(), usage.c_str(),
               kCommonOptionsHelp);
  return kExitUsage;
}

int exit_code_for(const Response& response) {
  if (response.ok()) return kExitOk;
  if (response.status == 404) return kExitNotFound;
  if (response.status == 409 && response.error == "halted") return kExitHalted;
  return kExitError;
}

int Invocation::fail(const Response& response) const {
  if (json && !response.network_error() && !response.body.is_null()) print_json(response.body);
  std::fprintf(stderr, "%s: %s\n", name.c_str(), response.describe().c_str());
  return exit_code_for(response);
}

void print_json(const Json& value) {
  const std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::optional<Invocation> begin_command(int argc, char** argv, const char* name,
                                        const char* usage, const std::vector<OptionSpec>& options,
                                        size_t min_positional, size_t max_positional,
                                        int* exit_code) {
  Invocation inv;
  inv.name = std::string("kvq ") + name;
  inv.usage = usage;
  std::vector<std::string> args(argv, argv + argc);
  std::string error;
  auto parsed = parse_args(args, options, &error);
  if (!parsed) {
    *exit_code = inv.usage_error(error);
    return std::nullopt;
  }
  inv.args = std::move(*parsed);
  if (inv.args.flag("help")) {
    std::printf("%s%s", usage, kCommonOptionsHelp);
    *exit_code = kExitOk;
    return std::nullopt;
  }
  const size_t n = inv.args.positional.size();
  if (n < min_positional || n > max_positional) {
    *exit_code = inv.usage_error(n < min_positional ? "missing arguments" : "too many arguments");
    return std::nullopt;
  }
  inv.json = inv.args.flag("json");
  inv.connection = connection_from(inv.args, std::getenv("KVQ_URL"), std::getenv("KVQ_TOKEN"));
  auto url = parse_url(inv.connection.url, &error);
  if (!url) {
    *exit_code = inv.usage_error(error);
    return std::nullopt;
  }
  const TlsFlags tls = tls_flags_from(inv.args, std::getenv("KVQ_CA_CERT"),
                                      std::getenv("KVQ_CLIENT_CERT"), std::getenv("KVQ_CLIENT_KEY"));
  if (url->tls) {
    inv.tls = make_tls_context(tls.options, &error);
    if (!inv.tls) {
      // A file problem, not a bad command line: the message says which file, no usage needed.
      std::fprintf(stderr, "%s: %s\n", inv.name.c_str(), error.c_str());
      *exit_code = kExitUsage;
      return std::nullopt;
    }
  } else if (tls.explicit_flags) {
    *exit_code = inv.usage_error("--ca-cert, --client-cert and --client-key need an https:// URL, not " +
                                 inv.connection.url);
    return std::nullopt;
  }
  inv.client = std::make_unique<Client>(std::move(*url), inv.connection.token, inv.tls);
  return inv;
}

std::optional<Json> parse_data_arg(const std::string& text, std::string* error) {
  std::string source = text;
  if (text == "-") {
    source.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  Json value = Json::parse(source, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    *error = "DATA_JSON is not valid JSON: " + truncate(source, 60);
    return std::nullopt;
  }
  return value;
}

namespace {

// Parses an optional numeric option into *out; on a bad value returns false (usage error).
bool int_option(const Invocation& inv, const std::string& name, std::optional<int64_t>* out,
                std::string* error) {
  if (!inv.args.has(name)) return true;
  *out = parse_int(inv.args.value(name));
  if (!*out) *error = "--" + name + " needs an integer, not '" + inv.args.value(name) + "'";
  return out->has_value();
}

bool seconds_option(const Invocation& inv, const std::string& name, double fallback, double* out,
                    std::string* error) {
  *out = fallback;
  if (!inv.args.has(name)) return true;
  auto v = parse_double(inv.args.value(name));
  if (!v || *v < 0) {
    *error = "--" + name + " needs a number of seconds, not '" + inv.args.value(name) + "'";
    return false;
  }
  *out = *v;
  return true;
}

milliseconds poll_timeout(double seconds) {
  return milliseconds(static_cast<int64_t>(seconds * 1000)) + milliseconds(15000);
}

std::string job_name(const std::string& type, const std::string& id) { return type + "/" + id; }

// ---- usage texts ----

constexpr char kAddUsage[] =
    "usage: kvq add TYPE ID [DATA_JSON] [--at MS] [--priority N]\n"
    "\n"
    "Adds (or replaces) job ID of TYPE with DATA_JSON (default {}; '-' reads stdin).\n"
    "  --at MS         schedule it at MS (milliseconds since the epoch); default now\n"
    "  --priority N    lower runs first (default 0)\n";
constexpr char kGetUsage[] =
    "usage: kvq get TYPE ID\n\nPrints job ID of TYPE.\n";
constexpr char kLsUsage[] =
    "usage: kvq ls TYPE [--state S] [--worker W] [--limit N] [--cursor C]\n"
    "\n"
    "Lists the jobs of TYPE in id order.\n"
    "  --state S     only pending, running or finished jobs\n"
    "  --worker W    only jobs accepted by worker W\n"
    "  --limit N     at most N jobs (1-10000, default 100)\n"
    "  --cursor C    continue from a previous listing's next cursor\n";
constexpr char kRmUsage[] =
    "usage: kvq rm TYPE ID\n\nRemoves job ID of TYPE (a worker running it is halted).\n";
constexpr char kAcceptUsage[] =
    "usage: kvq accept TYPE [--timeout SECONDS] [--worker W] [--count N]\n"
    "\n"
    "Takes due jobs of TYPE to work on; prints each job's type, id, lock and data.\n"
    "  --timeout SECONDS   wait up to SECONDS for a job (default 0, at most 300); exit 3 if none\n"
    "  --worker W          accept as registered worker W\n"
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
constexpr char kTypesUsage[] =
    "usage: kvq types\n\nLists the job types with their timeouts, max lost runs and finished-job retentions.\n";
constexpr char kTimeoutUsage[] =
    "usage: kvq timeout TYPE [SECONDS]\n"
    "       kvq timeout TYPE --clear\n"
    "\n"
    "Prints TYPE's timeout, sets it to SECONDS (> 0), or clears it (removes the type).\n"
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
    "Prints after how many lost runs in a row TYPE's jobs are given up, sets it to N (1 to\n"
    "1000000), or clears it (lost runs are then re-enqueued for ever, the default). A run is lost\n"
    "when its worker stops updating the job for the type's timeout, or unregisters or dies; a job\n"
    "given up is finished with gave_up set and its data kept. TYPE must have a timeout.\n";
constexpr char kWorkersUsage[] =
    "usage: kvq workers WTYPE\n\nLists the registered workers of WTYPE and the membership version.\n";

// Renders a millisecond timestamp field as an ISO time, or the raw value.
std::string time_cell(const Json& value) {
  if (value.is_number_integer()) return format_time_ms(value.get<int64_t>());
  if (value.is_null()) return "";
  return compact(value, true);
}

std::string seconds_cell(const Json& value) {
  return value.is_number() ? format_seconds(value.get<double>()) : compact(value);
}

// A finished_retention: null means the jobs stay until removed.
std::string max_lost_runs_cell(const Json& value) { return value.is_null() ? "never" : compact(value); }

std::string retention_cell(const Json& value) {
  return value.is_null() ? "kept" : "removed after " + seconds_cell(value);
}

std::string cell(const Json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return compact(*it, /*bare_strings=*/true);
}

}  // namespace

// ---- jobs ------------------------------------------------------------------------------------

int run_add(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "add", kAddUsage, {{"at", true}, {"priority", true}}, 2, 3,
                           &code);
  if (!inv) return code;
  const std::string& type = inv->args.positional[0];
  const std::string& id = inv->args.positional[1];
  std::string error;
  Json body = {{"id", id}, {"data", Json::object()}};
  if (inv->args.positional.size() > 2) {
    auto data = parse_data_arg(inv->args.positional[2], &error);
    if (!data) return inv->usage_error(error);
    body["data"] = std::move(*data);
  }
  std::optional<int64_t> at, priority;
  if (!int_option(*inv, "at", &at, &error) || !int_option(*inv, "priority", &priority, &error)) {
    return inv->usage_error(error);
  }
  if (at) body["scheduled_time"] = *at;
  if (priority) body["priority"] = *priority;
  Response r = inv->client->post(path("/v1/jobs", {type}), body);
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
    print_json(r.body);
  } else {
    std::printf("added %s\n", job_name(type, id).c_str());
  }
  return kExitOk;
}

int run_get(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "get", kGetUsage, {}, 2, 2, &code);
  if (!inv) return code;
  Response r = inv->client->get(path("/v1/jobs", {inv->args.positional[0], inv->args.positional[1]}));
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
    print_json(r.body);
  } else {
    std::fputs(format_job(r.body).c_str(), stdout);
  }
  return kExitOk;
}

int run_ls(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "ls", kLsUsage,
                           {{"state", true}, {"worker", true}, {"limit", true}, {"cursor", true}},
                           1, 1, &code);
  if (!inv) return code;
  std::string error;
  std::optional<int64_t> limit;
  if (!int_option(*inv, "limit", &limit, &error)) return inv->usage_error(error);
  const std::string target =
      path("/v1/jobs", {inv->args.positional[0]}) +
      query_string({{"state", inv->args.value("state")},
                    {"worker", inv->args.value("worker")},
                    {"limit", limit ? std::to_string(*limit) : ""},
                    {"cursor", inv->args.value("cursor")}});
  Response r = inv->client->get(target);
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json jobs = value_of(r.body, "jobs", Json::array());
  if (jobs.empty()) {
    std::puts("no jobs");
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& job : jobs) {
      rows.push_back({cell(job, "id"), cell(job, "state"), cell(job, "priority"),
                      time_cell(value_of(job, "scheduled_time", Json())), cell(job, "attempts"),
                      cell(job, "worker"), truncate(compact(value_of(job, "data", Json())), 60)});
    }
    std::fputs(format_table({"ID", "STATE", "PRIORITY", "SCHEDULED", "ATTEMPTS", "WORKER", "DATA"},
                            rows)
                   .c_str(),
               stdout);
  }
  const std::string next = value_of(r.body, "next_cursor", std::string());
  if (!next.empty()) std::printf("more: --cursor %s\n", next.c_str());
  return kExitOk;
}

int run_rm(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "rm", kRmUsage, {}, 2, 2, &code);
  if (!inv) return code;
  const auto& type = inv->args.positional[0];
  const auto& id = inv->args.positional[1];
  Response r = inv->client->del(path("/v1/jobs", {type, id}));
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
    print_json(r.body);
  } else {
    std::printf("removed %s\n", job_name(type, id).c_str());
  }
  return kExitOk;
}

// ---- worker calls ----------------------------------------------------------------------------

int run_accept(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "accept", kAcceptUsage,
                           {{"timeout", true}, {"worker", true}, {"count", true}}, 1, 1, &code);
  if (!inv) return code;
  std::string error;
  double timeout = 0;
  std::optional<int64_t> count;
  if (!seconds_option(*inv, "timeout", 0, &timeout, &error) ||
      !int_option(*inv, "count", &count, &error)) {
    return inv->usage_error(error);
  }
  Json body = Json::object();
  if (inv->args.has("timeout")) body["timeout"] = timeout;
  if (inv->args.has("worker")) body["worker"] = inv->args.value("worker");
  if (count) body["count"] = *count;
  Response r = inv->client->post(path("/v1/accept", {inv->args.positional[0]}), body,
                                 poll_timeout(timeout));
  if (!r.ok()) return inv->fail(r);
  if (r.status == 204) {
    std::fprintf(stderr, "%s: no job within %s\n", inv->name.c_str(),
                 format_seconds(timeout).c_str());
    return kExitTimeout;
  }
  if (inv->json) {
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

namespace {

// update / finish / resubmit: TYPE ID --lock L [DATA_JSON] (+ --at for resubmit).
int worker_call(int argc, char** argv, const char* name, const char* usage, const char* verb,
                const char* done) {
  const bool resubmit = std::string_view(verb) == "resubmit";
  std::vector<OptionSpec> options = {{"lock", true}};
  if (resubmit) options.push_back({"at", true});
  int code = 0;
  auto inv = begin_command(argc, argv, name, usage, options, 2, 3, &code);
  if (!inv) return code;
  if (!inv->args.has("lock")) return inv->usage_error("--lock is required");
  const auto& type = inv->args.positional[0];
  const auto& id = inv->args.positional[1];
  std::string error;
  Json body = {{"lock", inv->args.value("lock")}};
  if (inv->args.positional.size() > 2) {
    auto data = parse_data_arg(inv->args.positional[2], &error);
    if (!data) return inv->usage_error(error);
    body["data"] = std::move(*data);
  }
  if (resubmit) {
    std::optional<int64_t> at;
    if (!int_option(*inv, "at", &at, &error)) return inv->usage_error(error);
    if (at) body["scheduled_time"] = *at;
  }
  Response r = inv->client->post(path("/v1/jobs", {type, id, verb}), body);
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
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

int run_update(int argc, char** argv) {
  return worker_call(argc, argv, "update", kUpdateUsage, "update", "updated");
}
int run_finish(int argc, char** argv) {
  return worker_call(argc, argv, "finish", kFinishUsage, "finish", "finished");
}
int run_resubmit(int argc, char** argv) {
  return worker_call(argc, argv, "resubmit", kResubmitUsage, "resubmit", "resubmitted");
}

// ---- watching --------------------------------------------------------------------------------

int run_wait(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "wait", kWaitUsage, {{"state", true}, {"timeout", true}},
                           2, 2, &code);
  if (!inv) return code;
  std::string error;
  double timeout = 30;
  if (!seconds_option(*inv, "timeout", 30, &timeout, &error)) return inv->usage_error(error);
  const auto& type = inv->args.positional[0];
  const auto& id = inv->args.positional[1];
  const std::string target =
      path("/v1/jobs", {type, id, "wait"}) +
      query_string({{"state", inv->args.value("state")},
                    {"timeout", inv->args.has("timeout") ? inv->args.value("timeout") : ""}});
  Response r = inv->client->get(target, poll_timeout(timeout));
  if (!r.ok()) return inv->fail(r);
  if (r.status == 204) {
    std::fprintf(stderr, "%s: %s not %s within %s\n", inv->name.c_str(),
                 job_name(type, id).c_str(), inv->args.value("state", "finished").c_str(),
                 format_seconds(timeout).c_str());
    return kExitTimeout;
  }
  const bool found = r.body.is_object() && value_of(r.body, "found", true);
  if (inv->json) {
    print_json(r.body);
  } else if (found) {
    std::fputs(format_job(r.body).c_str(), stdout);
  }
  if (!found) {
    std::fprintf(stderr, "%s: %s was removed\n", inv->name.c_str(), job_name(type, id).c_str());
    return kExitNotFound;
  }
  return kExitOk;
}

int run_watch(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "watch", kWatchUsage, {}, 2, 2, &code);
  if (!inv) return code;
  const bool json = inv->json;
  Response r = inv->client->stream(
      path("/v1/jobs", {inv->args.positional[0], inv->args.positional[1], "events"}),
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
  if (!r.ok()) return inv->fail(r);
  return kExitOk;
}

// ---- types and workers -----------------------------------------------------------------------

int run_types(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "types", kTypesUsage, {}, 0, 0, &code);
  if (!inv) return code;
  Response r = inv->client->get("/v1/types");
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
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
                    retention_cell(value_of(t, "finished_retention", Json()))});
  }
  std::fputs(format_table({"TYPE", "TIMEOUT", "MAX-LOST-RUNS", "RETENTION"}, rows).c_str(), stdout);
  return kExitOk;
}

// `kvq timeout`, `kvq retention` and `kvq max-lost-runs` take TYPE, then a VALUE to set,
// --clear, or nothing to print. `parse` turns the VALUE's text into the JSON to send, or nullopt
// when it breaks `rule`. Returns false, with *code set, after a usage error.
struct TypeSetting {
  std::string type;
  bool clear = false;
  std::optional<Json> value;
};
bool parse_type_setting(const Invocation& inv, const std::string& value_name, const std::string& rule,
                        const std::function<std::optional<Json>(const std::string&)>& parse, TypeSetting* out,
                        int* code) {
  out->type = inv.args.positional[0];
  out->clear = inv.args.flag("clear");
  const bool set = inv.args.positional.size() == 2;
  if (out->clear && set) {
    *code = inv.usage_error("give " + value_name + " or --clear, not both");
    return false;
  }
  if (!set) return true;
  out->value = parse(inv.args.positional[1]);
  if (!out->value) {
    *code = inv.usage_error(value_name + " " + rule + ", not '" + inv.args.positional[1] + "'");
    return false;
  }
  return true;
}

bool parse_seconds_setting(const Invocation& inv, TypeSetting* out, int* code) {
  return parse_type_setting(inv, "SECONDS", "must be a number > 0",
                            [](const std::string& text) -> std::optional<Json> {
                              auto seconds = parse_double(text);
                              if (!seconds || *seconds <= 0) return std::nullopt;
                              return Json(*seconds);
                            },
                            out, code);
}

// Sends only `field` (its value, or null to clear it), so a concurrent change of the type's other
// settings is never undone; with neither, reads the type.
Response put_or_get_setting(const Invocation& inv, const TypeSetting& setting, const char* field) {
  const std::string type_path = path("/v1/types", {setting.type});
  if (!setting.clear && !setting.value) return inv.client->get(type_path);
  return inv.client->put(type_path, Json{{field, setting.value.value_or(Json())}});
}

int run_timeout(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "timeout", kTimeoutUsage, {{"clear", false}}, 1, 2, &code);
  if (!inv) return code;
  TypeSetting setting;
  if (!parse_seconds_setting(*inv, &setting, &code)) return code;
  const std::string type_path = path("/v1/types", {setting.type});
  Response r = setting.clear ? inv->client->del(type_path) : put_or_get_setting(*inv, setting, "timeout");
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
    print_json(r.body);
  } else if (setting.clear) {
    std::printf("cleared the timeout of %s\n", setting.type.c_str());
  } else {
    std::printf("%s: timeout %s\n", setting.type.c_str(), seconds_cell(value_of(r.body, "timeout", Json())).c_str());
  }
  return kExitOk;
}

int run_retention(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "retention", kRetentionUsage, {{"clear", false}}, 1, 2, &code);
  if (!inv) return code;
  TypeSetting setting;
  if (!parse_seconds_setting(*inv, &setting, &code)) return code;
  Response r = put_or_get_setting(*inv, setting, "finished_retention");
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
    print_json(r.body);
  } else {
    std::printf("%s: finished jobs %s\n", setting.type.c_str(),
                retention_cell(value_of(r.body, "finished_retention", Json())).c_str());
  }
  return kExitOk;
}

int run_max_lost_runs(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "max-lost-runs", kMaxLostRunsUsage, {{"clear", false}}, 1, 2, &code);
  if (!inv) return code;
  TypeSetting setting;
  const bool parsed = parse_type_setting(*inv, "N", "must be a whole number from 1 to 1000000",
                                         [](const std::string& text) -> std::optional<Json> {
                                           auto n = parse_int(text);
                                           if (!n || *n < 1 || *n > 1'000'000) return std::nullopt;
                                           return Json(*n);
                                         },
                                         &setting, &code);
  if (!parsed) return code;
  const std::string& type = setting.type;
  Response r = put_or_get_setting(*inv, setting, "max_lost_runs");
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
    print_json(r.body);
    return kExitOk;
  }
  const Json value = value_of(r.body, "max_lost_runs", Json());
  if (value.is_null()) {
    std::printf("%s: lost runs are re-enqueued, never given up\n", type.c_str());
  } else {
    std::printf("%s: jobs are given up after %s lost runs in a row\n", type.c_str(), compact(value).c_str());
  }
  return kExitOk;
}

int run_workers(int argc, char** argv) {
  int code = 0;
  auto inv = begin_command(argc, argv, "workers", kWorkersUsage, {}, 1, 1, &code);
  if (!inv) return code;
  Response r = inv->client->get(path("/v1/workers", {inv->args.positional[0]}));
  if (!r.ok()) return inv->fail(r);
  if (inv->json) {
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
    const Json ht = value_of(w, "health_timeout", Json());
    rows.push_back({cell(w, "id"), time_cell(value_of(w, "registered_at", Json())),
                    time_cell(value_of(w, "last_heartbeat", Json())),
                    ht.is_number() ? format_seconds(ht.get<double>()) : compact(ht),
                    truncate(compact(value_of(w, "info", Json())), 60)});
  }
  std::fputs(
      format_table({"ID", "REGISTERED", "LAST_HEARTBEAT", "HEALTH_TIMEOUT", "INFO"}, rows).c_str(),
      stdout);
  return kExitOk;
}

}  // namespace kvq::cli
