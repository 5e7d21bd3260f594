#include "server/http_server.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <array>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "kvq/kv.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/trace_context.h"

namespace kvq::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr auto kStreamKeepAlive = 15s;  // comment lines on an idle event stream
constexpr auto kLinger = 2s;            // draining a client after an answer that closes
constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kTargetLimit = 8 * 1024;
// The read buffer: a whole header fits, and no client makes it grow further.
constexpr size_t kReadBufferLimit = 32 * 1024;
// An event stream whose client reads this far behind is dropped rather than buffered.
constexpr size_t kMaxQueuedBytes = 4 * 1024 * 1024;
constexpr auto kFirstAcceptPause = 100ms;
constexpr auto kMaxAcceptPause = 1600ms;
constexpr auto kAcceptLogInterval = 10s;
constexpr unsigned kRetryAfterSeconds = 1;
constexpr beast::string_view kTraceparent = "traceparent";  // W3C Trace Context's header

std::string reason(unsigned status) {
  return std::string(http::obsolete_reason(static_cast<http::status>(status)));
}

using Digest = std::array<unsigned char, 32>;

// Digests first, so that the comparison's length is fixed: CRYPTO_memcmp's time then says
// nothing about the token, not even its length.
Digest sha256(std::string_view text) {
  Digest out{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), out.data(), &size, EVP_sha256(), nullptr);
  return out;
}

Response error_response(unsigned status, std::string name, std::string message) {
  return {status, error_body({status, std::move(name), std::move(message)})};
}

// The answer to a request Beast could not parse, or nullopt for a connection simply gone
// (closed, reset, timed out), which gets none. `raw` is what was read of the header.
std::optional<Response> parse_failure(beast::error_code ec, std::string_view raw) {
  if (ec.category() != http::make_error_code(http::error::bad_target).category())
    return std::nullopt;
  switch (static_cast<http::error>(ec.value())) {
    case http::error::end_of_stream:
    case http::error::partial_message:
    case http::error::need_more:
    case http::error::need_buffer:
    case http::error::unexpected_body:
    case http::error::buffer_overflow: return std::nullopt;
    case http::error::body_limit:
      return error_response(413, "body_too_large", "the request body exceeds the server's limit");
    case http::error::header_limit:
      // A request line with no end within the limit: the target is what is long.
      if (raw.find('\n') == std::string_view::npos) {
        return error_response(414, "target_too_long",
                              "the request target exceeds the server's limit");
      }
      return error_response(431, "header_too_large", "the request header exceeds 16 KiB");
    case http::error::bad_version:
      return error_response(505, "http_version_not_supported",
                            "only HTTP/1.0 and HTTP/1.1 are served");
    default: return error_response(400, "bad_request", "malformed HTTP request: " + ec.message());
  }
}

bool iequals(std::string_view a, std::string_view b) {
  return beast::iequals(beast::string_view(a.data(), a.size()),
                        beast::string_view(b.data(), b.size()));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

// What the server holds of a connection, whatever its transport.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  virtual void start() = 0;
  virtual void close_if_idle() = 0;
  // The Exchange side (any thread). Each call names the request it belongs to: on a keep-alive
  // connection a late call from an exchange that has already been answered must not touch the
  // next request.
  virtual void reply(uint64_t request, Response response) = 0;
  virtual void start_stream(uint64_t request) = 0;
  virtual void send(uint64_t request, std::string chunk) = 0;
  virtual void end_stream(uint64_t request) = 0;
  virtual void on_disconnect(uint64_t request, std::function<void()> callback) = 0;
  virtual void offload(std::function<void()> task) = 0;
};

struct HttpServer::Impl {
  Impl(HttpOptions o, Router r, Observer obs)
      : options(std::move(o)),
        router(std::move(r)),
        observer(std::move(obs)),
        acceptor(ioc),
        accept_timer(ioc),
        workers(std::max(1u, options.worker_threads)),
        guard(asio::make_work_guard(ioc)),
        token_digest(sha256("Bearer " + options.token)) {}

  void accept_next();
  void accept_failed(beast::error_code ec);
  std::string load_tls();
  void track(const std::shared_ptr<SessionBase>& s) KVQ_EXCLUDES(sessions_mu);
  void untrack(SessionBase* s) KVQ_EXCLUDES(sessions_mu);

  // Takes `bytes` from the shared body budget; false (nothing taken) if it would go over.
  bool reserve_body(size_t bytes) {
    size_t used = body_bytes.load();
    do {
      if (used + bytes > options.max_body_memory) return false;
    } while (!body_bytes.compare_exchange_weak(used, used + bytes));
    return true;
  }
  void release_body(size_t bytes) { body_bytes -= bytes; }

  bool authorized(std::string_view header) const {
    if (options.token.empty()) return true;
    const Digest given = sha256(header);
    return CRYPTO_memcmp(given.data(), token_digest.data(), given.size()) == 0;
  }

  HttpOptions options;
  Router router;
  Observer observer;
  // Before the io_context: destroying it destroys the sessions its pending handlers hold, and
  // each untracks itself.
  util::Mutex sessions_mu;
  std::set<SessionBase*> sessions KVQ_GUARDED_BY(sessions_mu);
  std::map<SessionBase*, std::weak_ptr<SessionBase>> session_refs KVQ_GUARDED_BY(sessions_mu);
  util::CondVar sessions_cv;  // signalled when a session untracks itself
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::steady_timer accept_timer;
  std::optional<ssl::context> tls;
  asio::thread_pool workers;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> body_bytes{0};
  const Digest token_digest;
  // The accept loop's own (it runs one step at a time).
  std::chrono::milliseconds accept_pause{0};
  uint64_t accept_failures_unlogged = 0;
  std::chrono::steady_clock::time_point accept_logged{};
};

namespace {

template <class Stream>
class Session : public SessionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... StreamArgs>
  Session(HttpServer::Impl& server, tcp::socket socket, StreamArgs&... args)
      : stream_(std::move(socket), args...),
        server_(server),
        keep_alive_timer_(stream_.get_executor()) {}
  // A session closes itself in every case it knows of; one whose exchange was dropped
  // unanswered (a route's bug) ends here, and must not stay in the server's list of open ones.
  ~Session() override {
    release_body();
    if (!closed_) server_.untrack(this);
  }

  void start() override {
    if (server_.options.request_log) {
      beast::error_code ec;
      const auto peer = tcp().socket().remote_endpoint(ec);
      if (ec) {
        client_ = "-";
      } else {
        const auto ip = peer.address().to_string();
        client_ = peer.address().is_v6() ? "[" + ip + "]" : ip;
        client_ += ":" + std::to_string(peer.port());
      }
    }
    asio::dispatch(stream_.get_executor(), [self = self()] {
      if constexpr (kTls) {
        self->tcp().expires_after(self->server_.options.handshake_timeout);
        self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
          if (ec) return self->close();
          self->read_request();
        });
      } else {
        self->read_request();
      }
    });
  }

  // Called on stop: closes the connection if it is between requests.
  void close_if_idle() override {
    asio::post(stream_.get_executor(), [self = self()] {
      if (!self->busy_) self->close(true);
    });
  }

  // offload: later, where a store call may block, never inside the caller's stack.
  void offload(std::function<void()> task) override {
    if (server_.options.worker_threads > 0) return asio::post(server_.workers, std::move(task));
    asio::post(server_.ioc, std::move(task));
  }
  void reply(uint64_t request, Response response) override {
    asio::post(stream_.get_executor(), [self = self(), request, r = std::move(response)]() mutable {
      if (request == self->request_) self->finish(std::move(r));
    });
  }
  void start_stream(uint64_t request) override {
    asio::post(stream_.get_executor(), [self = self(), request] {
      if (request == self->request_) self->begin_stream();
    });
  }
  void send(uint64_t request, std::string chunk) override {
    asio::post(stream_.get_executor(), [self = self(), request, c = std::move(chunk)]() mutable {
      if (request == self->request_ && self->streaming_ && !self->gone_)
        self->queue_write(std::move(c));
    });
  }
  void end_stream(uint64_t request) override {
    asio::post(stream_.get_executor(), [self = self(), request] {
      if (request != self->request_ || !self->streaming_) return;
      self->streaming_ = false;
      self->keep_alive_timer_.cancel();
      self->close_after_writes_ = true;
      if (!self->writing_) self->close(true);
    });
  }
  void on_disconnect(uint64_t request, std::function<void()> callback) override {
    asio::post(stream_.get_executor(),
               [self = self(), request, cb = std::move(callback)]() mutable {
                 if (request != self->request_) return;
                 // Gone before the route asked (a stream's client can leave as soon as it starts):
                 // the route must still hear of it, or it keeps its subscription forever.
                 if (self->gone_) {
                   cb();
                   return;
                 }
                 // Answered already (and not a stream): nothing is waiting, so nothing to watch.
                 if (self->done_ && !self->streaming_) return;
                 self->disconnect_ = std::move(cb);
                 if (!self->watching_) self->watch_for_disconnect();
               });
  }

 private:
  std::shared_ptr<Session> self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  void read_request() {
    if (closed_) return;
    if (server_.stopping) return close(true);
    busy_ = false;
    method_.clear();
    log_path_.clear();
    log_trace_id_.clear();
    started_ = {};
    parser_.emplace();
    parser_->body_limit(server_.options.max_body);
    parser_->header_limit(kHeaderLimit);
    tcp().expires_after(server_.options.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = self()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // Everything that can be decided without the body is, before any of it is read.
  void on_header(beast::error_code ec) {
    if (ec) return refuse_unparsed(ec);
    busy_ = true;
    tcp().expires_never();
    const auto& header = parser_->get();
    started_ = std::chrono::steady_clock::now();  // for the observer's latency too
    method_.assign(header.method_string().data(), header.method_string().size());
    // W3C: a header sent twice, or not a valid traceparent, is ignored, as if absent.
    std::string_view traceparent;
    if (header.count(kTraceparent) == 1) {
      const auto value = header[kTraceparent];
      traceparent = std::string_view(value.data(), value.size());
      if (!util::is_valid_traceparent(traceparent)) traceparent = {};
    }
    if (server_.options.request_log) {
      const std::string_view full(header.target().data(), header.target().size());
      log_path_.assign(full.substr(0, full.find('?')));
      if (!traceparent.empty()) log_trace_id_.assign(*util::trace_id_of(traceparent));
    }
    keep_alive_ = header.keep_alive();
    if (header.version() != 10 && header.version() != 11) {
      return refuse(error_response(505, "http_version_not_supported",
                                   "only HTTP/1.0 and HTTP/1.1 are served"));
    }
    const std::string_view target(header.target().data(), header.target().size());
    if (target.size() > kTargetLimit) {
      return refuse(error_response(414, "target_too_long", "the request target exceeds 8 KiB"));
    }
    if (target.empty() || target.front() != '/') {
      return refuse(error_response(400, "bad_request",
                                   "the request target must be a path starting with '/'"));
    }
    if (header.count(http::field::transfer_encoding)) {
      const auto coding = header[http::field::transfer_encoding];
      if (!iequals(trim(std::string_view(coding.data(), coding.size())), "chunked")) {
        return refuse(
            error_response(501, "not_implemented", "the only transfer coding served is 'chunked'"));
      }
      if (header.count(http::field::content_length)) {
        return refuse(
            error_response(400, "bad_request",
                           "a request must not carry both Transfer-Encoding and Content-Length"));
      }
    }
    request_in_ = Request{};
    request_in_.method = method_;
    request_in_.traceparent = std::string(traceparent);
    split_target(target, request_in_);
    auto matched = server_.router.match(request_in_);
    const auto* hit = std::get_if<Router::Match>(&matched);
    const auto authorization = header[http::field::authorization];
    request_in_.authorized =
        server_.authorized(std::string_view(authorization.data(), authorization.size()));
    if (!(hit && hit->access == Router::Access::kPublic) && !request_in_.authorized) {
      return refuse(
          error_response(401, "unauthorized", "a valid 'Authorization: Bearer' token is required"));
    }
    if (auto* error = std::get_if<ApiError>(&matched))
      return refuse({error->status, error_body(*error)}, false);
    route_ = request_in_.route;
    match_ = *hit;
    if (parser_->is_done()) return dispatch();
    // Public routes are reads; a body there would let a client without the token hold memory.
    if (match_.access == Router::Access::kPublic) {
      return refuse(error_response(413, "body_too_large", "this route takes no request body"));
    }
    // The declared length, or the most a chunked body may reach.
    const size_t wanted = parser_->content_length()
                              ? static_cast<size_t>(*parser_->content_length())
                              : server_.options.max_body;
    if (!server_.reserve_body(wanted)) {
      Response busy = error_response(503, "unavailable",
                                     "the server holds as many request bodies as it may; retry");
      busy.retry_after = kRetryAfterSeconds;
      return refuse(std::move(busy));
    }
    reserved_ = wanted;
    const auto expect = header[http::field::expect];
    if (iequals(std::string_view(expect.data(), expect.size()), "100-continue")) {
      queue_write("HTTP/1.1 100 Continue\r\n\r\n");
    }
    tcp().expires_after(server_.options.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = self()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec) return refuse_unparsed(ec);
    tcp().expires_never();
    request_in_.body = std::move(parser_->get().body());
    dispatch();
  }

  void dispatch() {
    Request request = std::move(request_in_);
    const Handler* handler = match_.handler;
    const bool no_pool = server_.options.worker_threads == 0;
    if (no_pool || (match_.runs == Router::Runs::kInline && server_.options.nonblocking_store)) {
      return (*handler)(request, make_exchange());
    }
    auto exchange = make_exchange();
    asio::post(server_.workers, [handler, request = std::move(request), exchange]() mutable {
      (*handler)(request, exchange);
    });
  }

  // A read that failed: an answer if the client sent something wrong, else a quiet close.
  void refuse_unparsed(beast::error_code ec) {
    const auto data = buffer_.data();
    auto answer =
        parse_failure(ec, std::string_view(static_cast<const char*>(data.data()), data.size()));
    if (!answer) return close();
    busy_ = true;
    tcp().expires_never();
    refuse(std::move(*answer));
  }

  // Answers before the request was read to its end, so the connection cannot carry another.
  // `close`: a request that broke the protocol, or had no valid token, ends its connection
  // whatever remains to read.
  void refuse(Response response, bool close = true) {
    if (close || !parser_ || !parser_->is_done()) {
      keep_alive_ = false;
      linger_ = true;
    }
    finish(std::move(response));
  }

  std::shared_ptr<Exchange> make_exchange();

  void finish(Response response) {
    if (done_) return;
    done_ = true;
    disconnect_ = nullptr;
    release_body();
    const auto took = latency();
    if (server_.observer) server_.observer(method_, route_, response.status, took);
    if (server_.options.request_log) log_request(response.status, took);
    if (gone_) return close();
    if (server_.stopping) keep_alive_ = false;
    std::string head =
        "HTTP/1.1 " + std::to_string(response.status) + " " + reason(response.status) + "\r\n";
    if (response.status != 204) {
      head += "Content-Type: " + response.content_type +
              "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\n";
    }
    if (response.retry_after)
      head += "Retry-After: " + std::to_string(response.retry_after) + "\r\n";
    head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    if (response.status != 204) head += response.body;
    after_write_ = keep_alive_ ? After::kNextRequest : After::kClose;
    if (watching_) {
      beast::error_code ignored;       // the socket may be closed already (a timeout closes it)
      tcp().socket().cancel(ignored);  // the disconnect watch ends; see on_watch
    }
    queue_write(std::move(head));
  }

  void begin_stream() {
    if (done_) return;
    done_ = true;
    streaming_ = true;
    release_body();
    const auto took = latency();
    if (server_.observer) server_.observer(method_, route_, 200, took);
    if (server_.options.request_log) log_request(200, took);
    after_write_ = After::kNothing;
    queue_write(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\n\r\n");
    arm_keep_alive();
    if (!watching_) watch_for_disconnect();
  }

  // Since the request's header was read; 0 before that (a request refused unparsed).
  std::chrono::nanoseconds latency() const {
    return started_ == std::chrono::steady_clock::time_point{}
               ? std::chrono::nanoseconds(0)
               : std::chrono::steady_clock::now() - started_;
  }

  void log_request(unsigned status, std::chrono::nanoseconds took) {
    HttpOptions::RequestRecord record;
    record.method = method_.empty() ? std::string_view("-") : std::string_view(method_);
    record.path = log_path_.empty() ? std::string_view("-") : std::string_view(log_path_);
    record.route = route_;
    record.status = status;
    record.latency = took;
    record.client = client_;
    record.trace_id = log_trace_id_;
    server_.options.request_log(record);
  }

  void arm_keep_alive() {
    keep_alive_timer_.expires_after(kStreamKeepAlive);
    keep_alive_timer_.async_wait([self = self()](beast::error_code ec) {
      if (ec || !self->streaming_ || self->gone_) return;
      self->queue_write(": keep-alive\n\n");
      self->arm_keep_alive();
    });
  }

  void queue_write(std::string chunk) {
    queued_bytes_ += chunk.size();
    writes_.push_back(std::move(chunk));
    if (streaming_ && queued_bytes_ > kMaxQueuedBytes) {
      client_gone();
      return close();
    }
    if (!writing_) write_next();
  }

  void write_next() {
    if (closed_) return;
    if (writes_.empty()) {
      writing_ = false;
      // A client seen gone while a write was under way is closed once the writes end.
      if (gone_) return close();
      if (close_after_writes_) return close(true);
      if (after_write_ == After::kClose) return linger_ ? linger() : close(true);
      if (after_write_ == After::kNextRequest) {
        after_write_ = After::kNothing;
        // The next request waits for the disconnect watch to end; it may hold pipelined bytes.
        if (watching_)
          resume_after_watch_ = true;
        else
          read_next_request();
      }
      return;
    }
    writing_ = true;
    asio::async_write(stream_, asio::buffer(writes_.front()),
                      [self = self()](beast::error_code ec, size_t) {
                        self->queued_bytes_ -= self->writes_.front().size();
                        self->writes_.pop_front();
                        if (ec) {
                          self->client_gone();
                          return self->close();
                        }
                        self->write_next();
                      });
  }

  void read_next_request() {
    done_ = false;
    ++request_;
    route_.clear();
    read_request();
  }

  // While a long-poll or stream waits, a read notices the client going away.
  void watch_for_disconnect() {
    if (buffer_.size() + 4096 > buffer_.max_size()) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096), [self = self()](beast::error_code ec, size_t n) {
      self->on_watch(ec, n);
    });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    if (!ec) {
      buffer_.commit(n);  // a pipelined request: kept for later
      if (!done_ || streaming_) return watch_for_disconnect();
    } else if (ec != asio::error::operation_aborted) {
      client_gone();
      if (!writing_ && (done_ || streaming_)) return close();
      return;
    }
    if (resume_after_watch_) {
      resume_after_watch_ = false;
      read_next_request();
    }
  }

  // The answer is written but the client may still be sending a body it was told not to: its
  // bytes are read and dropped for a moment, so that closing with them unread (a reset) does
  // not destroy the answer before the client reads it. Raw TCP, under any TLS.
  void linger() {
    if (closed_) return;
    buffer_.clear();
    buffer_.shrink_to_fit();
    beast::error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    drain_ = std::make_unique<std::array<char, 4096>>();
    tcp().expires_after(kLinger);
    drain();
  }

  void drain() {
    tcp().async_read_some(asio::buffer(*drain_), [self = self()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void client_gone() {
    if (gone_) return;
    gone_ = true;
    streaming_ = false;
    keep_alive_timer_.cancel();
    if (auto cb = std::move(disconnect_)) {
      disconnect_ = nullptr;
      cb();
    }
  }

  void release_body() {
    if (reserved_) server_.release_body(reserved_);
    reserved_ = 0;
  }

  // `graceful` when the exchange ended as it should (not after an error): a TLS connection
  // then sends its close_notify first, so a client reading a stream to its end sees a clean
  // end rather than a truncation. Without waiting for the client's own: the connection is
  // done either way.
  void close(bool graceful = false) {
    if (closed_) return;
    closed_ = true;
    keep_alive_timer_.cancel();
    release_body();
    client_gone();
    server_.untrack(this);
    if constexpr (kTls) {
      // A socket beast closed when a timeout ran out (a handshake's, say) has nothing to shut
      // down; cancel() would throw on it, and a server stopping then would terminate.
      if (graceful && !writing_ && tcp().socket().is_open()) {
        beast::error_code ignored;
        tcp().socket().cancel(ignored);  // a pending read ends; its handler sees closed_
        SSL_set_shutdown(stream_.native_handle(), SSL_RECEIVED_SHUTDOWN);
        tcp().expires_after(kLinger);
        stream_.async_shutdown([self = self()](beast::error_code) { self->close_socket(); });
        return;
      }
    }
    close_socket();
  }

  void close_socket() {
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp().close();
  }

  enum class After { kNothing, kNextRequest, kClose };

  Stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_{kReadBufferLimit};
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_in_;  // the request whose body is being read
  Router::Match match_;
  size_t reserved_ = 0;  // taken from the server's body budget
  asio::steady_timer keep_alive_timer_;
  std::deque<std::string> writes_;
  size_t queued_bytes_ = 0;
  std::unique_ptr<std::array<char, 4096>> drain_;
  std::function<void()> disconnect_;
  std::string route_;
  std::string method_;  // of the request being served; "" before its header is read
  // For HttpOptions::request_log only (empty when it is not set).
  std::string client_, log_path_, log_trace_id_;
  std::chrono::steady_clock::time_point started_{};
  After after_write_ = After::kNothing;
  uint64_t request_ = 1;  // which request of this connection is being served
  bool keep_alive_ = false, busy_ = false, done_ = false, streaming_ = false, writing_ = false;
  bool watching_ = false, resume_after_watch_ = false, close_after_writes_ = false, gone_ = false,
       closed_ = false;
  bool linger_ = false;
};

class SessionExchange : public Exchange {
 public:
  SessionExchange(std::shared_ptr<SessionBase> session, uint64_t request)
      : session_(std::move(session)), request_(request) {}
  void reply(Response response) override { session_->reply(request_, std::move(response)); }
  void start_stream() override { session_->start_stream(request_); }
  void send_event(std::string_view event, std::string_view data) override {
    session_->send(request_,
                   "event: " + std::string(event) + "\ndata: " + std::string(data) + "\n\n");
  }
  void send_comment(std::string_view text) override {
    session_->send(request_, ": " + std::string(text) + "\n\n");
  }
  void end_stream() override { session_->end_stream(request_); }
  void on_disconnect(std::function<void()> callback) override {
    session_->on_disconnect(request_, std::move(callback));
  }
  void offload(std::function<void()> task) override { session_->offload(std::move(task)); }

 private:
  std::shared_ptr<SessionBase> session_;
  uint64_t request_;
};

template <class Stream>
std::shared_ptr<Exchange> Session<Stream>::make_exchange() {
  return std::make_shared<SessionExchange>(shared_from_this(), request_);
}

const char* accept_failure_reason(beast::error_code ec) {
  if (ec == asio::error::no_descriptors) return "emfile";
  if (ec == boost::system::errc::too_many_files_open_in_system) return "enfile";
  if (ec == asio::error::no_buffer_space || ec == asio::error::no_memory) return "nomem";
  return "other";
}

}  // namespace

void HttpServer::Impl::track(const std::shared_ptr<SessionBase>& s) {
  util::MutexLock lock(sessions_mu);
  sessions.insert(s.get());
  session_refs[s.get()] = s;
}

void HttpServer::Impl::untrack(SessionBase* s) {
  util::MutexLock lock(sessions_mu);
  sessions.erase(s);
  session_refs.erase(s);
  sessions_cv.notify_all();
}

void HttpServer::Impl::accept_next() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping || ec == asio::error::operation_aborted) return;
    if (ec) return accept_failed(ec);
    accept_pause = 0ms;
    std::shared_ptr<SessionBase> session;
    if (tls)
      session = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
          *this, std::move(socket), *tls);
    else
      session = std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket));
    track(session);
    session->start();
    accept_next();
  });
}

// Out of descriptors or memory, the listening socket stays readable and an immediate retry
// fails again at once: a spinning loop that starves every connection already open.
void HttpServer::Impl::accept_failed(beast::error_code ec) {
  const char* why = accept_failure_reason(ec);
  if (options.on_accept_error) options.on_accept_error(why);
  const bool resource = std::string_view(why) != "other";
  if (resource)
    accept_pause =
        accept_pause == 0ms ? kFirstAcceptPause : std::min(accept_pause * 2, kMaxAcceptPause);
  ++accept_failures_unlogged;
  const auto now = std::chrono::steady_clock::now();
  if (options.log && now - accept_logged >= kAcceptLogInterval) {
    options.log("cannot accept connections: " + ec.message() + " (" +
                std::to_string(accept_failures_unlogged) +
                " failures since the last report); pausing accepts for " +
                std::to_string(accept_pause.count()) + " ms");
    accept_failures_unlogged = 0;
    accept_logged = now;
  }
  if (!resource) return accept_next();
  accept_timer.expires_after(accept_pause);
  accept_timer.async_wait([this](beast::error_code timer_ec) {
    if (timer_ec || stopping) return;
    accept_next();
  });
}

std::string HttpServer::Impl::load_tls() {
  if (options.tls_cert.empty() != options.tls_key.empty())
    return "TLS needs both a certificate and a key";
  if (options.tls_cert.empty()) {
    if (!options.tls_client_ca.empty()) return "a TLS client CA needs a server certificate and key";
    return "";
  }
  tls.emplace(ssl::context::tls_server);
  beast::error_code ec;
  tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  tls->use_certificate_chain_file(options.tls_cert, ec);
  if (ec) return "cannot load the TLS certificate '" + options.tls_cert + "': " + ec.message();
  tls->use_private_key_file(options.tls_key, ssl::context::pem, ec);
  if (ec) return "cannot load the TLS key '" + options.tls_key + "': " + ec.message();
  if (SSL_CTX_check_private_key(tls->native_handle()) != 1) {
    return "the TLS key '" + options.tls_key + "' does not match the certificate '" +
           options.tls_cert + "'";
  }
  if (!options.tls_client_ca.empty()) {
    tls->load_verify_file(options.tls_client_ca, ec);
    if (ec) return "cannot load the TLS client CA '" + options.tls_client_ca + "': " + ec.message();
    tls->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  // A client's certificate chain is held while the handshake reads it: bound it, and give back
  // an idle connection's buffers.
  SSL_CTX_set_max_cert_list(tls->native_handle(), 32 * 1024);
  SSL_CTX_set_mode(tls->native_handle(), SSL_MODE_RELEASE_BUFFERS);
  return "";
}

HttpServer::HttpServer(HttpOptions options, Router router, Observer observer)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(router), std::move(observer))) {}

HttpServer::~HttpServer() = default;

std::variant<unsigned short, std::string> HttpServer::listen() {
  if (auto error = impl_->load_tls(); !error.empty()) return error;
  beast::error_code ec;
  auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) return "'" + impl_->options.host + "' is not an IP address";
  tcp::endpoint endpoint(address, impl_->options.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return "cannot listen on " + impl_->options.host + ":" + std::to_string(impl_->options.port) +
           ": " + ec.message();
  impl_->accept_next();
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::run() {
  // Each I/O thread runs its loop with commit batching: the store calls that handlers make on
  // these threads (kv::run_async on LMDB) commit together, one group per turn of the loop.
  // asio::defer, not post: from a loop thread post wakes another of its threads to run it.
  auto run_loop = [this] {
    kv::LoopBatching batching(
        [this](std::function<void()> task) { asio::defer(impl_->ioc, std::move(task)); });
    impl_->ioc.run();
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < std::max(1u, impl_->options.io_threads); ++i) {
    threads.emplace_back(run_loop);
  }
  run_loop();
  for (auto& t : threads) t.join();
  impl_->workers.join();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  impl_->stopping = true;
  asio::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->accept_timer.cancel();
  });
  Impl& impl = *impl_;  // named, so that the analysis sees one sessions_mu throughout
  std::vector<std::shared_ptr<SessionBase>> open;
  {
    util::MutexLock lock(impl.sessions_mu);
    for (auto& [ptr, weak] : impl.session_refs) {
      if (auto s = weak.lock()) open.push_back(s);
    }
  }
  for (auto& s : open) s->close_if_idle();
  open.clear();
  {
    const auto until = std::chrono::steady_clock::now() + grace;
    util::MutexLock lock(impl.sessions_mu);
    while (!impl.sessions.empty()) {
      if (!impl.sessions_cv.wait_until(impl.sessions_mu, until)) break;  // the grace is over
    }
  }
  impl_->guard.reset();
  impl_->ioc.stop();
}

}  // namespace kvq::server
