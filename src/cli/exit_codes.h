// cli/exit_codes.h — what a client command's exit code says, and the one table that turns the
// server's answer into it. Pure functions (tested in cli_test.cc).
//
// The rule: 1 means "try again later may work" (the server failed or could not be reached);
// 2 means "the command itself is wrong" — whether the CLI caught the mistake or the server did
// (an HTTP 4xx); 3, 4 and 5 are the answers a script branches on.
#pragma once

#include <string_view>

namespace kvq::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,          // the server failed (5xx) or did not answer (network)
  kExitUsage = 2,          // a bad command line, or a request the server refused as wrong (4xx)
  kExitTimeout = 3,        // nothing happened in time (accept, wait)
  kExitHalted = 4,         // 409 halted: stop working on the job
  kExitNotFound = 5,       // 404 not_found: the job or type does not exist
  kExitInterrupted = 130,  // SIGINT or SIGTERM (kvq bench, after it cleaned up), as shells count
};

// The exit code for an HTTP answer: its status (0 = no answer) and the error name of its body
// ("" when none). The first row of the table in exit_codes.cc that matches wins:
//   2xx                 -> 0
//   404 not_found       -> 5
//   409 halted          -> 4
//   any other 4xx       -> 2   (400 *, 401, 403, 404 no_route, 405, 409 no_timeout /
//                               already_exists / type_has_jobs / wrong_state, 413, 414, 431)
//   anything else       -> 1   (5xx, no answer, a status outside 2xx-5xx)
ExitCode exit_code_for(int status, std::string_view error);

// The "exit codes:" paragraph of every command's --help (and `kvq help`), which states that table.
extern const char kExitCodesHelp[];

}  // namespace kvq::cli
