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
#include <limits>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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

std::optional<Url> parse_url(std::string_view text, std::string* error) {
  constexpr std::string_view kScheme = "http://";
  if (text.substr(0, kScheme.size()) != kScheme) {
    *error = "only http:// URLs are supported: '" + std::string(text) + "'";
    return std::nullopt;
  }
  std::string_view rest = text.substr(kScheme.size());
  std::string_view authority = rest.substr(0, rest.find('/'));
  std::string_view prefix =
      authority.size() < rest.size() ? rest.substr(authority.size()) : std::string_view();
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  Url url;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      *error = "bad IPv6 address in URL '" + std::string(text) + "'";
      return std::nullopt;
    }
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        *error = "bad URL '" + std::string(text) + "'";
        return std::nullopt;
      }
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty() || authority.find('@') != std::string_view::npos) {
    *error = "bad URL '" + std::string(text) + "': expected http://HOST:PORT";
    return std::nullopt;
  }
  if (port.empty()) port = "80";
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || port.size() > 5) {
      *error = "bad port in URL '" + std::string(text) + "'";
      return std::nullopt;
    }
  }
  url.port = std::string(port);
  url.prefix = std::string(prefix);
  const bool v6 = url.host.find(':') != std::string::npos;
  url.base = "http://" + (v6 ? "[" + url.host + "]" : url.host) + ":" + url.port + url.prefix;
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

// ---- DeadlineSocket --------------------------------------------------------------------------

namespace {

// The connected socket seen as a blocking stream with a deadline, for Beast's synchronous
// http::write and http::read (SyncWriteStream, SyncReadStream). A request then costs a send and
// a recv or two, polling only while the socket is not ready, where driving the asynchronous
// tcp_stream cost an io_context run and a timer re-arm per operation (a third of the client's
// CPU in the peer benchmark). The socket is non-blocking, so nothing here can wait past the
// deadline.
class DeadlineSocket {
 public:
  DeadlineSocket(int fd, std::chrono::steady_clock::time_point deadline) : fd_(fd), deadline_(deadline) {}

  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, error_code& ec) {
    iovec iov[16];
    size_t count = 0;
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers) && count < 16; ++it) {
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
    asio::mutable_buffer b = asio::buffer_sequence_begin(buffers) == asio::buffer_sequence_end(buffers)
                                 ? asio::mutable_buffer()
                                 : asio::mutable_buffer(*asio::buffer_sequence_begin(buffers));
    if (b.size() == 0) return 0;
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
  // The throwing forms the stream concepts also require (the client itself never uses them).
  static size_t or_throw(size_t n, const error_code& ec) {
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // After a failed send or recv: waits for `events` if the socket was merely not ready (or the
  // call was interrupted) and returns true to try again; else sets `ec` and returns false.
  bool wait_if_not_ready(short events, error_code& ec) {
    if (errno == EINTR) return true;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = error_code(errno, boost::system::system_category());
      return false;
    }
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
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
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

// ---- Client ----------------------------------------------------------------------------------

struct Client::Impl {
  Url url;
  std::string token;
  std::string host_header;
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  bool connected = false;

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

  void close() {
    error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
    buffer.consume(buffer.size());
    connected = false;
  }

  // Returns an empty string on success, else the message.
  std::string connect(std::chrono::milliseconds timeout) {
    close();
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
    connected = true;
    return {};
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
    return "connection to " + url.base + " failed: " + lower_first(ec.message());
  }
};

Client::Client(Url url, std::string token) : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->token = std::move(token);
  const bool v6 = impl_->url.host.find(':') != std::string::npos;
  impl_->host_header =
      (v6 ? "[" + impl_->url.host + "]" : impl_->url.host) + ":" + impl_->url.port;
}

Client::~Client() {
  if (impl_) impl_->close();
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
    DeadlineSocket socket(d.stream.socket().native_handle(), std::chrono::steady_clock::now() + timeout);
    error_code ec;
    http::write(socket, req, ec);
    if (ec) {
      d.close();
      if (reused && attempt == 0 && ec != beast::error::timeout) continue;
      return network_error(d.io_error(ec, timeout));
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 * 1024 * 1024);
    http::read(socket, d.buffer, parser, ec);
    if (ec) {
      const bool nothing = !parser.got_some();
      d.close();
      // The server closed an idle keep-alive connection before reading this request.
      if (reused && attempt == 0 && nothing && is_closed_error(ec)) continue;
      return network_error(d.io_error(ec, timeout));
    }
    auto res = parser.release();
    if (!res.keep_alive()) d.close();
    return make_response(static_cast<int>(res.result_int()), std::move(res.body()));
  }
}

Response Client::stream(std::string_view target,
                        const std::function<bool(const SseEvent&)>& on_event,
                        std::chrono::milliseconds idle_timeout) {
  Impl& d = *impl_;
  auto req = d.make_request("GET", target, nullptr);
  req.set(http::field::accept, "text/event-stream");
  const auto setup_timeout = kDefaultTimeout;
  // A stream holds its connection to the end: always start on a fresh one.
  if (std::string err = d.connect(setup_timeout); !err.empty()) return network_error(err);
  d.stream.expires_after(setup_timeout);
  error_code ec = d.run([&](auto handler) { http::async_write(d.stream, req, std::move(handler)); });
  if (ec) {
    d.close();
    return network_error(d.io_error(ec, setup_timeout));
  }
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Boost 1.74 then rejects every Content-Length body as over the limit.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  ec = d.run([&](auto handler) {
    http::async_read_header(d.stream, d.buffer, parser, std::move(handler));
  });
  if (ec) {
    d.close();
    return network_error(d.io_error(ec, setup_timeout));
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
      d.stream.expires_after(setup_timeout);
    } else if (idle_timeout.count() > 0) {
      d.stream.expires_after(idle_timeout);
    } else {
      d.stream.expires_never();
    }
    ec = d.run([&](auto handler) { http::async_read(d.stream, d.buffer, parser, std::move(handler)); });
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
  d.close();
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
