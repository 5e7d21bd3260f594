// The HTTP client's transport against a scripted peer on loopback: responses that arrive in
// pieces, a server that never answers, a keep-alive connection the server closed, and a request
// body larger than the socket buffers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cli/client.h"

namespace kvq::cli {
namespace {

using namespace std::chrono_literals;

// Accepts connections on 127.0.0.1 and runs `script` on each (with its index), one at a time.
class ScriptedPeer {
 public:
  using Script = std::function<void(int fd, int index)>;
  explicit ScriptedPeer(Script script) : script_(std::move(script)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_, 8), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (int index = 0;; ++index) {
        const int fd = ::accept(listener_, nullptr, nullptr);
        if (fd < 0) return;  // the listener was shut down
        ++connections;
        script_(fd, index);
        ::close(fd);
      }
    });
  }
  ~ScriptedPeer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  Url url() const {
    std::string error;
    return *parse_url("http://127.0.0.1:" + std::to_string(port_), &error);
  }

  std::atomic<int> connections{0};

 private:
  Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// Reads one request (headers and a Content-Length body); returns its body, or nullopt if the
// connection ended first.
std::optional<std::string> read_request(int fd) {
  std::string data;
  char buf[65536];
  size_t header_end = std::string::npos;
  size_t need = 0;
  for (;;) {
    if (header_end == std::string::npos) {
      header_end = data.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        const auto at = data.find("Content-Length: ");
        need = at < header_end ? std::stoul(data.substr(at + 16)) : 0;
      }
    }
    if (header_end != std::string::npos && data.size() >= header_end + 4 + need) {
      return data.substr(header_end + 4, need);
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    data.append(buf, static_cast<size_t>(n));
  }
}

void send_all(int fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string response(const std::string& body, bool keep_alive = true) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         (keep_alive ? "" : "\r\nConnection: close") + "\r\n\r\n" + body;
}

TEST(ClientTransport, AResponseArrivingInPiecesIsReadWhole) {
  ScriptedPeer peer([](int fd, int) {
    if (!read_request(fd)) return;
    const std::string text = response(R"({"pieces":[1,2,3],"padding":")" + std::string(5000, 'x') + R"("})");
    for (size_t at = 0; at < text.size(); at += 1500) {
      send_all(fd, text.substr(at, 1500));
      std::this_thread::sleep_for(5ms);
    }
    read_request(fd);  // until the client goes
  });
  Client client(peer.url(), "");
  Response r = client.get("/v1/x", 5s);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body["pieces"], nlohmann::json({1, 2, 3}));
  EXPECT_EQ(r.body["padding"].get<std::string>().size(), 5000u);
}

TEST(ClientTransport, AServerThatNeverAnswersTimesOutAtTheDeadline) {
  std::atomic<bool> done{false};
  ScriptedPeer peer([&](int fd, int) {
    read_request(fd);
    while (!done) std::this_thread::sleep_for(10ms);
  });
  Client client(peer.url(), "");
  const auto start = std::chrono::steady_clock::now();
  Response r = client.get("/v1/x", 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  done = true;
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.message.find("no response from"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("within 0.3s"), std::string::npos) << r.message;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 3s);
}

TEST(ClientTransport, AKeepAliveConnectionTheServerClosedIsRetriedOnANewOne) {
  ScriptedPeer peer([](int fd, int index) {
    if (!read_request(fd)) return;
    send_all(fd, response(R"({"connection":)" + std::to_string(index) + "}"));
    if (index > 0) read_request(fd);  // the second connection stays open until the client goes
    // the first closes right after its answer, although it said keep-alive
  });
  Client client(peer.url(), "");
  Response first = client.get("/v1/x", 5s);
  ASSERT_TRUE(first.ok()) << first.describe();
  EXPECT_EQ(first.body["connection"], 0);
  std::this_thread::sleep_for(50ms);  // let the close arrive
  Response second = client.get("/v1/x", 5s);
  ASSERT_TRUE(second.ok()) << second.describe();
  EXPECT_EQ(second.body["connection"], 1);
  EXPECT_EQ(peer.connections, 2);
}

TEST(ClientTransport, ARequestBodyLargerThanTheSocketBuffersIsSentWhole) {
  ScriptedPeer peer([](int fd, int) {
    std::this_thread::sleep_for(100ms);  // let the client fill the socket buffers first
    auto body = read_request(fd);
    if (!body) return;
    send_all(fd, response(R"({"received":)" + std::to_string(body->size()) + "}"));
    read_request(fd);
  });
  Client client(peer.url(), "");
  const nlohmann::json big = {{"blob", std::string(8 << 20, 'b')}};
  Response r = client.post("/v1/x", big, 10s);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.body["received"], big.dump().size());
}

TEST(ClientTransport, ARefusedConnectionIsANetworkError) {
  std::string error;
  int port;
  {
    ScriptedPeer peer([](int, int) {});
    port = std::stoi(peer.url().port);
  }
  Client client(*parse_url("http://127.0.0.1:" + std::to_string(port), &error), "");
  Response r = client.get("/v1/x", 2s);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.message.find("cannot connect"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace kvq::cli
