// tests/support/etcd_cluster.h — a real multi-member etcd cluster on loopback, for tests that
// pause (SIGSTOP) or kill members. Each member runs with the flags EtcdProcess uses; ports are
// picked free at start; the data directories are under the caller's. Members are killed when
// the object goes away (a paused one too: SIGKILL ends a stopped process).
#pragma once

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/etcd_process.h"

namespace kvq::testing {

// Runs `cmd` with the shell; what it printed goes to `said`. Its exit status (pclose's), -1 if
// it could not be started.
inline int run_command(const std::string& cmd, std::string& said) {
  FILE* out = popen(cmd.c_str(), "r");
  if (!out) return -1;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, out)) said.append(buf, n);
  return pclose(out);
}

class EtcdCluster {
 public:
  // Starts `size` members and waits until each answers a linearizable read (so a leader is
  // elected); ready() is false if that did not happen within 30 s.
  EtcdCluster(const std::string& dir, int size) {
    std::string initial;
    for (int i = 0; i < size; ++i) {
      Member m{"m" + std::to_string(i), free_port(), free_port(), -1};
      initial += (i ? "," : "") + m.name + "=http://127.0.0.1:" + std::to_string(m.peer);
      members_.push_back(m);
    }
    for (auto& m : members_) spawn(dir, m, initial);
    ready_ = wait_ready();
  }
  ~EtcdCluster() {
    for (auto& m : members_) {
      if (m.pid <= 0) continue;
      kill(m.pid, SIGKILL);
      waitpid(m.pid, nullptr, 0);
    }
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  bool ready() const { return ready_; }
  size_t size() const { return members_.size(); }
  std::string endpoint(size_t i) const { return "127.0.0.1:" + std::to_string(members_[i].client); }
  // Returns once every thread of the member is stopped: kill() only queues SIGSTOP, and a
  // member whose threads had not yet been scheduled to take it answered a read in 1 ms after
  // kill() returned (on a loaded machine), so a test that paused it measured nothing.
  bool pause(size_t i) {
    kill(members_[i].pid, SIGSTOP);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!all_threads_stopped(members_[i].pid)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  void resume(size_t i) { kill(members_[i].pid, SIGCONT); }

  // How many calls of gRPC method `method` (Range, Txn, ...) member i has answered, from its
  // /metrics (grpc_server_handled_total), with gRPC code `code` (OK, ...) or any if empty; -1
  // if they could not be read.
  long handled(size_t i, const std::string& method, const std::string& code = "") const {
    const std::string cmd =
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://" + endpoint(i) +
        "/metrics', timeout=5).read().decode())\" 2>/dev/null";
    std::string said;
    if (run_command(cmd, said) != 0) return -1;
    long total = 0;
    std::istringstream lines(said);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("grpc_server_handled_total{", 0) != 0 ||
          line.find("grpc_method=\"" + method + "\"") == std::string::npos ||
          (!code.empty() && line.find("grpc_code=\"" + code + "\"") == std::string::npos))
        continue;
      total += std::stol(line.substr(line.rfind(' ') + 1));
    }
    return total;
  }

  // The index of the Raft leader, from Debian's etcdctl (`endpoint status`); -1 if none said so.
  int leader() const {
    std::string endpoints;
    for (size_t i = 0; i < members_.size(); ++i) endpoints += (i ? "," : "") + endpoint(i);
    const std::string cmd = "ETCDCTL_API=3 etcdctl --command-timeout=2s --endpoints=" + endpoints +
                            " endpoint status -w simple 2>/dev/null";
    std::string said;
    run_command(cmd, said);
    // One line per endpoint: "ENDPOINT, ID, VERSION, DB SIZE, IS LEADER, ..."
    std::istringstream lines(said);
    for (std::string line; std::getline(lines, line);) {
      std::vector<std::string> fields;
      std::istringstream parts(line);
      for (std::string f; std::getline(parts, f, ',');) {
        const size_t start = f.find_first_not_of(' ');
        fields.push_back(start == std::string::npos ? "" : f.substr(start));
      }
      if (fields.size() < 5 || fields[4] != "true") continue;
      for (size_t i = 0; i < members_.size(); ++i) {
        if (fields[0] == endpoint(i)) return static_cast<int>(i);
      }
    }
    return -1;
  }

 private:
  struct Member {
    std::string name;
    int client, peer;
    pid_t pid;
  };

  void spawn(const std::string& dir, Member& m, const std::string& initial) {
    const std::string client_url = "http://127.0.0.1:" + std::to_string(m.client);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(m.peer);
    const std::string data = dir + "/" + m.name;
    std::vector<std::string> args = {"etcd",
                                     "--name",
                                     m.name,
                                     "--data-dir",
                                     data,
                                     "--listen-client-urls",
                                     client_url,
                                     "--advertise-client-urls",
                                     client_url,
                                     "--listen-peer-urls",
                                     peer_url,
                                     "--initial-advertise-peer-urls",
                                     peer_url,
                                     "--initial-cluster",
                                     initial,
                                     "--initial-cluster-state",
                                     "new",
                                     "--initial-cluster-token",
                                     "kvq-test-cluster",
                                     "--max-txn-ops",
                                     "10000",
                                     "--quota-backend-bytes",
                                     "8589934592",
                                     "--log-level",
                                     "error"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    const std::string log = data + ".log";
    posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
    if (posix_spawnp(&m.pid, "etcd", &files, nullptr, argv.data(), environ) != 0) m.pid = -1;
    posix_spawn_file_actions_destroy(&files);
  }

  // Whether every thread of `pid` is in state T (stopped), from /proc/<pid>/task/*/stat.
  static bool all_threads_stopped(pid_t pid) {
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    DIR* dir = opendir(tasks.c_str());
    if (!dir) return false;
    bool stopped = true;
    int seen = 0;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      std::ifstream stat(tasks + "/" + entry->d_name + "/stat");
      std::string line;
      if (!std::getline(stat, line)) continue;  // the thread has just exited
      ++seen;
      // "tid (comm) S ...": the state follows the last ')' (comm may hold one).
      const size_t close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') {
        stopped = false;
        break;
      }
    }
    closedir(dir);
    return stopped && seen > 0;
  }

  bool wait_ready() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].pid <= 0) return false;
      auto store = open_etcd_store(
          {.endpoints = {endpoint(i)}, .request_timeout = std::chrono::milliseconds(500)});
      if (!store.ok()) return false;
      for (;;) {
        auto txn = (*store)->begin();
        if (txn.ok() && (*txn)->read_version().ok()) break;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    return true;
  }

  std::vector<Member> members_;
  bool ready_ = false;
};

}  // namespace kvq::testing
