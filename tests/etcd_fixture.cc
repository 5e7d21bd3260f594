// The ctest fixture that gives every test of a run one real etcd on loopback:
//   etcd_fixture start STATE_DIR   starts etcd (data in STATE_DIR/data), writes its endpoint
//                                  to STATE_DIR/endpoint and its pid to STATE_DIR/pid
//   etcd_fixture stop STATE_DIR    stops it and removes STATE_DIR
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/etcd_process.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string command = argv[1], dir = argv[2];
  if (command == "start") {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    kvq::testing::EtcdProcess etcd(dir + "/data", /*detach=*/true);
    if (etcd.pid() <= 0) {
      std::fprintf(stderr,
                   "etcd_fixture: etcd did not start (is Debian's etcd-server installed?)\n");
      return 1;
    }
    std::ofstream(dir + "/pid") << etcd.pid();
    std::ofstream(dir + "/endpoint") << etcd.endpoint();
    etcd.release();
    std::printf("etcd_fixture: etcd %d on %s\n", etcd.pid(), etcd.endpoint().c_str());
    return 0;
  }
  if (command == "stop") {
    int pid = 0;
    if (std::ifstream(dir + "/pid") >> pid; pid > 0) kill(pid, SIGKILL);
    std::filesystem::remove_all(dir);
    return 0;
  }
  return 2;
}
