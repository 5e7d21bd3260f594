// tests/support/child_process.h — run a helper program as a real OS process and read its output.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

extern char** environ;

namespace kvq::testing {

class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> argv) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      wait();
    }
    if (out_) fclose(out_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0 && out_ != nullptr; }
  pid_t pid() const { return pid_; }

  // The next line the child printed (without '\n'); false at end of output.
  bool read_line(std::string& line) {
    char buf[4096];
    if (!out_ || !fgets(buf, sizeof buf, out_)) return false;
    line = buf;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return true;
  }

  // Waits for the child and returns its exit status as waitpid reports it.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

  void kill_hard() { kill(pid_, SIGKILL); }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  bool reaped_ = false;
};

}  // namespace kvq::testing
