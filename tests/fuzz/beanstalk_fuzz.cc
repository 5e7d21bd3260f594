// tests/fuzz/beanstalk_fuzz.cc — libFuzzer target: arbitrary bytes on a connection to the
// beanstalkd protocol's listener (beanstalk/listener.h: the decoder, the session's commands, the
// connection's reads, writes and ends) over a real LMDB store, in process, as `kvq serve
// --beanstalk-listen` runs it.
//
// An input is what one client sends on one connection; the client then ends its side (a
// half-close) and reads until the server closes. A finding is a crash or sanitizer report, a
// connection the server has not closed 10 s after the client's end (a reserve must answer
// TIMED_OUT once its client has ended), bytes back that are not a sequence of whole replies of
// the protocol, or an INTERNAL_ERROR (bad input must get the protocol's errors, never a failure
// of the server).
//
// Run it with `make fuzz` (FUZZ_SECONDS=N for longer); the seed corpus is
// tests/fuzz/beanstalk_corpus, the dictionary tests/fuzz/beanstalk.dict.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "beanstalk/listener.h"
#include "fuzz_server.h"

namespace kvq::beanstalk {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kCloseDeadline = 10s;
constexpr size_t kMaxJobSize = 1024;  // small, so that inputs exceed it

[[noreturn]] void finding(const std::string& what, std::string_view input) {
  server::fuzz::finding("beanstalk_fuzz", what, input);
}

struct Server {
  Server() {
    ListenerOptions options;
    options.port = 0;
    options.max_job_size = kMaxJobSize;
    options.io_threads = 2;
    options.worker_threads = 4;
    listener = std::make_unique<Listener>(*backend.jobs, options);
    auto bound = listener->listen();
    if (auto* error = std::get_if<std::string>(&bound)) finding("cannot listen: " + *error, "");
    port = std::get<unsigned short>(bound);
    listener->start();
  }

  server::fuzz::Backend backend{"beanstalk_fuzz"};
  std::unique_ptr<Listener> listener;
  unsigned short port = 0;
};

// As in http_fuzz.cc: each connection from its own loopback address (TIME_WAIT would use up one
// address's ports), EINTR from libFuzzer's timer retried.
int connect_to(unsigned short port) {
  static std::atomic<uint32_t> connections{0};
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) finding(std::string("socket() failed: ") + std::strerror(errno), "");
  const int on = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof on);
  sockaddr_in source{};
  source.sin_family = AF_INET;
  source.sin_addr.s_addr = htonl(0x7F020000u | (connections++ & 0xFFFFu));  // 127.2.0.0/16
  if (::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0)
    finding(std::string("bind() failed: ") + std::strerror(errno), "");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    int error = errno;
    if (error == EINTR) {
      pollfd p{fd, POLLOUT, 0};
      int polled;
      do {
        polled = ::poll(&p, 1, -1);
      } while (polled < 0 && errno == EINTR);
      socklen_t size = sizeof error;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
    }
    if (error != 0) finding(std::string("connect() failed: ") + std::strerror(error), "");
  }
  return fd;
}

// Sends what it can (the server closes after quit) and ends the client's side.
void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  ::shutdown(fd, SHUT_WR);
}

std::string receive_until_closed(int fd, std::string_view input) {
  std::string received;
  const auto deadline = Clock::now() + kCloseDeadline;
  char buffer[16 * 1024];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      finding("the server had not closed the connection 10 s after the client's end", input);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return received;
    if (n < 0) finding("recv() failed", input);
    received.append(buffer, static_cast<size_t>(n));
  }
}

// Checks that `bytes` are whole replies of the protocol, none of them INTERNAL_ERROR.
void check_replies(std::string_view bytes, std::string_view input) {
  static const std::set<std::string_view> kWords = {
      "INSERTED",      "BURIED",    "EXPECTED_CRLF", "JOB_TOO_BIG", "USING",
      "DEADLINE_SOON", "TIMED_OUT", "RESERVED",      "NOT_FOUND",   "DELETED",
      "RELEASED",      "TOUCHED",   "WATCHING",      "NOT_IGNORED", "FOUND",
      "KICKED",        "OK",        "PAUSED",        "BAD_FORMAT",  "UNKNOWN_COMMAND"};
  while (!bytes.empty()) {
    const size_t end = bytes.find("\r\n");
    if (end == std::string_view::npos) finding("a reply without its CRLF", input);
    const std::string_view line = bytes.substr(0, end);
    bytes.remove_prefix(end + 2);
    const std::string_view word = line.substr(0, line.find(' '));
    if (word == "INTERNAL_ERROR") finding("INTERNAL_ERROR", input);
    if (!kWords.contains(word)) finding("not a reply: '" + std::string(line) + "'", input);
    // Replies with a chunk: RESERVED <id> <bytes>, FOUND <id> <bytes>, OK <bytes>.
    if (word != "RESERVED" && word != "FOUND" && word != "OK") continue;
    const std::string_view size_text = line.substr(line.rfind(' ') + 1);
    const size_t size = std::strtoull(std::string(size_text).c_str(), nullptr, 10);
    if (bytes.size() < size + 2 || bytes.substr(size, 2) != "\r\n")
      finding("a chunk shorter than its reply said, or not ended by CRLF", input);
    bytes.remove_prefix(size + 2);
  }
}

void run_one(Server& server, std::string_view input) {
  const int fd = connect_to(server.port);
  send_all(fd, input);
  const std::string received = receive_until_closed(fd, input);
  ::close(fd);
  check_replies(received, input);
}

}  // namespace
}  // namespace kvq::beanstalk

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* server = [] {
    std::signal(SIGPIPE, SIG_IGN);        // as kvq serve does
    return new kvq::beanstalk::Server();  // lives for the whole run, as a server does
  }();
  kvq::beanstalk::run_one(*server, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
