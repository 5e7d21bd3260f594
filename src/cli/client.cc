// cli/client.cc — see client.h.
#include "client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace kvq::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

std::string lower_first(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gs", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

Response network_error(std::string message) {
  Response r;
  r.error = "network";
  r.message = std::move(message);
  return r;
}

// Errors that mean "the server closed the connection" (before or instead of answering).
bool is_closed_error(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::partial_message;
}

Response make_response(int status, std::string text) {
  Response r;
  r.status = status;
  r.text = std::move(text);
  if (!r.text.empty()) {
    r.body = nlohmann::json::parse(r.text, nullptr, /*allow_exceptions=*/false);
    if (r.body.is_discarded()) r.body = nullptr;
  }
  if (!r.ok()) {
    if (r.body.is_object()) {
      if (auto it = r.body.find("error"); it != r.body.end() && it->is_string()) r.error = *it;
      if (auto it = r.body.find("message"); it != r.body.end() && it->is_string()) r.message = *it;
    }
    if (r.error.empty()) r.error = "http_" + std::to_string(status);
  }
  return r;
}

}  // namespace

std::string Response::describe() const {
  if (status == 0) return message;
  if (ok()) return "ok";
  if (!message.empty()) return error + ": " + message;
  if (error.rfind("http_", 0) != 0) return error;
  return "HTTP " + std::to_string(status);
}

Result<Url> parse_url(std::string_view text) {
  Url url;
  std::string_view rest;
  if (text.substr(0, 7) == "http://") {
    rest = text.substr(7);
  } else if (text.substr(0, 8) == "https://") {
    url.tls = true;
    rest = text.substr(8);
  } else {
    return InvalidArgument("only http:// and https:// URLs are supported: '" + std::string(text) +
                           "'");
  }
  const std::string scheme = url.tls ? "https://" : "http://";
  std::string_view authority = rest.substr(0, rest.find('/'));
  std::string_view prefix =
      authority.size() < rest.size() ? rest.substr(authority.size()) : std::string_view();
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("bad IPv6 address in URL '" + std::string(text) + "'");
    }
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return InvalidArgument("bad URL '" + std::string(text) + "'");
      }
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty() || authority.find('@') != std::string_view::npos) {
    return InvalidArgument("bad URL '" + std::string(text) + "': expected " + scheme + "HOST:PORT");
  }
  if (port.empty()) port = url.tls ? "443" : "80";
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || port.size() > 5) {
      return InvalidArgument("bad port in URL '" + std::string(text) + "'");
    }
  }
  url.port = std::string(port);
  url.prefix = std::string(prefix);
  const bool v6 = url.host.find(':') != std::string::npos;
  url.base = scheme + (v6 ? "[" + url.host + "]" : url.host) + ":" + url.port + url.prefix;
  return url;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string query_string(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out += out.empty() ? '?' : '&';
    out += percent_encode(key);
    out += '=';
    out += percent_encode(value);
  }
  return out;
}

std::string path(std::string_view prefix, std::initializer_list<std::string_view> segments) {
  std::string out(prefix);
  for (std::string_view s : segments) {
    out += '/';
    out += percent_encode(s);
  }
  return out;
}

// ---- SseParser -------------------------------------------------------------------------------

bool SseParser::feed(std::string_view bytes) {
  if (stopped_) return false;
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the \n of a \r\n pair
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = false;
    if (c == '\r' || c == '\n') {
      last_was_cr_ = c == '\r';
      const bool go_on = line(partial_);
      partial_.clear();
      if (!go_on) {
        stopped_ = true;
        return false;
      }
    } else {
      partial_ += c;
    }
  }
  return true;
}

bool SseParser::line(std::string_view text) {
  if (text.empty()) {  // dispatch
    if (!has_data_) {
      current_ = {};
      return true;
    }
    SseEvent event = std::move(current_);
    current_ = {};
    has_data_ = false;
    if (event.event.empty()) event.event = "message";
    return on_event_(event);
  }
  if (text.front() == ':') return true;  // comment (keep-alive)
  const size_t colon = text.find(':');
  std::string_view field = text.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = text.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "event") {
    current_.event = std::string(value);
  } else if (field == "data") {
    if (has_data_) current_.data += '\n';
    current_.data += value;
    has_data_ = true;
  } else if (field == "id") {
    current_.id = std::string(value);
  }
  return true;
}

// ---- TLS -------------------------------------------------------------------------------------

class TlsContext {
 public:
  TlsContext() : ctx_(asio::ssl::context::tls_client) {}
  asio::ssl::context& context() { return ctx_; }
  bool has_client_cert = false;
  // Not const in asio; OpenSSL's SSL_new only reads it, so sharing one across threads is safe.
  SSL_CTX* native() const { return ctx_.native_handle(); }

 private:
  mutable asio::ssl::context ctx_;
};

namespace {

// Why `file` cannot be read, or "" when it can.
std::string unreadable(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return std::strerror(errno);
  std::fclose(f);
  return {};
}

std::string tls_reason(const error_code& ec) {
  if (ec.category() != asio::error::get_ssl_category()) return lower_first(ec.message());
  const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
  return reason != nullptr ? reason : "TLS error " + std::to_string(ec.value());
}

int ssl_reason_of(const error_code& ec) {
  return ec.category() == asio::error::get_ssl_category()
             ? ERR_GET_REASON(static_cast<unsigned long>(ec.value()))
             : 0;
}

// OpenSSL's own socket BIO write()s, which raises SIGPIPE on a connection the server reset and
// would kill the CLI; this one sends with MSG_NOSIGNAL, as the plain transport does. The
// socket is non-blocking: "not ready" becomes OpenSSL's retry, and the caller polls.
int bio_fd(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

bool not_ready() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

int bio_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::send(bio_fd(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL);
  if (n < 0 && not_ready()) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int bio_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  const ssize_t n = ::recv(bio_fd(bio), data, static_cast<size_t>(size), 0);
  if (n < 0 && not_ready()) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

long bio_ctrl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

BIO* new_socket_bio(int fd) {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kvq socket");
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    return m;
  }();
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return nullptr;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  return bio;
}

}  // namespace

Result<std::shared_ptr<const TlsContext>> make_tls_context(const TlsOptions& options) {
  if (options.client_cert.empty() != options.client_key.empty()) {
    return InvalidArgument(options.client_cert.empty()
                               ? "a client key needs its client certificate"
                               : "a client certificate needs its client key");
  }
  std::shared_ptr<TlsContext> tls;
  try {
    tls = std::make_shared<TlsContext>();
  } catch (const boost::system::system_error& e) {
    return Internal(std::string("cannot set up TLS: ") + e.what());
  }
  asio::ssl::context& ctx = tls->context();
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  // No passphrase: OpenSSL would otherwise ask for one on the terminal, stalling a worker or a
  // script; an encrypted key fails to load instead, with OpenSSL's reason.
  SSL_CTX_set_default_passwd_cb(ctx.native_handle(), [](char*, int, int, void*) { return 0; });
  ctx.set_verify_mode(asio::ssl::verify_peer);
  auto load = [&](const char* what, const std::string& file, auto&& use) -> Status {
    if (std::string why = unreadable(file); !why.empty()) {
      return InvalidArgument(std::string("cannot read ") + what + " '" + file + "': " + why);
    }
    error_code ec;
    use(ec);
    if (ec) {
      return InvalidArgument(std::string("cannot use ") + what + " '" + file +
                             "': " + tls_reason(ec));
    }
    return Status::OK();
  };
  if (!options.ca_cert.empty()) {
    KVQ_RETURN_IF_ERROR(load("CA certificate file", options.ca_cert,
                             [&](error_code& ec) { ctx.load_verify_file(options.ca_cert, ec); }));
  } else {
    error_code ec;
    ctx.set_default_verify_paths(ec);
    if (ec) {
      return InvalidArgument("cannot load the system's trusted CA certificates: " + tls_reason(ec));
    }
  }
  if (!options.client_cert.empty()) {
    KVQ_RETURN_IF_ERROR(load("client certificate file", options.client_cert, [&](error_code& ec) {
      ctx.use_certificate_chain_file(options.client_cert, ec);
    }));
    // OpenSSL checks the key against the certificate loaded above ("key values mismatch").
    KVQ_RETURN_IF_ERROR(load("client key file", options.client_key, [&](error_code& ec) {
      ctx.use_private_key_file(options.client_key, asio::ssl::context::pem, ec);
    }));
    tls->has_client_cert = true;
  }
  return std::shared_ptr<const TlsContext>(std::move(tls));
}

// ---- DeadlineSocket --------------------------------------------------------------------------

namespace {

// The connected socket, with its TLS session for https, seen as a blocking stream with a
// deadline, for Beast's synchronous http::write and http::read (SyncWriteStream,
// SyncReadStream). A request then costs a send and a recv or two, polling only while the socket
// is not ready, where driving the asynchronous tcp_stream cost an io_context run and a timer
// re-arm per operation (a third of the client's CPU in the peer benchmark). The socket is
// non-blocking, so nothing here can wait past the deadline.
class DeadlineSocket {
 public:
  using Clock = std::chrono::steady_clock;

  DeadlineSocket(int fd, SSL* ssl, Clock::time_point deadline)
      : fd_(fd), ssl_(ssl), deadline_(deadline) {}

  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }

  // The TLS client handshake; false with `ec` set when it failed.
  bool handshake(error_code& ec) {
    tls_call([&](size_t*) { return SSL_connect(ssl_); }, ec);
    return !ec;
  }

  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, error_code& ec) {
    if (ssl_ != nullptr) return tls_write_some(buffers, ec);
    iovec iov[16];
    size_t count = 0;
    for (auto it = asio::buffer_sequence_begin(buffers);
         it != asio::buffer_sequence_end(buffers) && count < 16; ++it) {
      asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      iov[count++] = {const_cast<void*>(b.data()), b.size()};
    }
    if (count == 0) return 0;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    for (;;) {
      const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n >= 0) return static_cast<size_t>(n);
      if (!wait_if_not_ready(POLLOUT, ec)) return 0;
    }
  }
  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers) {
    error_code ec;
    return or_throw(write_some(buffers, ec), ec);
  }

  template <typename MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, error_code& ec) {
    asio::mutable_buffer b =
        asio::buffer_sequence_begin(buffers) == asio::buffer_sequence_end(buffers)
            ? asio::mutable_buffer()
            : asio::mutable_buffer(*asio::buffer_sequence_begin(buffers));
    if (b.size() == 0) return 0;
    if (ssl_ != nullptr) {
      return tls_call([&](size_t* n) { return SSL_read_ex(ssl_, b.data(), b.size(), n); }, ec);
    }
    for (;;) {
      const ssize_t n = ::recv(fd_, b.data(), b.size(), 0);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) {
        ec = asio::error::eof;
        return 0;
      }
      if (!wait_if_not_ready(POLLIN, ec)) return 0;
    }
  }
  template <typename MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    error_code ec;
    return or_throw(read_some(buffers, ec), ec);
  }

 private:
  // A TLS record carries at most this much.
  static constexpr size_t kRecord = 16384;

  // The throwing forms the stream concepts also require (the client itself never uses them).
  static size_t or_throw(size_t n, const error_code& ec) {
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // Gathers small buffers (a request's header and body) into one SSL_write, so that they leave
  // as one record and one send rather than one each.
  template <typename ConstBuffers>
  size_t tls_write_some(const ConstBuffers& buffers, error_code& ec) {
    asio::const_buffer first;
    size_t total = 0;
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
         ++it) {
      asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      if (total == 0) first = b;
      total += b.size();
    }
    if (total == 0) return 0;
    if (first.size() < total && first.size() < kRecord) {
      scratch_.clear();
      for (auto it = asio::buffer_sequence_begin(buffers);
           it != asio::buffer_sequence_end(buffers) && scratch_.size() < kRecord; ++it) {
        asio::const_buffer b(*it);
        scratch_.append(static_cast<const char*>(b.data()),
                        std::min(b.size(), kRecord - scratch_.size()));
      }
      first = asio::const_buffer(scratch_.data(), scratch_.size());
    }
    // A retry after "want write" must pass the same buffer again; the loop in tls_call does.
    return tls_call([&](size_t* n) { return SSL_write_ex(ssl_, first.data(), first.size(), n); },
                    ec);
  }

  // Runs an OpenSSL call until it succeeds (returns 1), polling while it wants the socket.
  template <typename Call>
  size_t tls_call(Call&& call, error_code& ec) {
    for (;;) {
      ERR_clear_error();
      errno = 0;
      size_t n = 0;
      const int rc = call(&n);
      if (rc == 1) return n;
      const int kind = SSL_get_error(ssl_, rc);
      if (kind == SSL_ERROR_WANT_READ || kind == SSL_ERROR_WANT_WRITE) {
        if (!wait_ready(kind == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, ec)) return 0;
        continue;
      }
      ec = tls_error(kind);
      return 0;
    }
  }

  // The error of a failed OpenSSL call, with the ends of a connection as asio::error::eof (as
  // recv's 0), so the keep-alive retry and the messages treat both transports alike.
  static error_code tls_error(int kind) {
    if (kind == SSL_ERROR_ZERO_RETURN) return asio::error::eof;
    const unsigned long e = ERR_get_error();
    if (kind == SSL_ERROR_SYSCALL && e == 0) {
      return errno != 0 ? error_code(errno, boost::system::system_category())
                        : error_code(asio::error::eof);
    }
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
    if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) return asio::error::eof;
#endif
    return error_code(static_cast<int>(e), asio::error::get_ssl_category());
  }

  // After a failed send or recv: waits for `events` if the socket was merely not ready (or the
  // call was interrupted) and returns true to try again; else sets `ec` and returns false.
  bool wait_if_not_ready(short events, error_code& ec) {
    if (errno == EINTR) return true;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = error_code(errno, boost::system::system_category());
      return false;
    }
    return wait_ready(events, ec);
  }

  // Waits until the socket is ready for `events`; false with `ec` set at the deadline.
  bool wait_ready(short events, error_code& ec) {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (left.count() <= 0) {
        ec = beast::error::timeout;
        return false;
      }
      pollfd p{fd_, events, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
      if (ready > 0) return true;  // readable, writable, or an error the next call reports
      if (ready < 0 && errno != EINTR) {
        ec = error_code(errno, boost::system::system_category());
        return false;
      }
    }
  }

  int fd_;
  SSL* ssl_;  // null for plain http
  Clock::time_point deadline_;
  std::string scratch_;
};

}  // namespace

// ---- Client ----------------------------------------------------------------------------------

struct Client::Impl {
  using Clock = std::chrono::steady_clock;

  Url url;
  std::string token;
  std::string host_header;
  std::shared_ptr<const TlsContext> tls;
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};  // connects; DeadlineSocket does the rest
  SSL* ssl = nullptr;             // the TLS session on `stream`, for https
  beast::flat_buffer buffer;
  bool connected = false;

  DeadlineSocket io(Clock::time_point deadline) {
    return DeadlineSocket(stream.socket().native_handle(), ssl, deadline);
  }

  // Starts one async operation with a completion handler that records its error, and runs the
  // io_context until it completes (the tcp_stream's expiry cancels it on timeout).
  template <typename Start>
  error_code run(Start&& start) {
    error_code result = asio::error::would_block;
    start([&result](error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }

  // `healthy`: the connection is in a known state (no error on it), so a TLS session can say
  // goodbye with a close_notify first, which servers tell from a truncated stream.
  void close(bool healthy = false) {
    if (ssl != nullptr) {
      if (healthy && SSL_is_init_finished(ssl)) SSL_shutdown(ssl);  // one try, no waiting
      SSL_free(ssl);                                                // and its BIO
      ssl = nullptr;
      ERR_clear_error();
    }
    error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
    buffer.consume(buffer.size());
    connected = false;
  }

  // Returns an empty string on success, else the message.
  std::string connect(std::chrono::milliseconds timeout) {
    close();
    const auto deadline = Clock::now() + timeout;
    tcp::resolver resolver(ioc);
    error_code ec;
    auto endpoints = resolver.resolve(url.host, url.port, ec);
    if (ec) return "cannot connect to " + url.base + ": " + lower_first(ec.message());
    stream.expires_after(timeout);
    ec = run([&](auto handler) { stream.async_connect(endpoints, std::move(handler)); });
    if (ec == beast::error::timeout) {
      return "cannot connect to " + url.base + ": timed out after " + seconds_text(timeout);
    }
    if (ec) return "cannot connect to " + url.base + ": " + lower_first(ec.message());
    error_code ignored;
    stream.socket().set_option(tcp::no_delay(true), ignored);
    stream.socket().non_blocking(true, ignored);  // for DeadlineSocket
    if (url.tls) {
      if (std::string err = start_tls(deadline, timeout); !err.empty()) {
        close();
        return err;
      }
    }
    connected = true;
    return {};
  }

  // The TLS handshake on the connected socket, verifying the server's certificate and name.
  // Returns an empty string on success, else the message.
  std::string start_tls(Clock::time_point deadline, std::chrono::milliseconds timeout) {
    const std::string failed = "TLS handshake with " + url.base + ": ";
    if (!tls) {
      auto made = make_tls_context({});
      if (!made.ok()) return failed + made.status().message();
      tls = std::move(*made);
    }
    ssl = SSL_new(tls->native());
    BIO* bio = ssl != nullptr ? new_socket_bio(stream.socket().native_handle()) : nullptr;
    if (bio == nullptr) return failed + "cannot allocate a TLS session";
    SSL_set_bio(ssl, bio, bio);
    error_code not_ip;
    asio::ip::make_address(url.host, not_ip);
    if (!not_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, url.host.c_str());
      SSL_set1_host(ssl, url.host.c_str());
    }
    error_code ec;
    if (io(deadline).handshake(ec)) return {};
    if (ec == beast::error::timeout) return failed + "timed out after " + seconds_text(timeout);
    if (is_closed_error(ec)) return failed + "the server closed the connection";
    const long verify = SSL_get_verify_result(ssl);
    if (ssl_reason_of(ec) == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK) {
      std::string why = X509_verify_cert_error_string(verify);
      if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        why += ": the certificate is not for " + url.host;
      }
      return failed + "certificate verify failed (" + why + ")";
    }
    if (ssl_reason_of(ec) == SSL_R_WRONG_VERSION_NUMBER) {
      return failed + tls_reason(ec) +
             " (does the server speak TLS? an http:// server answers in plain text)";
    }
    if (ssl_reason_of(ec) == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE) {
      return failed + tls_reason(ec) + client_cert_hint();
    }
    return failed + tls_reason(ec);
  }

  // For a TLS connection the server ended at once: a server requiring a client certificate
  // refuses one without it after the handshake (TLS 1.3), and may reset the connection before
  // its alert saying so is read.
  std::string client_cert_hint() const {
    return tls->has_client_cert
               ? " (did the server refuse the client certificate?)"
               : " (if the server requires a client certificate: --client-cert and --client-key)";
  }

  http::request<http::string_body> make_request(std::string_view method, std::string_view target,
                                                const nlohmann::json* body) {
    http::request<http::string_body> req;
    req.method_string(beast::string_view(method.data(), method.size()));
    req.target(url.prefix + std::string(target));
    req.version(11);
    req.set(http::field::host, host_header);
    req.set(http::field::user_agent, "kvq-cli/0.1");
    req.keep_alive(true);
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (body != nullptr) {
      req.set(http::field::content_type, "application/json");
      req.body() = body->dump();
    }
    req.prepare_payload();
    return req;
  }

  std::string io_error(const error_code& ec, std::chrono::milliseconds timeout) {
    if (ec == beast::error::timeout) {
      return "no response from " + url.base + " within " + seconds_text(timeout);
    }
    if (is_closed_error(ec)) return "connection to " + url.base + " closed by the server";
    std::string message = "connection to " + url.base + " failed: " + tls_reason(ec);
#ifdef SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED
    // TLS 1.3 refuses a missing client certificate after the handshake, at the first read.
    if (ssl_reason_of(ec) == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED) {
      message += " (the server wants a client certificate: --client-cert and --client-key)";
    }
#endif
    return message;
  }

  // io_error for the first exchange on a new connection.
  std::string first_io_error(const error_code& ec, std::chrono::milliseconds timeout) {
    std::string message = io_error(ec, timeout);
    if (is_closed_error(ec)) {
      // A TLS server drops a request that arrives in plain text.
      message += url.tls ? " right after the TLS handshake" + client_cert_hint()
                         : " (if it serves https://, use an https:// URL)";
    }
    return message;
  }
};

Client::Client(Url url, std::string token, std::shared_ptr<const TlsContext> tls)
    : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->token = std::move(token);
  impl_->tls = std::move(tls);
  const bool v6 = impl_->url.host.find(':') != std::string::npos;
  impl_->host_header = (v6 ? "[" + impl_->url.host + "]" : impl_->url.host) + ":" + impl_->url.port;
}

Client::~Client() {
  if (impl_) impl_->close(/*healthy=*/impl_->connected);
}

const Url& Client::url() const { return impl_->url; }

Response Client::request(std::string_view method, std::string_view target, const Json* body,
                         std::chrono::milliseconds timeout) {
  Impl& d = *impl_;
  auto req = d.make_request(method, target, body);
  for (int attempt = 0;; ++attempt) {
    const bool reused = d.connected;
    if (!d.connected) {
      if (std::string err = d.connect(timeout); !err.empty()) return network_error(err);
    }
    DeadlineSocket socket = d.io(std::chrono::steady_clock::now() + timeout);
    error_code ec;
    http::write(socket, req, ec);
    if (ec) {
      d.close();
      if (reused && attempt == 0 && ec != beast::error::timeout) continue;
      return network_error(reused ? d.io_error(ec, timeout) : d.first_io_error(ec, timeout));
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 * 1024 * 1024);
    http::read(socket, d.buffer, parser, ec);
    if (ec) {
      const bool nothing = !parser.got_some();
      d.close();
      // The server closed an idle keep-alive connection before reading this request.
      if (reused && attempt == 0 && nothing && is_closed_error(ec)) continue;
      return network_error(!reused && nothing ? d.first_io_error(ec, timeout)
                                              : d.io_error(ec, timeout));
    }
    auto res = parser.release();
    if (!res.keep_alive()) d.close(/*healthy=*/true);
    return make_response(static_cast<int>(res.result_int()), std::move(res.body()));
  }
}

Response Client::stream(std::string_view target,
                        const std::function<bool(const SseEvent&)>& on_event,
                        std::chrono::milliseconds idle_timeout) {
  using Clock = std::chrono::steady_clock;
  Impl& d = *impl_;
  auto req = d.make_request("GET", target, nullptr);
  req.set(http::field::accept, "text/event-stream");
  const auto setup_timeout = kDefaultTimeout;
  // A stream holds its connection to the end: always start on a fresh one.
  if (std::string err = d.connect(setup_timeout); !err.empty()) return network_error(err);
  DeadlineSocket socket = d.io(Clock::now() + setup_timeout);
  error_code ec;
  http::write(socket, req, ec);
  if (ec) {
    d.close();
    return network_error(d.first_io_error(ec, setup_timeout));
  }
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Boost 1.74 then rejects every Content-Length body as over the limit.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(socket, d.buffer, parser, ec);
  if (ec) {
    const bool nothing = !parser.got_some();
    d.close();
    return network_error(nothing ? d.first_io_error(ec, setup_timeout)
                                 : d.io_error(ec, setup_timeout));
  }
  const int status = static_cast<int>(parser.get().result_int());
  std::string error_text;
  SseParser sse(on_event);
  bool stopped = false;
  char chunk[8192];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    if (status != 200) {
      socket.set_deadline(Clock::now() + setup_timeout);
    } else if (idle_timeout.count() > 0) {
      socket.set_deadline(Clock::now() + idle_timeout);
    } else {
      socket.set_deadline(Clock::time_point::max());
    }
    // read_some, not read: read returns only once the chunk is full or the stream has ended,
    // which held back every event until 8 KiB of them had come.
    http::read_some(socket, d.buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = sizeof chunk - parser.get().body().size;
    if (status == 200) {
      if (n > 0 && !sse.feed(std::string_view(chunk, n))) {
        stopped = true;
        break;
      }
    } else {
      error_text.append(chunk, n);
    }
    if (ec) break;
  }
  d.close(/*healthy=*/!ec);
  if (status != 200) {
    if (ec && !is_closed_error(ec)) return network_error(d.io_error(ec, setup_timeout));
    return make_response(status, std::move(error_text));
  }
  if (!stopped && ec && !is_closed_error(ec)) {
    if (ec == beast::error::timeout) {
      return network_error("no event from " + d.url.base + " within " + seconds_text(idle_timeout));
    }
    return network_error(d.io_error(ec, idle_timeout));
  }
  Response r;
  r.status = 200;
  return r;
}

}  // namespace kvq::cli
