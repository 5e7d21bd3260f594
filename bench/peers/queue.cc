// bench/peers/queue.cc — picking a system by name, and what every adapter shares: address
// parsing, LMDB's commit count.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "queue.h"

namespace kvq::peers {

std::pair<std::string, int> split_host_port(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw std::invalid_argument("want host:port, got '" + address + "'");
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;
  }
  if (port <= 0 || port > 65535) throw std::invalid_argument("bad port in '" + address + "'");
  return {address.substr(0, colon), port};
}

std::unique_ptr<QueueSystem> open_system(const SystemOptions& o) {
  if (o.system == "beanstalkd") return open_beanstalkd(o.address);
  if (o.system == "postgres") return open_postgres(o.address);
  if (o.system == "redis") return open_redis(o.address);
  if (o.system == "kvq-http") return open_kvq_http(o.address, o.data_dir);
  if (o.system == "kvq-beanstalk") return open_kvq_beanstalk(o.address, o.data_dir);
  if (o.system == "kvq-lib") return open_kvq_lib(o.address, o.durable);
  throw std::invalid_argument("unknown --system '" + o.system +
                              "' (beanstalkd, postgres, redis, kvq-http, kvq-beanstalk, kvq-lib)");
}

int64_t lmdb_commits(const std::string& data_dir) {
  // lmdb-utils' reader, in a process of its own: LMDB forbids opening one environment twice in a
  // process, and kvq-lib has it open in this one. Read-only, it takes no write lock.
  if (data_dir.find('\'') != std::string::npos)
    throw std::runtime_error("lmdb_commits: a quote in " + data_dir);
  const std::string command = "mdb_stat -e '" + data_dir + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> out(::popen(command.c_str(), "r"), ::pclose);
  if (!out) throw std::runtime_error("lmdb_commits: cannot run " + command);
  char line[512];
  const std::string key = "Last transaction ID: ";
  while (std::fgets(line, sizeof line, out.get())) {
    const std::string text = line;
    if (text.find(key) != std::string::npos)
      return std::stoll(text.substr(text.find(key) + key.size()));
  }
  throw std::runtime_error("lmdb_commits: no transaction id from " + command);
}

}  // namespace kvq::peers
