// tests/fuzz/http_fuzz.cc — libFuzzer target: arbitrary bytes on a connection to the real HTTP
// server (server/http_server.h: Beast's parser, the session's keep-alive, pipelining, body limit,
// long-poll and event-stream handling) with every route of the API on a real LMDB store, in
// process, as `kvq serve` runs it.
//
// An input is what one client sends on one connection; the client then ends its side (a
// half-close) and reads until the server closes. api_fuzz.cc fuzzes the handlers with
// well-formed requests; this one fuzzes everything before them. A finding is a crash or
// sanitizer report, a connection the server has not closed 10 s after the client's end (a
// session stuck waiting: long-polls and streams must end once their client is gone), bytes back
// that are not a sequence of whole HTTP/1.1 responses, or a response with a 5xx status other
// than 501 and 505 (a transfer coding or an HTTP version the server does not serve: answers
// about the request, not failures of the server).
//
// Run it with `make fuzz` (FUZZ_SECONDS=N for longer); the seed corpus is tests/fuzz/http_corpus.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "fuzz_server.h"
#include "server/http_server.h"

namespace kvq::server {
namespace {

namespace http = boost::beast::http;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kCloseDeadline = 10s;

[[noreturn]] void finding(const std::string& what, std::string_view input) {
  fuzz::finding("http_fuzz", what, input);
}

// The HTTP server of `kvq serve`, listening on a free loopback port, with a body limit small
// enough for inputs to exceed it.
struct Server {
  Server() {
    HttpOptions options;
    options.port = 0;
    options.max_body = 1024;
    options.io_threads = 2;
    options.worker_threads = 4;
    options.nonblocking_store = backend.store->nonblocking();
    http = std::make_unique<HttpServer>(options, backend.routes(), nullptr);
    auto bound = http->listen();
    if (auto* error = std::get_if<std::string>(&bound)) finding("cannot listen: " + *error, "");
    port = std::get<unsigned short>(bound);
    runner = std::thread([this] { http->run(); });
  }

  fuzz::Backend backend{"http_fuzz"};
  std::unique_ptr<HttpServer> http;
  unsigned short port = 0;
  std::thread runner;
};

// libFuzzer's timer (SIGALRM, for -timeout) can interrupt any of the calls below: EINTR is
// retried, never a finding (seen once in a 60 s run: "connect() failed: Interrupted system call").

// Each connection comes from its own loopback address. The client ends first, so each input
// leaves a socket in TIME_WAIT for 60 s; at a few thousand inputs a second that used up the
// ephemeral ports of one source address, and connect() failed with EADDRNOTAVAIL (26,664 of
// 28,232 ports were in TIME_WAIT in one run here; a narrowed port range reproduces it).
// IP_BIND_ADDRESS_NO_PORT lets connect() pick the port, per source address.
int connect_to(unsigned short port) {
  static std::atomic<uint32_t> connections{0};
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) finding(std::string("socket() failed: ") + std::strerror(errno), "");
  const int on = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof on);
  sockaddr_in source{};
  source.sin_family = AF_INET;
  source.sin_addr.s_addr = htonl(0x7F010000u | (connections++ & 0xFFFFu));  // 127.1.0.0/16
  if (::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0)
    finding(std::string("bind() failed: ") + std::strerror(errno), "");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    // An interrupted connect goes on in the background: wait for it, then ask how it ended.
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

// Sends what it can (the server may close early, after a 413) and ends the client's side.
void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  ::shutdown(fd, SHUT_WR);
}

// Everything the server sends until it closes; a finding if it has not closed by the deadline.
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

// Checks that `bytes` are whole HTTP/1.1 responses, none of them a 5xx but 501 and 505.
void check_responses(std::string_view bytes, std::string_view input) {
  while (!bytes.empty()) {
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    parser.body_limit(boost::none);
    boost::beast::error_code ec;
    while (!bytes.empty() && !parser.is_done()) {
      const size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
      bytes.remove_prefix(used);
      if (ec == http::error::need_more) break;
      if (ec)
        finding("the server sent bytes that are not an HTTP response: " + ec.message(), input);
    }
    if (!parser.is_done()) {
      // Only a response that the connection's end delimits (an event stream) may end here.
      ec = {};
      parser.put_eof(ec);
      if (ec) finding("a response was cut short: " + ec.message(), input);
    }
    const unsigned status = parser.get().result_int();
    if (status >= 500 && status != 501 && status != 505)
      finding("status " + std::to_string(status), input);
  }
}

void run_one(Server& server, std::string_view input) {
  const int fd = connect_to(server.port);
  send_all(fd, input);
  const std::string received = receive_until_closed(fd, input);
  ::close(fd);
  check_responses(received, input);
}

}  // namespace
}  // namespace kvq::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* server = [] {
    std::signal(SIGPIPE, SIG_IGN);     // as kvq serve does
    return new kvq::server::Server();  // lives for the whole run, as a server does
  }();
  kvq::server::run_one(*server, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
