// tests/support/etcd_process.h — a real single-member etcd on loopback, for tests.
//
// Started with the flags kvq needs (docs/operations.md): a large --max-txn-ops, a quota, and
// auto-compaction. Ports are picked free at start. The data directory is the caller's.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kvq/etcd_store.h"

extern char** environ;

namespace kvq::testing {

inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class EtcdProcess {
 public:
  // Starts etcd and waits until it answers; pid() is -1 if it could not.
  // etcd writes to `data_dir`.log, never to our output (a ctest fixture's output pipe would
  // otherwise stay open, and ctest wait on it forever). With `detach` it gets its own session.
  explicit EtcdProcess(const std::string& data_dir, bool detach = false) {
    const int client = free_port(), peer = free_port();
    endpoint_ = "127.0.0.1:" + std::to_string(client);
    const std::string client_url = "http://" + endpoint_;
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
    std::vector<std::string> args = {"etcd",
                                     "--name",
                                     "kvq-test",
                                     "--data-dir",
                                     data_dir,
                                     "--listen-client-urls",
                                     client_url,
                                     "--advertise-client-urls",
                                     client_url,
                                     "--listen-peer-urls",
                                     peer_url,
                                     "--initial-advertise-peer-urls",
                                     peer_url,
                                     "--initial-cluster",
                                     "kvq-test=" + peer_url,
                                     "--max-txn-ops",
                                     "10000",
                                     "--quota-backend-bytes",
                                     "8589934592",
                                     "--auto-compaction-mode",
                                     "revision",
                                     "--auto-compaction-retention",
                                     "100000",
                                     "--log-level",
                                     "error"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    const std::string log = data_dir + ".log";
    if (detach) posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
    if (posix_spawnp(&pid_, "etcd", &files, &attr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    if (pid_ > 0 && !wait_ready()) stop();
  }
  ~EtcdProcess() {
    if (!detached_) stop();
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& endpoint() const { return endpoint_; }
  // Leaves it running when this object goes away (the ctest fixture stops it by pid).
  void release() { detached_ = true; }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  bool wait_ready() {
    auto store = open_etcd_store(
        {.endpoints = {endpoint_}, .request_timeout = std::chrono::milliseconds(500)});
    if (!store.ok()) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto txn = (*store)->begin();
      if (txn.ok() && (*txn)->read_version().ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  pid_t pid_ = -1;
  std::string endpoint_;
  bool detached_ = false;
};

}  // namespace kvq::testing
