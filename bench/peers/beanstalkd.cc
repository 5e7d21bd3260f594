// bench/peers/beanstalkd.cc — a small client for beanstalkd's text protocol (put, reserve-with-
// timeout, delete; doc/protocol.txt in beanstalkd's sources), over one blocking TCP connection.
// The very same client drives beanstalkd and kvq's beanstalkd protocol listener (kvq-beanstalk):
// only where the commits are counted differs.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "queue.h"

namespace kvq::peers {
namespace {

constexpr std::string_view kTube = "bench";

class Connection {
 public:
  explicit Connection(const std::string& address) {
    auto [host, port] = split_host_port(address);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
      throw std::runtime_error("beanstalkd: cannot resolve " + address);
    fd_ = ::socket(found->ai_family, SOCK_STREAM, 0);
    const bool connected = fd_ >= 0 && ::connect(fd_, found->ai_addr, found->ai_addrlen) == 0;
    freeaddrinfo(found);
    if (!connected)
      throw std::runtime_error("beanstalkd: cannot connect to " + address + ": " +
                               std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw std::runtime_error(std::string("beanstalkd: send: ") + std::strerror(errno));
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  // One "\r\n"-terminated line, without the terminator.
  std::string line() {
    for (;;) {
      if (auto end = buffer_.find("\r\n"); end != std::string::npos) {
        std::string out = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return out;
      }
      fill();
    }
  }
  // Exactly `n` bytes followed by "\r\n".
  std::string body(size_t n) {
    while (buffer_.size() < n + 2) fill();
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n + 2);
    return out;
  }
  // Sends a command and returns the reply line.
  std::string command(std::string_view text) {
    count_request();
    send(text);
    return line();
  }

 private:
  void fill() {
    char chunk[4096];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) throw std::runtime_error("beanstalkd: connection closed");
    buffer_.append(chunk, static_cast<size_t>(n));
  }

  int fd_ = -1;
  std::string buffer_;
};

void expect_prefix(const std::string& reply, std::string_view prefix, std::string_view what) {
  if (reply.compare(0, prefix.size(), prefix) != 0)
    throw std::runtime_error("beanstalkd: " + std::string(what) + ": " + reply);
}

class BeanstalkClient final : public QueueClient {
 public:
  explicit BeanstalkClient(const std::string& address) : conn_(address) {
    expect_prefix(conn_.command("use " + std::string(kTube) + "\r\n"), "USING", "use");
    expect_prefix(conn_.command("watch " + std::string(kTube) + "\r\n"), "WATCHING", "watch");
    expect_prefix(conn_.command("ignore default\r\n"), "WATCHING", "ignore");
  }

  void add(int64_t, const std::string& payload) override {
    // Priority 0, no delay, 120 s time-to-run (after which beanstalkd re-queues a reserved job).
    std::string put = "put 0 0 120 " + std::to_string(payload.size()) + "\r\n";
    put += payload;
    put += "\r\n";
    expect_prefix(conn_.command(put), "INSERTED", "put");
  }

  bool reserve(Reserved& out, std::chrono::milliseconds wait) override {
    const long seconds = static_cast<long>((wait.count() + 999) / 1000);
    std::string reply = conn_.command("reserve-with-timeout " + std::to_string(seconds) + "\r\n");
    if (reply == "TIMED_OUT") return false;
    expect_prefix(reply, "RESERVED ", "reserve");
    const size_t space = reply.find(' ', 9);
    if (space == std::string::npos) throw std::runtime_error("beanstalkd: bad reply " + reply);
    out.handle = reply.substr(9, space - 9);
    out.payload = conn_.body(std::stoul(reply.substr(space + 1)));
    return true;
  }

  void finish(const Reserved& job) override {
    expect_prefix(conn_.command("delete " + job.handle + "\r\n"), "DELETED", "delete");
  }

 private:
  Connection conn_;
};

// beanstalkd's own count of binlog records written (one per put, delete, ... it logs), from
// `stats` on a connection of its own (not counted as a benchmark request).
int64_t binlog_records(const std::string& address) {
  Connection conn(address);
  conn.send("stats\r\n");
  const std::string reply = conn.line();
  expect_prefix(reply, "OK ", "stats");
  const std::string yaml = conn.body(std::stoul(reply.substr(3)));
  const std::string key = "\nbinlog-records-written: ";
  const auto at = yaml.find(key);
  if (at == std::string::npos)
    throw std::runtime_error("beanstalkd: stats has no " + key.substr(1));
  return std::stoll(yaml.substr(at + key.size()));
}

// A server speaking the protocol: beanstalkd itself, or kvq serve's listener (kvq-beanstalk).
class BeanstalkProtocol final : public QueueSystem {
 public:
  // `kvq_data_dir`: for kvq-beanstalk, kvq serve's data directory, whose LMDB commits are
  // counted (empty: not counted).
  BeanstalkProtocol(std::string address, bool kvq, std::string kvq_data_dir)
      : address_(std::move(address)), kvq_(kvq), kvq_data_dir_(std::move(kvq_data_dir)) {}
  // Tubes exist while used (kvq: a tube used for the first time gets a type): nothing to create.
  void prepare() override { Connection check(address_); }
  std::unique_ptr<QueueClient> connect() override {
    return std::make_unique<BeanstalkClient>(address_);
  }
  int64_t commits() override {
    if (!kvq_) return binlog_records(address_);
    return kvq_data_dir_.empty() ? -1 : lmdb_commits(kvq_data_dir_);
  }

 private:
  std::string address_;
  bool kvq_;
  std::string kvq_data_dir_;
};

}  // namespace

std::unique_ptr<QueueSystem> open_beanstalkd(const std::string& address) {
  return std::make_unique<BeanstalkProtocol>(address, false, "");
}

std::unique_ptr<QueueSystem> open_kvq_beanstalk(const std::string& address,
                                                const std::string& data_dir) {
  return std::make_unique<BeanstalkProtocol>(address, true, data_dir);
}

}  // namespace kvq::peers
