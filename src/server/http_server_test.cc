// The HTTP server's connections when their client leaves while a stream is open: a real
// HttpServer on loopback, routes written for the case, and a raw socket as the client.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvq::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Exchanges a route keeps alive as a subscription would, until the test ends.
struct Kept {
  std::mutex mu;
  std::vector<std::shared_ptr<Exchange>> exchanges;
  void keep(std::shared_ptr<Exchange> ex) {
    std::lock_guard lock(mu);
    exchanges.push_back(std::move(ex));
  }
};

class HttpServerTest : public ::testing::Test {
 protected:
  void start(Router router) {
    HttpOptions options;
    options.port = 0;
    options.worker_threads = 2;
    server_ = std::make_unique<HttpServer>(options, std::move(router), nullptr);
    auto bound = server_->listen();
    ASSERT_TRUE(std::holds_alternative<unsigned short>(bound)) << std::get<std::string>(bound);
    port_ = std::get<unsigned short>(bound);
    runner_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    if (!server_) return;
    server_->stop(2s);
    runner_.join();
    // Sessions must go before the server's io_context, as in kvq serve.
    kept_.exchanges.clear();
    server_.reset();
  }

  int connect_client() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port_);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    return fd;
  }

  // Reads until the server closes; false if it has not within `wait`.
  static bool closed_within(int fd, std::chrono::milliseconds wait) {
    const auto deadline = Clock::now() + wait;
    char buffer[64 * 1024];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return true;
    }
  }

  static void send_request(int fd, const std::string& path) {
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: k\r\n\r\n";
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  }

  Kept kept_;
  std::unique_ptr<HttpServer> server_;
  unsigned short port_ = 0;
  std::thread runner_;
};

TEST_F(HttpServerTest, ARouteThatAsksAfterItsClientLeftStillHearsOfIt) {
  // The route starts its stream, then takes its time (as a store read does) before it asks to
  // hear of a disconnect; by then the server has seen the client's end.
  std::atomic<bool> heard{false};
  Router router;
  router.add("GET", "/stream", [&](Request&, std::shared_ptr<Exchange> ex) {
    ex->start_stream();
    std::this_thread::sleep_for(300ms);
    kept_.keep(ex);
    ex->on_disconnect([&heard, ex] {
      heard = true;
      ex->end_stream();
    });
  });
  start(std::move(router));
  int fd = connect_client();
  send_request(fd, "/stream");
  ::shutdown(fd, SHUT_WR);
  EXPECT_TRUE(closed_within(fd, 5s)) << "the connection of a departed client stayed open";
  ::close(fd);
  const auto deadline = Clock::now() + 2s;
  while (!heard && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(heard) << "on_disconnect's callback never ran";
}

TEST_F(HttpServerTest, AStreamWhoseClientLeftMidWriteClosesOnceTheWritesEnd) {
  // More than the kernel buffers, so that writes are still going when the client's end
  // arrives; the route keeps its exchange (as a subscription would) whatever happens.
  Router router;
  router.add("GET", "/flood", [&](Request&, std::shared_ptr<Exchange> ex) {
    kept_.keep(ex);
    ex->start_stream();
    const std::string chunk(256 * 1024, 'x');
    for (int i = 0; i < 64; ++i) ex->send_event("data", chunk);
  });
  start(std::move(router));
  int fd = connect_client();
  send_request(fd, "/flood");
  std::this_thread::sleep_for(300ms);  // the server fills the socket; the client reads nothing
  ::shutdown(fd, SHUT_WR);
  EXPECT_TRUE(closed_within(fd, 10s)) << "the connection stayed open after its writes ended";
  ::close(fd);
}

TEST_F(HttpServerTest, AnExchangeDroppedUnansweredClosesItsConnectionAndDoesNotHoldUpStop) {
  // A route that never answers (a bug) must still not leave the server waiting for the
  // connection at shutdown.
  Router router;
  router.add("GET", "/forgets", [](Request&, std::shared_ptr<Exchange>) {});
  start(std::move(router));
  int fd = connect_client();
  send_request(fd, "/forgets");
  EXPECT_TRUE(closed_within(fd, 5s)) << "the connection of a dropped exchange stayed open";
  ::close(fd);
  const auto stopping = Clock::now();
  server_->stop(5s);
  EXPECT_LT(Clock::now() - stopping, 2s) << "stop waited for a connection that was already gone";
  runner_.join();
  server_.reset();
}

}  // namespace
}  // namespace kvq::server
