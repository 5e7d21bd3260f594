#include <cstdio>
#include <string>
#include <string_view>

#include "commands.h"
#include "exit_codes.h"
#include "kvq/serve.h"

namespace {

using Run = int (*)(int argc, char** argv);

// The commands main() dispatches, by their first word.
struct Command {
  std::string_view name;
  Run run;
};

constexpr Command kCommands[] = {
    {"serve", kvq::app::run_serve},
    {"demo", kvq::cli::run_demo},
    {"backup", kvq::cli::run_backup},
    {"add", kvq::cli::run_add},
    {"get", kvq::cli::run_get},
    {"ls", kvq::cli::run_ls},
    {"rm", kvq::cli::run_rm},
    {"deps", kvq::cli::run_deps},
    {"accept", kvq::cli::run_accept},
    {"update", kvq::cli::run_update},
    {"finish", kvq::cli::run_finish},
    {"resubmit", kvq::cli::run_resubmit},
    {"fail", kvq::cli::run_fail},
    {"snooze", kvq::cli::run_snooze},
    {"rerun", kvq::cli::run_rerun},
    {"cancel", kvq::cli::run_cancel},
    {"wait", kvq::cli::run_wait},
    {"watch", kvq::cli::run_watch},
    {"types", kvq::cli::run_types},
    {"timeout", kvq::cli::run_timeout},
    {"retention", kvq::cli::run_retention},
    {"max-lost-runs", kvq::cli::run_max_lost_runs},
    {"pause", kvq::cli::run_pause},
    {"resume", kvq::cli::run_resume},
    {"groups", kvq::cli::run_groups},
    {"schedule", kvq::cli::run_schedule},
    {"batch", kvq::cli::run_batch},
    {"workers", kvq::cli::run_workers},
    {"top", kvq::cli::run_top},
    {"bench", kvq::cli::run_bench},
};

// One line of `kvq help`: a command's synopsis and what it does, under its section's title.
struct HelpRow {
  std::string_view section;
  std::string_view synopsis;
  std::string_view summary;
};

constexpr HelpRow kHelp[] = {
    {"server and data directory", "serve [options]", "run the HTTP/JSON server (kvq serve --help)"},
    {"server and data directory", "backup DEST [--data DIR]",
     "copy a data directory while servers use it"},
    {"server and data directory", "demo [--data DIR]",
     "a short tour of the kvq library on an embedded LMDB data directory"},
    {"jobs", "add TYPE ID [DATA_JSON] [options]",
     "add a job (--at MS, --priority N, --group G, --if-exists keep, --debounce D[:MAX], "
     "--unique-for S)"},
    {"jobs", "get TYPE ID", "show a job and its errors"},
    {"jobs", "ls TYPE [--state S]",
     "list jobs; S: pending running finished waiting scheduled due succeeded dead cancelled"},
    {"jobs", "rm TYPE ID", "remove a job (a worker running it is halted)"},
    {"jobs", "deps TYPE ID", "a job's dependencies (add --depends-on) and their results"},
    {"jobs", "cancel TYPE ID", "end a pending or running job as cancelled"},
    {"jobs", "rerun TYPE ID", "run a finished job again, its attempts starting over"},
    {"jobs", "rerun TYPE --all-dead|--all-cancelled", "rerun every dead or cancelled job of TYPE"},
    {"jobs", "wait TYPE ID [--state S]", "wait until a job reaches a state"},
    {"jobs", "watch TYPE ID", "stream a job's changes"},
    {"a worker's calls", "accept TYPE [--timeout S] [--worker W]", "take due jobs"},
    {"a worker's calls", "update TYPE ID --lock L [PROGRESS_JSON]",
     "keep the job alive, report progress"},
    {"a worker's calls", "finish TYPE ID --lock L [RESULT_JSON]", "the job succeeded"},
    {"a worker's calls", "fail TYPE ID --lock L --message M",
     "this attempt failed (--retry-in S, --no-retry)"},
    {"a worker's calls", "snooze TYPE ID --lock L [--delay S|--at MS]",
     "run it later, no attempt counted"},
    {"a worker's calls", "resubmit TYPE ID --lock L [DATA_JSON]",
     "run it again once this run ends"},
    {"types", "types", "list types"},
    {"types", "types get TYPE", "a type's settings"},
    {"types", "types set TYPE [options]",
     "its retry policy (--max-attempts, --backoff-...) and limits (--max-running, --rate, "
     "--max-running-per-group), exact across every server"},
    {"types", "types clear-jobs TYPE", "remove every job of TYPE"},
    {"types", "types rm TYPE [--with-jobs]", "remove TYPE (and its jobs)"},
    {"types", "timeout TYPE [SECONDS|--clear]",
     "show or set how long a run may go without an update"},
    {"types", "retention TYPE [SECONDS|--clear]", "how long finished jobs are kept"},
    {"types", "max-lost-runs TYPE [N|--clear]", "end a job dead after N lost runs in a row"},
    {"types", "pause TYPE [--for DURATION]", "accepts of TYPE get nothing until resume TYPE"},
    {"types", "resume TYPE", "end TYPE's pause"},
    {"types", "groups TYPE [--limit N] [--after G]", "a type's groups: running, pending, full"},
    {"schedules", "schedule put NAME --type T --cron EXPR [options]",
     "add a job of T at every time EXPR names (--timezone, --data, --priority, --catch-up)"},
    {"schedules", "schedule ls", "list schedules"},
    {"schedules", "schedule get NAME", "a schedule and its next runs"},
    {"schedules", "schedule rm NAME", "remove a schedule (the jobs it added stay)"},
    {"schedules", "schedule pause NAME", "stop enqueuing its jobs until resumed"},
    {"schedules", "schedule resume NAME", "go on from its next time"},
    {"batches", "batch put B --callback-type T --callback-id I [--data JSON] [--on success]",
     "a batch whose callback job is added once every member has ended"},
    {"batches", "batch seal B", "no more members join B; its callback may fire"},
    {"batches", "batch get B", "a batch's members by outcome, sealed, fired"},
    {"operations", "workers WTYPE", "list the registered workers of WTYPE"},
    {"operations", "top [--once]", "live counts per type"},
    {"operations", "bench [options]", "load-test a server on a throwaway type of its own"},
    {"operations", "version", "print the version"},
    {"operations", "help", "print this help"},
};

constexpr size_t kSummaryColumn = 34;
constexpr size_t kWidth = 80;

constexpr char kClientOptions[] =
    "client options (every command but serve, backup and demo talks to a server):\n"
    "  --url URL          the server (default $KVQ_URL, else http://127.0.0.1:7411; https://\n"
    "                     for TLS, with --ca-cert FILE, --client-cert FILE --client-key FILE)\n"
    "  --token T          bearer token (default $KVQ_TOKEN)\n"
    "  --json             print the server's JSON answer instead of text\n"
    "  --help             the command's own options: kvq COMMAND --help\n";
constexpr char kSeeAlso[] =
    "\nThe command line, with a session: docs/cli.md. The HTTP API: docs/http-api.md.\n";

// `text` broken at blanks into lines of at most `width` characters (a longer word stands alone).
std::string wrapped(std::string_view text, size_t width, size_t indent) {
  std::string out;
  size_t line = 0;
  while (!text.empty()) {
    const size_t end = text.find(' ');
    const std::string_view word = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line > 0 && line + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      line = 0;
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
  }
  return out;
}

void print_usage(std::FILE* out) {
  std::fputs("usage: kvq <command> [options]\n", out);
  std::string_view section;
  for (const HelpRow& row : kHelp) {
    if (row.section != section) {
      section = row.section;
      std::fprintf(out, "\n%.*s:\n", static_cast<int>(section.size()), section.data());
    }
    std::string line = "  " + std::string(row.synopsis);
    // A synopsis that reaches the summaries' column puts its summary on the next line.
    line += line.size() + 2 > kSummaryColumn ? "\n" + std::string(kSummaryColumn, ' ')
                                             : std::string(kSummaryColumn - line.size(), ' ');
    line += wrapped(row.summary, kWidth - kSummaryColumn, kSummaryColumn);
    std::fprintf(out, "%s\n", line.c_str());
  }
  std::fputs("\n", out);
  std::fputs(kClientOptions, out);
  std::fputs("\n", out);
  std::fputs(kvq::cli::kExitCodesHelp, out);
  std::fputs(kSeeAlso, out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return kvq::cli::kExitUsage;
  }
  const std::string_view command = argv[1];
  for (const Command& c : kCommands) {
    if (command == c.name) return c.run(argc - 1, argv + 1);
  }
  if (command == "version" || command == "--version") {
    std::puts("kvq " KVQ_VERSION);
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    print_usage(stdout);
    return kvq::cli::kExitOk;
  }
  std::fprintf(stderr, "kvq: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return kvq::cli::kExitUsage;
}
