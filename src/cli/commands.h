// cli/commands.h — the kvq subcommands. Each takes its own argv (argv[0] is the command name)
// and returns the process exit code (exit_codes.h).
#pragma once

namespace kvq::cli {

int run_demo(int argc, char** argv);    // demo.cc
int run_backup(int argc, char** argv);  // backup.cc

// Jobs (commands_jobs.cc).
int run_add(int argc, char** argv);
int run_get(int argc, char** argv);
int run_ls(int argc, char** argv);
int run_rm(int argc, char** argv);
int run_deps(int argc, char** argv);  // kvq deps TYPE ID: a job's dependencies

// A worker's calls on jobs (commands_worker_calls.cc).
int run_accept(int argc, char** argv);
int run_update(int argc, char** argv);
int run_finish(int argc, char** argv);
int run_resubmit(int argc, char** argv);
int run_fail(int argc, char** argv);
int run_snooze(int argc, char** argv);

// An operator's calls on a job's outcome (commands_operator_calls.cc).
int run_rerun(int argc, char** argv);
int run_cancel(int argc, char** argv);

// Following a job (commands_watch.cc).
int run_wait(int argc, char** argv);
int run_watch(int argc, char** argv);

// Types and their settings (commands_types.cc).
int run_types(int argc, char** argv);
int run_timeout(int argc, char** argv);
int run_retention(int argc, char** argv);
int run_max_lost_runs(int argc, char** argv);
int run_pause(int argc, char** argv);
int run_resume(int argc, char** argv);

// A type's groups (commands_groups.cc).
int run_groups(int argc, char** argv);

// Cron schedules (commands_schedules.cc).
int run_schedule(int argc, char** argv);

// Batches with a completion callback (commands_batches.cc).
int run_batch(int argc, char** argv);

// Worker membership (commands_workers.cc).
int run_workers(int argc, char** argv);

// Operations: live counts (commands_top.cc) and a load test (bench.cc).
int run_top(int argc, char** argv);
int run_bench(int argc, char** argv);

}  // namespace kvq::cli
