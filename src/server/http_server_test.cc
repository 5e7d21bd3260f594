// The HTTP server's connections when their client leaves while a stream is open, and its TLS:
// a real HttpServer on loopback, routes written for the case, and a raw socket or a real
// Beast-over-OpenSSL client, with certificates the test generates (the openssl command).
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <cstdlib>
#include <filesystem>

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
  void start(Router router, HttpOptions options = {}) {
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
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return true;
    }
  }

  static void send_request(int fd, const std::string& path) {
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: k\r\n\r\n";
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
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

// ---- before the body ----

// Reads one response's head (up to the blank line); "" if the server sends none within `wait`.
std::string read_head(int fd, std::chrono::milliseconds wait) {
  std::string got;
  const auto deadline = Clock::now() + wait;
  while (got.find("\r\n\r\n") == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buffer[4096];
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return got;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

TEST_F(HttpServerTest, AWrongTokenIsRefusedOnTheHeaderBeforeAnyBodyArrives) {
  std::atomic<int> called{0};
  Router router;
  router.add("POST", "/x", [&](Request&, std::shared_ptr<Exchange> ex) {
    ++called;
    ex->reply({200, "{}"});
  });
  HttpOptions options;
  options.token = "secret";
  start(std::move(router), options);
  int fd = connect_client();
  const std::string head =
      "POST /x HTTP/1.1\r\nHost: k\r\nAuthorization: Bearer secreT\r\nContent-Length: "
      "1000000\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  // Not a byte of the body is sent: the answer must come from the header alone.
  const std::string answer = read_head(fd, 5s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 401 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_TRUE(closed_within(fd, 5s));
  ::close(fd);
  EXPECT_EQ(called, 0);
}

TEST_F(HttpServerTest, SlowHeadersAndBodiesAreCutOffAtTheirTimeouts) {
  Router router;
  router.add("POST", "/x", [](Request&, std::shared_ptr<Exchange> ex) { ex->reply({200, "{}"}); });
  HttpOptions options;
  options.header_timeout = 300ms;
  options.body_timeout = 300ms;
  start(std::move(router), options);
  int header = connect_client();
  int body = connect_client();
  const std::string part_header = "POST /x HTTP/1.1\r\nHost: k\r\nContent-Le";
  const std::string part_body = "POST /x HTTP/1.1\r\nHost: k\r\nContent-Length: 100\r\n\r\n{\"a\":";
  ASSERT_GT(::send(header, part_header.data(), part_header.size(), MSG_NOSIGNAL), 0);
  ASSERT_GT(::send(body, part_body.data(), part_body.size(), MSG_NOSIGNAL), 0);
  const auto started = Clock::now();
  EXPECT_TRUE(closed_within(header, 5s)) << "a header that never ended held its connection";
  EXPECT_TRUE(closed_within(body, 5s)) << "a body that never ended held its connection";
  EXPECT_LT(Clock::now() - started, 3s);
  ::close(header);
  ::close(body);
}

// ---- TLS ----

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

// A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA, made
// once for the suite with the openssl command.
struct Certificates {
  std::filesystem::path dir;
  std::string file(const char* name) const { return (dir / name).string(); }
};

const Certificates& certificates() {
  static const Certificates made = [] {
    char pattern[] = "/tmp/kvq-tls-test-XXXXXX";
    Certificates c{::mkdtemp(pattern)};
    const std::string d = c.dir.string();
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes ";
    const std::string script =
        "cd " + d +
        " && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext && "
        "openssl req -x509" +
        key +
        "-keyout ca.key -out ca.pem -days 2 -subj /CN=kvq-test-ca && "
        "openssl req" +
        key +
        "-keyout server.key -out server.csr -subj /CN=localhost && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
        "-days 2 "
        "-extfile san.ext && "
        "openssl req" +
        key +
        "-keyout client.key -out client.csr -subj /CN=kvq-test-client && "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem "
        "-days 2";
    if (std::system(("(" + script + ") >/dev/null 2>&1").c_str()) != 0) c.dir.clear();
    return c;
  }();
  return made;
}

class TlsTest : public HttpServerTest {
 protected:
  void SetUp() override {
    if (certificates().dir.empty())
      GTEST_SKIP() << "could not make test certificates with the openssl command";
  }
  // Serves GET /hello and, with a client CA, asks clients for certificates.
  void start_tls(bool client_ca, std::chrono::milliseconds handshake_timeout = 10s) {
    Router router;
    router.add("GET", "/hello", [](Request&, std::shared_ptr<Exchange> ex) {
      ex->reply({200, "{\"hi\":1}"});
    });
    router.add("GET", "/stream", [](Request&, std::shared_ptr<Exchange> ex) {
      ex->start_stream();
      ex->send_event("job", "{\"n\":1}");
      ex->send_event("job", "{\"n\":2}");
      ex->end_stream();
    });
    HttpOptions options;
    options.tls_cert = certificates().file("server.pem");
    options.tls_key = certificates().file("server.key");
    if (client_ca) options.tls_client_ca = certificates().file("ca.pem");
    options.handshake_timeout = handshake_timeout;
    start(std::move(router), options);
  }

  // A client that trusts the test CA and checks the server's name, with the client
  // certificate or without.
  static ssl::context client_context(bool with_certificate) {
    ssl::context ctx(ssl::context::tls_client);
    ctx.load_verify_file(certificates().file("ca.pem"));
    ctx.set_verify_mode(ssl::verify_peer);
    if (with_certificate) {
      ctx.use_certificate_chain_file(certificates().file("client.pem"));
      ctx.use_private_key_file(certificates().file("client.key"), ssl::context::pem);
    }
    return ctx;
  }

  struct Outcome {
    beast::error_code ec;  // the first failure: handshake, write or read
    unsigned status = 0;
    std::string body;
  };
  Outcome get(ssl::context& ctx, const std::string& path) {
    asio::io_context ioc;
    beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
    stream.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
    Outcome out;
    beast::get_lowest_layer(stream).expires_after(10s);
    beast::get_lowest_layer(stream).connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_));
    stream.handshake(ssl::stream_base::client, out.ec);
    if (out.ec) return out;
    http::request<http::empty_body> request(http::verb::get, path, 11);
    request.set(http::field::host, "127.0.0.1");
    http::write(stream, request, out.ec);
    if (out.ec) return out;
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response, out.ec);
    if (out.ec) return out;
    out.status = response.result_int();
    out.body = response.body();
    return out;
  }
};

TEST_F(TlsTest, ServesARequestOverTls) {
  start_tls(false);
  auto ctx = client_context(false);
  auto out = get(ctx, "/hello");
  ASSERT_FALSE(out.ec) << out.ec.message();
  EXPECT_EQ(out.status, 200u);
  EXPECT_EQ(out.body, "{\"hi\":1}");
}

TEST_F(TlsTest, AStreamOverTlsEndsCleanly) {
  // A client reading an event stream to its end sees the TLS close_notify, not a truncation.
  start_tls(false);
  auto ctx = client_context(false);
  auto out = get(ctx, "/stream");
  ASSERT_FALSE(out.ec) << out.ec.message();
  EXPECT_EQ(out.status, 200u);
  EXPECT_EQ(out.body, "event: job\ndata: {\"n\":1}\n\nevent: job\ndata: {\"n\":2}\n\n");
}

TEST_F(TlsTest, PlainHttpOnTheTlsPortGetsNoAnswer) {
  start_tls(false);
  int fd = connect_client();
  send_request(fd, "/hello");
  EXPECT_TRUE(closed_within(fd, 5s))
      << "a plain HTTP request on the TLS port left its connection open";
  ::close(fd);
}

TEST_F(TlsTest, WithAClientCaAClientWithoutACertificateIsRefused) {
  start_tls(true);
  auto anonymous = client_context(false);
  auto refused = get(anonymous, "/hello");
  // TLS 1.3 lets the client finish its side of the handshake before the server has judged its
  // (missing) certificate: the refusal then arrives as an alert on the first read.
  EXPECT_TRUE(refused.ec) << "a client without a certificate was served";
  EXPECT_EQ(refused.status, 0u);
  auto with_certificate = client_context(true);
  auto served = get(with_certificate, "/hello");
  ASSERT_FALSE(served.ec) << served.ec.message();
  EXPECT_EQ(served.status, 200u);
}

TEST_F(TlsTest, AClientThatNeverFinishesItsHandshakeIsDropped) {
  start_tls(false, 300ms);
  // Silent, and then a few bytes of a record that never completes.
  int silent = connect_client();
  int partial = connect_client();
  const char start_of_hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  ASSERT_EQ(::send(partial, start_of_hello, sizeof start_of_hello, MSG_NOSIGNAL), 6);
  const auto started = Clock::now();
  EXPECT_TRUE(closed_within(silent, 5s))
      << "a silent client held its connection past the handshake timeout";
  EXPECT_TRUE(closed_within(partial, 5s))
      << "a half-sent handshake held its connection past the timeout";
  EXPECT_LT(Clock::now() - started, 3s);
  ::close(silent);
  ::close(partial);
}

TEST(HttpServerTlsFiles, MissingOrMismatchedFilesAreReportedByListen) {
  if (certificates().dir.empty())
    GTEST_SKIP() << "could not make test certificates with the openssl command";
  auto listen_error = [](HttpOptions options) {
    options.port = 0;
    HttpServer server(options, Router(), nullptr);
    auto bound = server.listen();
    return std::holds_alternative<std::string>(bound) ? std::get<std::string>(bound)
                                                      : std::string();
  };
  HttpOptions missing;
  missing.tls_cert = certificates().file("nope.pem");
  missing.tls_key = certificates().file("server.key");
  EXPECT_NE(listen_error(missing).find("nope.pem"), std::string::npos);
  HttpOptions mismatched;
  mismatched.tls_cert = certificates().file("server.pem");
  mismatched.tls_key = certificates().file("client.key");
  const std::string error = listen_error(mismatched);
  EXPECT_NE(error.find("client.key"), std::string::npos) << error;
}

}  // namespace
}  // namespace kvq::server
