// bench/peers/queue.cc — picking a system by name, and the address parsing every adapter shares.
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
  if (o.system == "kvq-http") return open_kvq_http(o.address);
  if (o.system == "kvq-lib") return open_kvq_lib(o.address, o.durable);
  throw std::invalid_argument("unknown --system '" + o.system +
                              "' (beanstalkd, postgres, redis, kvq-http, kvq-lib)");
}

}  // namespace kvq::peers
