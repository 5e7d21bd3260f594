// The HTTP client's transport against a scripted peer on loopback: responses that arrive in
// pieces, a server that never answers, a keep-alive connection the server closed, a request
// body larger than the socket buffers, event streams; and the same peer speaking TLS (OpenSSL,
// with certificates the test makes with the openssl command): verification of the chain and of
// the host name, client certificates, keep-alive reuse. Plus URL parsing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
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
  Url url(const std::string& scheme = "http", const std::string& host = "127.0.0.1") const {
    return *parse_url(scheme + "://" + host + ":" + std::to_string(port_));
  }

  std::atomic<int> connections{0};

 private:
  Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// The peer's side of one connection: plain, or TLS once accepted.
struct Conn {
  Conn(int fd) : fd(fd) {}  // NOLINT: a plain connection is just its socket
  Conn(int fd, SSL* ssl) : fd(fd), ssl(ssl) {}
  ssize_t recv(char* buf, size_t size) const {
    return ssl != nullptr ? SSL_read(ssl, buf, static_cast<int>(size)) : ::recv(fd, buf, size, 0);
  }
  ssize_t send(const char* data, size_t size) const {
    return ssl != nullptr ? SSL_write(ssl, data, static_cast<int>(size))
                          : ::send(fd, data, size, MSG_NOSIGNAL);
  }
  int fd;
  SSL* ssl = nullptr;
};

// Reads one request (headers and a Content-Length body); returns its body, or nullopt if the
// connection ended first.
std::optional<std::string> read_request(const Conn& fd) {
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
    const ssize_t n = fd.recv(buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    data.append(buf, static_cast<size_t>(n));
  }
}

void send_all(const Conn& fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = fd.send(text.data() + sent, text.size() - sent);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string response(const std::string& body, bool keep_alive = true) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + (keep_alive ? "" : "\r\nConnection: close") + "\r\n\r\n" +
         body;
}

TEST(ClientTransport, AResponseArrivingInPiecesIsReadWhole) {
  ScriptedPeer peer([](int fd, int) {
    if (!read_request(fd)) return;
    const std::string text =
        response(R"({"pieces":[1,2,3],"padding":")" + std::string(5000, 'x') + R"("})");
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
  int port;
  {
    ScriptedPeer peer([](int, int) {});
    port = std::stoi(peer.url().port);
  }
  Client client(*parse_url("http://127.0.0.1:" + std::to_string(port)), "");
  Response r = client.get("/v1/x", 2s);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.message.find("cannot connect"), std::string::npos) << r.message;
}

// ---- event streams ---------------------------------------------------------------------------

// Set once, awaited with a deadline.
class Signal {
 public:
  void set() {
    std::lock_guard lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, d, [&] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

constexpr char kStreamHead[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

// The peer sends one event and holds the stream open until the client has seen it (or 5 s
// passed), then a second event, and ends the stream.
void expect_events_as_they_come(const std::function<Conn(int)>& open, const std::string& scheme,
                                std::shared_ptr<const TlsContext> tls) {
  Signal first_seen;
  std::atomic<bool> peer_waited_out{false};
  ScriptedPeer peer([&](int fd, int) {
    Conn c = open(fd);
    if (!read_request(c)) return;
    send_all(c, std::string(kStreamHead) + chunk("event: job\ndata: {\"n\":1}\n\n"));
    if (!first_seen.wait_for(5s)) peer_waited_out = true;
    send_all(c, chunk("data: two\n\n") + chunk(""));
  });
  Client client(peer.url(scheme), "", std::move(tls));
  std::vector<std::string> seen;
  Response r = client.stream("/v1/jobs/t/j/events", [&](const SseEvent& e) {
    seen.push_back(e.event + " " + e.data);
    first_seen.set();
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(seen, (std::vector<std::string>{"job {\"n\":1}", "message two"}));
  EXPECT_FALSE(peer_waited_out)
      << "the first event reached the callback only when the stream ended";
}

TEST(ClientTransport, AnEventStreamDeliversEachEventAsItComes) {
  expect_events_as_they_come([](int fd) { return Conn(fd); }, "http", nullptr);
}

// ---- TLS -------------------------------------------------------------------------------------

// A throwaway CA, a server certificate it signed for localhost and 127.0.0.1, one for another
// name only, and a client certificate, made once per run with the openssl command.
struct Certs {
  std::string dir, ca, server, server_key, other, other_key, client, client_key;
  std::string error;
  Certs() {
    char tmpl[] = "/tmp/kvq-client-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      error = "mkdtemp failed";
      return;
    }
    dir = tmpl;
    ca = dir + "/ca.pem";
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    auto run = [&](const std::string& command) {
      if (!error.empty()) return;
      if (std::system((command + " >" + dir + "/openssl.log 2>&1").c_str()) != 0) {
        error = "failed: " + command;
      }
    };
    run("openssl req -x509 " + key + " -keyout " + dir + "/ca.key -out " + ca +
        " -days 2 -subj /CN=kvq-test-ca -addext basicConstraints=critical,CA:TRUE"
        " -addext keyUsage=critical,keyCertSign");
    auto issue = [&](const std::string& name, const std::string& ext, int serial) {
      const std::string base = dir + "/" + name;
      std::ofstream(base + ".ext") << ext << "\n";
      run("openssl req " + key + " -keyout " + base + ".key -out " + base +
          ".csr -subj /CN=" + name);
      run("openssl x509 -req -in " + base + ".csr -CA " + ca + " -CAkey " + dir +
          "/ca.key -set_serial " + std::to_string(serial) + " -days 2 -out " + base +
          ".pem -extfile " + base + ".ext");
      return std::make_pair(base + ".pem", base + ".key");
    };
    std::tie(server, server_key) = issue(
        "server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth", 1);
    std::tie(other, other_key) =
        issue("other", "subjectAltName=DNS:other.invalid\nextendedKeyUsage=serverAuth", 2);
    std::tie(client, client_key) = issue("client", "extendedKeyUsage=clientAuth", 3);
  }
  ~Certs() {
    if (!dir.empty()) std::system(("rm -rf " + dir).c_str());
  }
};

const Certs& certs() {
  static const Certs c;
  return c;
}

// The client context trusting the test CA, optionally with the client certificate.
std::shared_ptr<const TlsContext> test_tls(bool with_client_cert) {
  TlsOptions o;
  o.ca_cert = certs().ca;
  if (with_client_cert) {
    o.client_cert = certs().client;
    o.client_key = certs().client_key;
  }
  auto tls = make_tls_context(o);
  EXPECT_TRUE(tls.ok()) << tls.status().message();
  return tls.ok() ? *tls : nullptr;
}

// A server-side OpenSSL context; `require_client_cert` verifies clients against the test CA.
class ServerTls {
 public:
  ServerTls(const std::string& cert, const std::string& key, bool require_client_cert = false)
      : ctx_(SSL_CTX_new(TLS_server_method())) {
    EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx_, cert.c_str()), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM), 1);
    if (require_client_cert) {
      EXPECT_EQ(SSL_CTX_load_verify_locations(ctx_, certs().ca.c_str(), nullptr), 1);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
  }
  ~ServerTls() { SSL_CTX_free(ctx_); }

  // Accepts TLS on `fd` (blocking) and runs `body` on it; counts handshakes.
  void serve(int fd, const std::function<void(const Conn&)>& body) {
    SSL* ssl = SSL_new(ctx_);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      ++handshakes;
      body(Conn(fd, ssl));
      SSL_shutdown(ssl);
    } else {
      ++refused;
    }
    SSL_free(ssl);
    ERR_clear_error();
  }

  std::atomic<int> handshakes{0};
  std::atomic<int> refused{0};

 private:
  SSL_CTX* ctx_;
};

class ClientTls : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(certs().error, "") << "making the test certificates"; }
};

// A peer answering every request on a connection with {"connection": index}.
void answer_all(const Conn& c, int index) {
  while (read_request(c)) send_all(c, response(R"({"connection":)" + std::to_string(index) + "}"));
}

TEST_F(ClientTls, RequestsOverTlsShareOneKeepAliveConnection) {
  ServerTls tls(certs().server, certs().server_key);
  ScriptedPeer peer(
      [&](int fd, int index) { tls.serve(fd, [&](const Conn& c) { answer_all(c, index); }); });
  for (const char* host : {"127.0.0.1", "localhost"}) {
    Client client(peer.url("https", host), "", test_tls(false));
    for (int i = 0; i < 3; ++i) {
      Response r = client.get("/v1/x", 5s);
      ASSERT_TRUE(r.ok()) << host << ": " << r.describe();
    }
  }
  EXPECT_EQ(tls.handshakes, 2);  // one per client
}

TEST_F(ClientTls, AServerCertificateFromAnUntrustedCaFailsTheHandshakeWithTheReason) {
  ServerTls tls(certs().server, certs().server_key);
  ScriptedPeer peer(
      [&](int fd, int index) { tls.serve(fd, [&](const Conn& c) { answer_all(c, index); }); });
  Client client(peer.url("https"), "");  // the system's trust store: no test CA in it
  Response r = client.get("/v1/x", 5s);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(
      r.message.rfind(
          "TLS handshake with " + peer.url("https").base + ": certificate verify failed (", 0),
      0u)
      << r.message;
  EXPECT_EQ(tls.handshakes, 0);
}

TEST_F(ClientTls, ACertificateForAnotherNameIsRefused) {
  ServerTls tls(certs().other, certs().other_key);
  ScriptedPeer peer(
      [&](int fd, int index) { tls.serve(fd, [&](const Conn& c) { answer_all(c, index); }); });
  for (const auto& [host, why] : {std::pair{"127.0.0.1", "IP address mismatch"},
                                  std::pair{"localhost", "hostname mismatch"}}) {
    Client client(peer.url("https", host), "", test_tls(false));
    Response r = client.get("/v1/x", 5s);
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.message.find(std::string("certificate verify failed (") + why), std::string::npos)
        << r.message;
  }
  EXPECT_EQ(tls.handshakes, 0);
}

TEST_F(ClientTls, AServerRequiringAClientCertificateGetsOneWhenGiven) {
  ServerTls tls(certs().server, certs().server_key, /*require_client_cert=*/true);
  ScriptedPeer peer(
      [&](int fd, int index) { tls.serve(fd, [&](const Conn& c) { answer_all(c, index); }); });
  {
    Client client(peer.url("https"), "", test_tls(false));
    Response r = client.get("/v1/x", 5s);
    EXPECT_EQ(r.status, 0);
    // The alert, or (when the server's reset overtook it) the connection's end, with the hint.
    EXPECT_NE(r.message.find("client certificate: --client-cert and --client-key"),
              std::string::npos)
        << r.message;
  }
  Client client(peer.url("https"), "", test_tls(true));
  Response r = client.get("/v1/x", 5s);
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(tls.handshakes, 1);
  EXPECT_EQ(tls.refused, 1);
}

TEST_F(ClientTls, AKeepAliveConnectionTheServerClosedIsRetriedOnANewOne) {
  ServerTls tls(certs().server, certs().server_key);
  ScriptedPeer peer([&](int fd, int index) {
    tls.serve(fd, [&](const Conn& c) {
      if (!read_request(c)) return;
      send_all(c, response(R"({"connection":)" + std::to_string(index) + "}"));
      if (index > 0) answer_all(c, index);
    });
  });
  Client client(peer.url("https"), "", test_tls(false));
  ASSERT_EQ(client.get("/v1/x", 5s).body["connection"], 0);
  std::this_thread::sleep_for(50ms);  // let the close arrive
  Response second = client.get("/v1/x", 5s);
  ASSERT_TRUE(second.ok()) << second.describe();
  EXPECT_EQ(second.body["connection"], 1);
}

TEST_F(ClientTls, AnEventStreamOverTlsDeliversEachEventAsItComes) {
  // The sessions outlive the peer's scripts; freed once the peer is gone.
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  ASSERT_EQ(SSL_CTX_use_certificate_chain_file(ctx, certs().server.c_str()), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey_file(ctx, certs().server_key.c_str(), SSL_FILETYPE_PEM), 1);
  std::vector<SSL*> sessions;
  expect_events_as_they_come(
      [&](int fd) {
        SSL* ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        EXPECT_EQ(SSL_accept(ssl), 1);
        sessions.push_back(ssl);
        return Conn(fd, ssl);
      },
      "https", test_tls(false));
  for (SSL* ssl : sessions) SSL_free(ssl);
  SSL_CTX_free(ctx);
}

TEST_F(ClientTls, HttpsToAPlainHttpServerSaysSo) {
  ScriptedPeer peer([](int fd, int) {
    char buf[4096];
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return;  // the ClientHello, read as a bad request
    send_all(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  });
  Client client(peer.url("https"), "", test_tls(false));
  Response r = client.get("/v1/x", 5s);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.message.rfind("TLS handshake with " + peer.url("https").base + ": ", 0), 0u)
      << r.message;
  EXPECT_NE(r.message.find("does the server speak TLS?"), std::string::npos) << r.message;
}

TEST_F(ClientTls, PlainHttpToATlsServerSaysSo) {
  ServerTls tls(certs().server, certs().server_key);
  ScriptedPeer peer(
      [&](int fd, int index) { tls.serve(fd, [&](const Conn& c) { answer_all(c, index); }); });
  Client client(peer.url("http"), "");
  Response r = client.get("/v1/x", 5s);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.message.find("(if it serves https://, use an https:// URL)"), std::string::npos)
      << r.message;
}

TEST_F(ClientTls, BadCertificateFilesAreNamedInTheError) {
  // The message of make_tls_context(o)'s error, "" when it made a context.
  auto error_of = [](const TlsOptions& options) {
    auto tls = make_tls_context(options);
    EXPECT_TRUE(!tls.ok() || *tls != nullptr);
    EXPECT_TRUE(tls.ok() || tls.code() == Code::kInvalidArgument) << tls.status().message();
    return tls.ok() ? std::string() : tls.status().message();
  };
  std::string error;
  TlsOptions o;
  o.ca_cert = certs().dir + "/missing.pem";
  error = error_of(o);
  EXPECT_EQ(error,
            "cannot read CA certificate file '" + o.ca_cert + "': No such file or directory");
  o.ca_cert = certs().dir + "/server.ext";  // readable, not a certificate
  error = error_of(o);
  EXPECT_EQ(error.rfind("cannot use CA certificate file '" + o.ca_cert + "': ", 0), 0u) << error;
  o.ca_cert = certs().ca;
  o.client_cert = certs().client;
  error = error_of(o);
  EXPECT_EQ(error, "a client certificate needs its client key");
  o.client_key = certs().server_key;  // not the certificate's key
  error = error_of(o);
  EXPECT_EQ(error.rfind("cannot use client key file '" + o.client_key + "': ", 0), 0u) << error;
  o.client_key = certs().client_key;
  EXPECT_EQ(error_of(o), "");
  // An encrypted key fails at once, naming the file. (Without a terminal OpenSSL's prompt fails
  // too, so this cannot tell whether one was shown; run under `script` it would wait.)
  const std::string encrypted = certs().dir + "/client-encrypted.key";
  ASSERT_EQ(std::system(("openssl pkey -in " + certs().client_key +
                         " -aes256 -passout pass:pw -out " + encrypted + " 2>/dev/null")
                            .c_str()),
            0);
  o.client_key = encrypted;
  error = error_of(o);
  EXPECT_EQ(error.rfind("cannot use client key file '" + encrypted + "': ", 0), 0u) << error;
}

// ---- URLs ------------------------------------------------------------------------------------

TEST(UrlParse, HttpsDefaultsToPort443) {
  auto u = parse_url("https://kvq.example.com/");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "kvq.example.com");
  EXPECT_EQ(u->port, "443");
  EXPECT_EQ(u->base, "https://kvq.example.com:443");
  u = parse_url("http://kvq.example.com");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->port, "80");
}

TEST(UrlParse, HttpsWithAPortAPrefixAndAnIpv6Literal) {
  auto u = parse_url("https://[::1]:7411/kvq/");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "7411");
  EXPECT_EQ(u->prefix, "/kvq");
  EXPECT_EQ(u->base, "https://[::1]:7411/kvq");
  u = parse_url("https://[fe80::1]");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->port, "443");
  EXPECT_EQ(u->base, "https://[fe80::1]:443");
}

TEST(UrlParse, OtherSchemesAndBadAuthoritiesAreErrors) {
  for (const char* bad : {"ftp://h:1", "HTTPS//h", "h:7411", "https:/h", "https://", "https://:443",
                          "https://h:44x", "https://[::1", "https://user@h"}) {
    auto u = parse_url(bad);
    EXPECT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.code(), Code::kInvalidArgument) << bad;
    EXPECT_FALSE(u.status().message().empty()) << bad;
  }
  EXPECT_EQ(parse_url("ftp://h:1").status().message(),
            "only http:// and https:// URLs are supported: 'ftp://h:1'");
}

}  // namespace
}  // namespace kvq::cli
