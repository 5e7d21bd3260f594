// cli/requests.h — the request bodies of the client commands whose options need more than
// copying: what `kvq add`, `update`, `finish`, `fail`, `snooze`, `rerun`, `types set`, `pause` and
// `schedule put` send.
// Pure functions of the parsed command line (tested in cli_test.cc); the server makes every
// decision about the job, these only check that each option is well formed and that no two
// contradict each other. Each error is kInvalidArgument, its message for the user.
//
// They expect the positionals begin_command has already counted (TYPE ID [JSON]).
#pragma once

#include <istream>
#include <string>

#include <nlohmann/json.hpp>

#include "args.h"
#include "kvq/status.h"

namespace kvq::cli {

// A JSON argument: "-" reads all of `in`. Invalid JSON is kInvalidArgument naming `what`
// ("RESULT_JSON is not valid JSON: ...").
Result<nlohmann::json> parse_json_arg(const std::string& text, const std::string& what,
                                      std::istream& in);

// kvq add TYPE ID [DATA_JSON] [--at MS] [--priority N] [--group G] [--if-exists update|keep]
// [--depends-on TYPE/ID]... [--on-dependency-failure cancel|run] [--batch B]
// [--debounce DELAY[:MAX]] [--unique-for S]:
// {"id", "data", "scheduled_time"?, "priority"?, "group"?, "if_exists"?, "depends_on"?,
//  "on_dependency_failure"?, "batch"?, "debounce"?, "unique_for"?}.
Result<nlohmann::json> add_body(const ParsedArgs& args, std::istream& in);

// kvq update TYPE ID --lock L [PROGRESS_JSON | --progress JSON] [--data JSON]:
// {"lock", "progress"?, "data"?}. The progress is what the run reports; --data replaces the
// job's data (its input) explicitly.
Result<nlohmann::json> update_body(const ParsedArgs& args, std::istream& in);

// kvq finish TYPE ID --lock L [RESULT_JSON] [--data JSON]: {"lock", "result"?, "data"?}.
Result<nlohmann::json> finish_body(const ParsedArgs& args, std::istream& in);

// kvq fail TYPE ID --lock L --message M [--kind K] [--details JSON] [--retry-in S | --no-retry]:
// {"lock", "error": {"message", "kind"?, "details"?}, "retry_in"?, "retry"?: false}.
Result<nlohmann::json> fail_body(const ParsedArgs& args);

// kvq snooze TYPE ID --lock L [--delay S | --at MS]: {"lock", "delay"?, "scheduled_time"?}.
Result<nlohmann::json> snooze_body(const ParsedArgs& args);

// kvq rerun TYPE ID [--at MS] [--priority N], or kvq rerun TYPE --all-dead | --all-cancelled.
struct RerunRequest {
  std::string target;  // "/v1/jobs/{type}/{id}/rerun" or "/v1/types/{type}/rerun"
  nlohmann::json body;
  std::string outcome;  // "dead" or "cancelled" for a rerun of all; "" for one job
};
Result<RerunRequest> rerun_request(const ParsedArgs& args);

// kvq types set TYPE [--max-attempts N] [--backoff-base S] [--backoff-factor X]
// [--backoff-cap S] [--backoff-jitter X] [--max-running N|none] [--rate LIMIT/DURATION|none]
// [--max-running-per-group N|none]: {"max_attempts"?, "backoff"?: {"base"?, "factor"?, "cap"?,
// "jitter"?}, "max_running"?, "rate"?: {"limit", "period_ms"}, "max_running_per_group"?}, only
// what is given (the rest stays as it is; "none" sends null, which clears the limit). At least
// one is needed.
Result<nlohmann::json> type_settings_body(const ParsedArgs& args);

// kvq pause TYPE [--for DURATION]: {"for_ms"?}.
Result<nlohmann::json> pause_body(const ParsedArgs& args);

// kvq batch put B --callback-type T --callback-id I [--data JSON] [--on complete|success]:
// {"callback": {"type", "id", "data"?}, "on"?}.
Result<nlohmann::json> batch_body(const ParsedArgs& args, std::istream& in);

// kvq schedule put NAME --type T --cron EXPR [--timezone Z] [--data JSON] [--priority N]
// [--catch-up none|one|all]: {"type", "cron", "timezone"?, "data"?, "priority"?, "catch_up"?}.
Result<nlohmann::json> schedule_body(const ParsedArgs& args, std::istream& in);

}  // namespace kvq::cli
