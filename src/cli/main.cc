#include <cstdio>
#include <cstring>
#include <string_view>

#include "commands.h"
#include "exit_codes.h"
#include "kvq/serve.h"

namespace {

constexpr char kUsage[] =
    "usage: kvq <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve [options]     run the HTTP/JSON server (kvq serve --help)\n"
    "  add TYPE ID [DATA_JSON] [--if-exists keep] [--group G]   add a job   get TYPE ID   show a\n"
    "                                                            job and its errors\n"
    "  ls TYPE [--state S]              list jobs (S: pending running finished scheduled due\n"
    "                                   succeeded dead cancelled)   rm TYPE ID   remove a job\n"
    "  accept TYPE [--timeout S]        take due jobs (worker)\n"
    "  update TYPE ID --lock L [PROGRESS_JSON] [--data JSON]   report progress (worker)\n"
    "  finish TYPE ID --lock L [RESULT_JSON] [--data JSON]     the job succeeded (worker)\n"
    "  fail TYPE ID --lock L --message M [--retry-in S|--no-retry]   this attempt failed (worker)\n"
    "  snooze TYPE ID --lock L [--delay S|--at MS]   run it later, no attempt counted (worker)\n"
    "  resubmit TYPE ID --lock L [DATA_JSON]         back to pending (worker)\n"
    "  rerun TYPE ID | TYPE --all-dead|--all-cancelled   run finished jobs again (operator;\n"
    "                                   rerun, not retry: retrying is what fail does itself)\n"
    "  cancel TYPE ID                   end a pending or running job as cancelled\n"
    "  wait TYPE ID [--state S]         wait for a state     watch TYPE ID   stream a job's "
    "changes\n"
    "  types                            list types           timeout TYPE [SECONDS|--clear]\n"
    "  types get TYPE                   a type's settings\n"
    "  types set TYPE [--max-attempts N] [--backoff-base S --backoff-factor X\n"
    "                 --backoff-cap S --backoff-jitter X]   a type's retry policy\n"
    "                 [--max-running N|none] [--rate LIMIT/DURATION|none]   its limits,\n"
    "                 [--max-running-per-group N|none]   exact across every server\n"
    "  groups TYPE [--limit N] [--after G]   a type's groups: running, pending, full\n"
    "  pause TYPE [--for DURATION]      accepts of TYPE get nothing until resume TYPE\n"
    "  resume TYPE                      end TYPE's pause\n"
    "  types clear-jobs TYPE            remove every job of TYPE\n"
    "  types rm TYPE [--with-jobs]      remove TYPE (and its jobs)\n"
    "  retention TYPE [SECONDS|--clear] how long finished jobs are kept\n"
    "  max-lost-runs TYPE [N|--clear]   give a job up after N lost runs in a row\n"
    "  schedule put NAME --type T --cron EXPR [--timezone Z] [--data JSON] [--priority N]\n"
    "               [--catch-up none|one|all]   add a job of T at every time EXPR names\n"
    "  schedule ls | get NAME | rm NAME list, show (with its next runs) or remove schedules\n"
    "  schedule pause NAME | resume NAME  stop or restart enqueuing a schedule's jobs\n"
    "  workers WTYPE                    list workers         top [--once]    live counts per type\n"
    "  bench [--jobs J ...]             load-test a server on a throwaway type of its own\n"
    "  (client commands: --url URL (default $KVQ_URL or http://127.0.0.1:7411; https:// for TLS),\n"
    "   --token T, --ca-cert FILE, --client-cert FILE --client-key FILE, --json, --help;\n"
    "   see kvq COMMAND --help)\n"
    "  backup DEST [--data DIR]   copy a data directory while servers use it (default ./kvq-data)\n"
    "  demo [--data DIR]   a short tour of the kvq library (storage and jobs) on an embedded\n"
    "                      LMDB data directory (default ./kvq-data)\n"
    "  version             print the version\n"
    "  help                print this help\n"
    "\n";
constexpr char kSeeAlso[] = "\nSee README.md and docs/http-api.md.\n";

void print_usage(std::FILE* out) {
  std::fputs(kUsage, out);
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
  if (command == "serve") return kvq::app::run_serve(argc - 1, argv + 1);
  if (command == "demo") return kvq::cli::run_demo(argc - 1, argv + 1);
  if (command == "backup") return kvq::cli::run_backup(argc - 1, argv + 1);
  if (command == "add") return kvq::cli::run_add(argc - 1, argv + 1);
  if (command == "get") return kvq::cli::run_get(argc - 1, argv + 1);
  if (command == "ls") return kvq::cli::run_ls(argc - 1, argv + 1);
  if (command == "rm") return kvq::cli::run_rm(argc - 1, argv + 1);
  if (command == "accept") return kvq::cli::run_accept(argc - 1, argv + 1);
  if (command == "update") return kvq::cli::run_update(argc - 1, argv + 1);
  if (command == "finish") return kvq::cli::run_finish(argc - 1, argv + 1);
  if (command == "resubmit") return kvq::cli::run_resubmit(argc - 1, argv + 1);
  if (command == "fail") return kvq::cli::run_fail(argc - 1, argv + 1);
  if (command == "snooze") return kvq::cli::run_snooze(argc - 1, argv + 1);
  if (command == "rerun") return kvq::cli::run_rerun(argc - 1, argv + 1);
  if (command == "cancel") return kvq::cli::run_cancel(argc - 1, argv + 1);
  if (command == "wait") return kvq::cli::run_wait(argc - 1, argv + 1);
  if (command == "watch") return kvq::cli::run_watch(argc - 1, argv + 1);
  if (command == "types") return kvq::cli::run_types(argc - 1, argv + 1);
  if (command == "timeout") return kvq::cli::run_timeout(argc - 1, argv + 1);
  if (command == "retention") return kvq::cli::run_retention(argc - 1, argv + 1);
  if (command == "max-lost-runs") return kvq::cli::run_max_lost_runs(argc - 1, argv + 1);
  if (command == "pause") return kvq::cli::run_pause(argc - 1, argv + 1);
  if (command == "resume") return kvq::cli::run_resume(argc - 1, argv + 1);
  if (command == "groups") return kvq::cli::run_groups(argc - 1, argv + 1);
  if (command == "schedule") return kvq::cli::run_schedule(argc - 1, argv + 1);
  if (command == "workers") return kvq::cli::run_workers(argc - 1, argv + 1);
  if (command == "top") return kvq::cli::run_top(argc - 1, argv + 1);
  if (command == "bench") return kvq::cli::run_bench(argc - 1, argv + 1);
  if (command == "version" || command == "--version") {
    std::puts("kvq 0.1.0");
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
