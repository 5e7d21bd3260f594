// cli/requests.cc — see requests.h.
#include "requests.h"

#include <iterator>
#include <optional>
#include <sstream>
#include <tuple>

#include "output.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

// --NAME as an integer; nullopt when absent.
Result<std::optional<int64_t>> int_arg(const ParsedArgs& args, const std::string& name) {
  if (!args.has(name)) return std::optional<int64_t>();
  auto v = parse_int(args.value(name));
  if (!v) return InvalidArgument("--" + name + " needs an integer, not '" + args.value(name) + "'");
  return v;
}

// --NAME as a number; nullopt when absent. `seconds`: a number of seconds >= 0.
Result<std::optional<double>> number_arg(const ParsedArgs& args, const std::string& name,
                                         bool seconds) {
  if (!args.has(name)) return std::optional<double>();
  auto v = parse_double(args.value(name));
  if (!v || (seconds && *v < 0)) {
    return InvalidArgument("--" + name +
                           (seconds ? " needs a number of seconds >= 0" : " needs a number") +
                           ", not '" + args.value(name) + "'");
  }
  return v;
}

// --debounce DELAY[:MAX] and --unique-for S (seconds) into body's "debounce" and "unique_for";
// the server checks their ranges.
Status window_fields(const ParsedArgs& args, Json& body) {
  if (args.has("debounce")) {
    const std::string text = args.value("debounce");
    const size_t colon = text.find(':');
    auto delay = parse_double(text.substr(0, colon));
    std::optional<double> max_delay;
    if (colon != std::string::npos) max_delay = parse_double(text.substr(colon + 1));
    if (!delay || *delay < 0 || (colon != std::string::npos && (!max_delay || *max_delay < 0)))
      return InvalidArgument("--debounce takes DELAY or DELAY:MAX_DELAY in seconds, not '" + text +
                             "'");
    body["debounce"] = {{"delay", *delay}};
    if (max_delay) body["debounce"]["max_delay"] = *max_delay;
  }
  KVQ_ASSIGN_OR_RETURN(auto unique_for, number_arg(args, "unique-for", /*seconds=*/true));
  if (unique_for) body["unique_for"] = *unique_for;
  return Status::OK();
}

Status need(const ParsedArgs& args, const std::string& name) {
  if (!args.has(name)) return InvalidArgument("--" + name + " is required");
  return Status::OK();
}

Status not_both(const ParsedArgs& args, const std::string& a, const std::string& b) {
  const bool has_a = args.has(a) || args.flag(a);
  const bool has_b = args.has(b) || args.flag(b);
  if (has_a && has_b) return InvalidArgument("give --" + a + " or --" + b + ", not both");
  return Status::OK();
}

// The optional positional JSON at `index` into body[field].
Status positional_json(const ParsedArgs& args, size_t index, const std::string& what,
                       const char* field, std::istream& in, Json& body) {
  if (args.positional.size() <= index) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(body[field], parse_json_arg(args.positional[index], what, in));
  return Status::OK();
}

// --data JSON: the job's new data (the server says whether it is a valid one).
Status data_option(const ParsedArgs& args, std::istream& in, Json& body) {
  if (!args.has("data")) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(Json data, parse_json_arg(args.value("data"), "--data", in));
  body["data"] = std::move(data);
  return Status::OK();
}

}  // namespace

Result<Json> parse_json_arg(const std::string& text, const std::string& what, std::istream& in) {
  std::string source = text;
  if (text == "-") {
    source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  Json value = Json::parse(source, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return InvalidArgument(what + " is not valid JSON: " + truncate(source, 60));
  }
  return value;
}

Result<Json> add_body(const ParsedArgs& args, std::istream& in) {
  Json body = {{"id", args.positional.at(1)}, {"data", Json::object()}};
  KVQ_RETURN_IF_ERROR(positional_json(args, 2, "DATA_JSON", "data", in, body));
  KVQ_ASSIGN_OR_RETURN(auto at, int_arg(args, "at"));
  KVQ_ASSIGN_OR_RETURN(auto priority, int_arg(args, "priority"));
  if (at) body["scheduled_time"] = *at;
  if (priority) body["priority"] = *priority;
  if (args.has("group")) body["group"] = args.value("group");
  if (args.has("if-exists")) {
    const std::string mode = args.value("if-exists");
    if (mode != "update" && mode != "keep") {
      return InvalidArgument("--if-exists takes update or keep, not '" + mode + "'");
    }
    body["if_exists"] = mode;
  }
  if (args.has("depends-on")) {
    Json deps = Json::array();
    for (const std::string& dep : args.every("depends-on")) {
      const size_t slash = dep.find('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == dep.size()) {
        return InvalidArgument("--depends-on takes TYPE/ID, not '" + dep + "'");
      }
      deps.push_back({{"type", dep.substr(0, slash)}, {"id", dep.substr(slash + 1)}});
    }
    body["depends_on"] = std::move(deps);
  }
  if (args.has("on-dependency-failure")) {
    const std::string policy = args.value("on-dependency-failure");
    if (policy != "cancel" && policy != "run") {
      return InvalidArgument("--on-dependency-failure takes cancel or run, not '" + policy + "'");
    }
    body["on_dependency_failure"] = policy;
  }
  if (args.has("batch")) {
    if (args.value("batch").empty()) return InvalidArgument("--batch takes a batch id, not ''");
    body["batch"] = args.value("batch");
  }
  KVQ_RETURN_IF_ERROR(window_fields(args, body));
  return body;
}

Result<Json> update_body(const ParsedArgs& args, std::istream& in) {
  KVQ_RETURN_IF_ERROR(need(args, "lock"));
  Json body = {{"lock", args.value("lock")}};
  if (args.positional.size() > 2 && args.has("progress")) {
    return InvalidArgument("give PROGRESS_JSON or --progress, not both");
  }
  KVQ_RETURN_IF_ERROR(positional_json(args, 2, "PROGRESS_JSON", "progress", in, body));
  if (args.has("progress")) {
    KVQ_ASSIGN_OR_RETURN(body["progress"],
                         parse_json_arg(args.value("progress"), "--progress", in));
  }
  KVQ_RETURN_IF_ERROR(data_option(args, in, body));
  return body;
}

Result<Json> finish_body(const ParsedArgs& args, std::istream& in) {
  KVQ_RETURN_IF_ERROR(need(args, "lock"));
  Json body = {{"lock", args.value("lock")}};
  KVQ_RETURN_IF_ERROR(positional_json(args, 2, "RESULT_JSON", "result", in, body));
  KVQ_RETURN_IF_ERROR(data_option(args, in, body));
  return body;
}

Result<Json> fail_body(const ParsedArgs& args) {
  KVQ_RETURN_IF_ERROR(need(args, "lock"));
  KVQ_RETURN_IF_ERROR(need(args, "message"));
  KVQ_RETURN_IF_ERROR(not_both(args, "retry-in", "no-retry"));
  Json error = {{"message", args.value("message")}};
  if (args.has("kind")) error["kind"] = args.value("kind");
  if (args.has("details")) {
    std::istringstream no_stdin;
    KVQ_ASSIGN_OR_RETURN(error["details"],
                         parse_json_arg(args.value("details"), "--details", no_stdin));
  }
  Json body = {{"lock", args.value("lock")}, {"error", std::move(error)}};
  KVQ_ASSIGN_OR_RETURN(auto retry_in, number_arg(args, "retry-in", /*seconds=*/true));
  if (retry_in) body["retry_in"] = *retry_in;
  if (args.flag("no-retry")) body["retry"] = false;
  return body;
}

Result<Json> snooze_body(const ParsedArgs& args) {
  KVQ_RETURN_IF_ERROR(need(args, "lock"));
  KVQ_RETURN_IF_ERROR(not_both(args, "delay", "at"));
  Json body = {{"lock", args.value("lock")}};
  KVQ_ASSIGN_OR_RETURN(auto delay, number_arg(args, "delay", /*seconds=*/true));
  KVQ_ASSIGN_OR_RETURN(auto at, int_arg(args, "at"));
  if (delay) body["delay"] = *delay;
  if (at) body["scheduled_time"] = *at;
  return body;
}

Result<RerunRequest> rerun_request(const ParsedArgs& args) {
  const std::string& type = args.positional.at(0);
  const bool dead = args.flag("all-dead");
  const bool cancelled = args.flag("all-cancelled");
  KVQ_RETURN_IF_ERROR(not_both(args, "all-dead", "all-cancelled"));
  RerunRequest out;
  if (dead || cancelled) {
    if (args.positional.size() > 1) {
      return InvalidArgument("give ID or --all-" + std::string(dead ? "dead" : "cancelled") +
                             ", not both");
    }
    if (args.has("at") || args.has("priority")) {
      return InvalidArgument("--at and --priority apply to the rerun of one job");
    }
    out.outcome = dead ? "dead" : "cancelled";
    out.target = path("/v1/types", {type, "rerun"});
    out.body = {{"outcome", out.outcome}};
    return out;
  }
  if (args.positional.size() < 2) {
    return InvalidArgument("give the ID of the job to rerun, or --all-dead or --all-cancelled");
  }
  out.target = path("/v1/jobs", {type, args.positional[1], "rerun"});
  out.body = Json::object();
  KVQ_ASSIGN_OR_RETURN(auto at, int_arg(args, "at"));
  KVQ_ASSIGN_OR_RETURN(auto priority, int_arg(args, "priority"));
  if (at) out.body["scheduled_time"] = *at;
  if (priority) out.body["priority"] = *priority;
  return out;
}

Result<Json> type_settings_body(const ParsedArgs& args) {
  Json body = Json::object();
  KVQ_ASSIGN_OR_RETURN(auto max_attempts, int_arg(args, "max-attempts"));
  if (max_attempts) body["max_attempts"] = *max_attempts;
  Json backoff = Json::object();
  for (const auto& [option, field, seconds] :
       {std::tuple{"backoff-base", "base", true}, std::tuple{"backoff-factor", "factor", false},
        std::tuple{"backoff-cap", "cap", true}, std::tuple{"backoff-jitter", "jitter", false}}) {
    KVQ_ASSIGN_OR_RETURN(auto value, number_arg(args, option, seconds));
    if (value) backoff[field] = *value;
  }
  if (!backoff.empty()) body["backoff"] = std::move(backoff);
  for (const auto& [option, field] :
       {std::pair{"max-running", "max_running"},
        std::pair{"max-running-per-group", "max_running_per_group"}}) {
    if (!args.has(option)) continue;
    const std::string text = args.value(option);
    auto n = parse_int(text);
    if (text == "none") {
      body[field] = nullptr;
    } else if (n && *n >= 1) {
      body[field] = *n;
    } else {
      return InvalidArgument(std::string("--") + option +
                             " needs a whole number >= 1 or none, not '" + text + "'");
    }
  }
  if (args.has("rate")) {
    const std::string text = args.value("rate");
    const size_t slash = text.find('/');
    std::optional<int64_t> limit, period_ms;
    if (slash != std::string::npos) {
      limit = parse_int(std::string_view(text).substr(0, slash));
      period_ms = parse_duration_ms(std::string_view(text).substr(slash + 1));
    }
    if (text == "none") {
      body["rate"] = nullptr;
    } else if (limit && *limit >= 1 && period_ms) {
      body["rate"] = {{"limit", *limit}, {"period_ms", *period_ms}};
    } else {
      return InvalidArgument(
          "--rate needs LIMIT/DURATION (such as 10/1s or 100/1m) or none, not '" + text + "'");
    }
  }
  if (body.empty()) {
    return InvalidArgument(
        "nothing to set: give --max-attempts, --backoff-base, --backoff-factor, --backoff-cap, "
        "--backoff-jitter, --max-running, --max-running-per-group or --rate");
  }
  return body;
}

Result<Json> pause_body(const ParsedArgs& args) {
  Json body = Json::object();
  if (args.has("for")) {
    auto ms = parse_duration_ms(args.value("for"));
    if (!ms) {
      return InvalidArgument("--for needs a duration such as 90s, 10m or 2h, not '" +
                             args.value("for") + "'");
    }
    body["for_ms"] = *ms;
  }
  return body;
}

Result<Json> batch_body(const ParsedArgs& args, std::istream& in) {
  KVQ_RETURN_IF_ERROR(need(args, "callback-type"));
  KVQ_RETURN_IF_ERROR(need(args, "callback-id"));
  Json callback = {{"type", args.value("callback-type")}, {"id", args.value("callback-id")}};
  KVQ_RETURN_IF_ERROR(data_option(args, in, callback));
  Json body = {{"callback", std::move(callback)}};
  if (args.has("on")) {
    const std::string on = args.value("on");
    if (on != "complete" && on != "success")
      return InvalidArgument("--on takes complete or success, not '" + on + "'");
    body["on"] = on;
  }
  return body;
}

Result<Json> schedule_body(const ParsedArgs& args, std::istream& in) {
  KVQ_RETURN_IF_ERROR(need(args, "type"));
  KVQ_RETURN_IF_ERROR(need(args, "cron"));
  Json body = {{"type", args.value("type")}, {"cron", args.value("cron")}};
  if (args.has("timezone")) body["timezone"] = args.value("timezone");
  KVQ_RETURN_IF_ERROR(data_option(args, in, body));
  KVQ_ASSIGN_OR_RETURN(auto priority, int_arg(args, "priority"));
  if (priority) body["priority"] = *priority;
  if (args.has("catch-up")) {
    const std::string mode = args.value("catch-up");
    if (mode != "none" && mode != "one" && mode != "all") {
      return InvalidArgument("--catch-up takes none, one or all, not '" + mode + "'");
    }
    body["catch_up"] = mode;
  }
  return body;
}

}  // namespace kvq::cli
