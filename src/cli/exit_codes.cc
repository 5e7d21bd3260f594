// cli/exit_codes.cc — see exit_codes.h.
#include "exit_codes.h"

namespace kvq::cli {
namespace {

// Statuses from..to (inclusive) with error name `error` ("" = any) exit with `code`.
struct HttpExitRule {
  int from;
  int to;
  std::string_view error;
  ExitCode code;
};

// The one table. Keep kExitCodesHelp below, exit_codes.h and docs/cli.md's table ("Exit codes")
// in step with it.
constexpr HttpExitRule kHttpExitRules[] = {
    {200, 299, "", kExitOk},
    {404, 404, "not_found", kExitNotFound},
    {409, 409, "halted", kExitHalted},
    {400, 499, "", kExitUsage},
};

}  // namespace

ExitCode exit_code_for(int status, std::string_view error) {
  for (const auto& rule : kHttpExitRules) {
    if (status >= rule.from && status <= rule.to && (rule.error.empty() || rule.error == error)) {
      return rule.code;
    }
  }
  return kExitError;
}

const char kExitCodesHelp[] =
    "exit codes:\n"
    "  0  ok\n"
    "  1  server or network error: an HTTP 5xx, or no answer (trying again later may work)\n"
    "  2  usage error: a bad command line, or a request the server refused as wrong, i.e. any\n"
    "     HTTP 4xx but the two below (400 invalid_argument, 401 unauthorized, 409 no_timeout,\n"
    "     409 type_has_jobs, 409 wrong_state (cancel a finished job, rerun one that is not),\n"
    "     413 body_too_large, ...)\n"
    "  3  nothing happened in time (accept, wait)\n"
    "  4  halted (HTTP 409 halted): stop working on the job\n"
    "  5  not found (HTTP 404 not_found): the job or type does not exist\n"
    "  130  interrupted (kvq bench, after removing its type)\n";

}  // namespace kvq::cli
