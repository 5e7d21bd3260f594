#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <deque>
#include <mutex>
#include <set>
#include <thread>

namespace kvq::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr auto kIdleTimeout = 60s;       // a keep-alive connection with no request
constexpr auto kStreamKeepAlive = 15s;   // comment lines on an idle event stream
constexpr size_t kMaxPipelined = 64 * 1024;

std::string reason(unsigned status) {
  return std::string(http::obsolete_reason(static_cast<http::status>(status)));
}

// Compares every byte whatever the first difference, so timing does not reveal a prefix of
// the token (only whether the lengths match).
bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

class Session;

struct HttpServer::Impl {
  Impl(HttpOptions o, Router r, Observer obs)
      : options(std::move(o)), router(std::move(r)), observer(std::move(obs)), acceptor(ioc),
        workers(std::max(1u, options.worker_threads)), guard(asio::make_work_guard(ioc)) {}

  void accept_next();
  void track(const std::shared_ptr<Session>& s);
  void untrack(Session* s);

  HttpOptions options;
  Router router;
  Observer observer;
  // Before the io_context: destroying it destroys the sessions its pending handlers hold, and
  // each untracks itself.
  std::mutex sessions_mu;
  std::set<Session*> sessions;
  std::map<Session*, std::weak_ptr<Session>> session_refs;
  std::condition_variable sessions_cv;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::thread_pool workers;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  std::atomic<bool> stopping{false};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), server_(server), keep_alive_timer_(stream_.get_executor()) {}
  // A session closes itself in every case it knows of; one whose exchange was dropped
  // unanswered (a route's bug) ends here, and must not stay in the server's list of open ones.
  ~Session() {
    if (!closed_) server_.untrack(this);
  }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

  // Called on stop: closes the connection if it is between requests.
  void close_if_idle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) self->close();
    });
  }

  // ---- the Exchange side (any thread) ----
  // offload: later, where a store call may block, never inside the caller's stack.
  void offload(std::function<void()> task) {
    if (server_.options.worker_threads > 0) return asio::post(server_.workers, std::move(task));
    asio::post(server_.ioc, std::move(task));
  }
  // Each call names the request it belongs to: on a keep-alive connection a late call from an
  // exchange that has already been answered must not touch the next request.
  void reply(uint64_t request, Response response) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), request, r = std::move(response)]() mutable {
      if (request == self->request_) self->finish(std::move(r));
    });
  }
  void start_stream(uint64_t request) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), request] {
      if (request == self->request_) self->begin_stream();
    });
  }
  void send(uint64_t request, std::string chunk) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), request, c = std::move(chunk)]() mutable {
      if (request == self->request_ && self->streaming_ && !self->gone_) self->queue_write(std::move(c));
    });
  }
  void end_stream(uint64_t request) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), request] {
      if (request != self->request_ || !self->streaming_) return;
      self->streaming_ = false;
      self->keep_alive_timer_.cancel();
      self->close_after_writes_ = true;
      if (!self->writing_) self->close();
    });
  }
  void on_disconnect(uint64_t request, std::function<void()> callback) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), request, cb = std::move(callback)]() mutable {
      if (request != self->request_) return;
      // Gone before the route asked (a stream's client can leave as soon as it starts): the
      // route must still hear of it, or it keeps its subscription forever.
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
  void read_request() {
    if (server_.stopping) return close();
    busy_ = false;
    parser_.emplace();
    parser_->body_limit(server_.options.max_body);
    parser_->header_limit(16 * 1024);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_read(ec);
    });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      busy_ = true;
      return finish({413, R"({"error":"body_too_large","message":"the request body exceeds the server's limit"})"});
    }
    if (ec) return close();
    busy_ = true;
    stream_.expires_never();
    auto message = parser_->release();
    keep_alive_ = message.keep_alive();
    Request request;
    request.method = std::string(message.method_string());
    request.body = std::move(message.body());
    split_target(std::string_view(message.target().data(), message.target().size()), request);
    auto matched = server_.router.match(request);
    const auto* hit = std::get_if<Router::Match>(&matched);
    if (!(hit && hit->access == Router::Access::kPublic) && !authorized(message)) {
      return finish({401, R"({"error":"unauthorized","message":"a valid 'Authorization: Bearer' token is required"})"});
    }
    if (auto* error = std::get_if<ApiError>(&matched)) return finish({error->status, error_body(*error)});
    route_ = request.route;
    const auto& match = std::get<Router::Match>(matched);
    const Handler* handler = match.handler;
    const bool no_pool = server_.options.worker_threads == 0;
    if (no_pool || (match.runs == Router::Runs::kInline && server_.options.nonblocking_store)) {
      return (*handler)(request, make_exchange());
    }
    auto exchange = make_exchange();
    asio::post(server_.workers, [handler, request = std::move(request), exchange]() mutable {
      (*handler)(request, exchange);
    });
  }

  bool authorized(const http::request<http::string_body>& message) const {
    if (server_.options.token.empty()) return true;
    const auto header = message[http::field::authorization];
    return equal_constant_time(std::string_view(header.data(), header.size()), "Bearer " + server_.options.token);
  }

  std::shared_ptr<Exchange> make_exchange();


  void finish(Response response) {
    if (done_) return;
    done_ = true;
    disconnect_ = nullptr;
    if (server_.observer) server_.observer(route_, response.status);
    if (gone_) return close();
    if (server_.stopping) keep_alive_ = false;
    std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + reason(response.status) + "\r\n";
    if (response.status != 204) {
      head += "Content-Type: " + response.content_type + "\r\nContent-Length: " +
              std::to_string(response.body.size()) + "\r\n";
    }
    head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    if (response.status != 204) head += response.body;
    after_write_ = keep_alive_ ? After::kNextRequest : After::kClose;
    if (watching_) stream_.socket().cancel();  // the disconnect watch ends; see on_watch
    queue_write(std::move(head));
  }

  void begin_stream() {
    if (done_) return;
    done_ = true;
    streaming_ = true;
    if (server_.observer) server_.observer(route_, 200);
    after_write_ = After::kNothing;
    queue_write(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\n\r\n");
    arm_keep_alive();
    if (!watching_) watch_for_disconnect();
  }

  void arm_keep_alive() {
    keep_alive_timer_.expires_after(kStreamKeepAlive);
    keep_alive_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->streaming_ || self->gone_) return;
      self->queue_write(": keep-alive\n\n");
      self->arm_keep_alive();
    });
  }

  void queue_write(std::string chunk) {
    writes_.push_back(std::move(chunk));
    if (!writing_) write_next();
  }

  void write_next() {
    if (writes_.empty()) {
      writing_ = false;
      // A client seen gone while a write was under way is closed once the writes end.
      if (close_after_writes_ || gone_) return close();
      if (after_write_ == After::kClose) return close();
      if (after_write_ == After::kNextRequest) {
        after_write_ = After::kNothing;
        // The next request waits for the disconnect watch to end; it may hold pipelined bytes.
        if (watching_) resume_after_watch_ = true;
        else read_next_request();
      }
      return;
    }
    writing_ = true;
    asio::async_write(stream_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
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
    if (buffer_.size() > kMaxPipelined) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_watch(ec, n);
    });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
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

  void close() {
    if (closed_) return;
    closed_ = true;
    keep_alive_timer_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    client_gone();
    server_.untrack(this);
  }

  enum class After { kNothing, kNextRequest, kClose };

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  asio::steady_timer keep_alive_timer_;
  std::deque<std::string> writes_;
  std::function<void()> disconnect_;
  std::string route_;
  After after_write_ = After::kNothing;
  uint64_t request_ = 1;  // which request of this connection is being served
  bool keep_alive_ = false, busy_ = false, done_ = false, streaming_ = false, writing_ = false;
  bool watching_ = false, resume_after_watch_ = false, close_after_writes_ = false, gone_ = false, closed_ = false;
};

namespace {

class SessionExchange : public Exchange {
 public:
  SessionExchange(std::shared_ptr<Session> session, uint64_t request)
      : session_(std::move(session)), request_(request) {}
  void reply(Response response) override { session_->reply(request_, std::move(response)); }
  void start_stream() override { session_->start_stream(request_); }
  void send_event(std::string_view event, std::string_view data) override {
    session_->send(request_, "event: " + std::string(event) + "\ndata: " + std::string(data) + "\n\n");
  }
  void send_comment(std::string_view text) override { session_->send(request_, ": " + std::string(text) + "\n\n"); }
  void end_stream() override { session_->end_stream(request_); }
  void on_disconnect(std::function<void()> callback) override {
    session_->on_disconnect(request_, std::move(callback));
  }
  void offload(std::function<void()> task) override { session_->offload(std::move(task)); }

 private:
  std::shared_ptr<Session> session_;
  uint64_t request_;
};

}  // namespace

std::shared_ptr<Exchange> Session::make_exchange() {
  return std::make_shared<SessionExchange>(shared_from_this(), request_);
}

void HttpServer::Impl::track(const std::shared_ptr<Session>& s) {
  std::lock_guard lock(sessions_mu);
  sessions.insert(s.get());
  session_refs[s.get()] = s;
}

void HttpServer::Impl::untrack(Session* s) {
  std::lock_guard lock(sessions_mu);
  sessions.erase(s);
  session_refs.erase(s);
  sessions_cv.notify_all();
}

void HttpServer::Impl::accept_next() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (stopping || ec == asio::error::operation_aborted) return;
    } else {
      auto session = std::make_shared<Session>(std::move(socket), *this);
      track(session);
      session->start();
    }
    accept_next();
  });
}

HttpServer::HttpServer(HttpOptions options, Router router, Observer observer)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(router), std::move(observer))) {}

HttpServer::~HttpServer() = default;

std::variant<unsigned short, std::string> HttpServer::listen() {
  beast::error_code ec;
  auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) return "'" + impl_->options.host + "' is not an IP address";
  tcp::endpoint endpoint(address, impl_->options.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on " + impl_->options.host + ":" + std::to_string(impl_->options.port) + ": " + ec.message();
  impl_->accept_next();
  return impl_->acceptor.local_endpoint().port();
}

void HttpServer::run() {
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < std::max(1u, impl_->options.io_threads); ++i) {
    threads.emplace_back([this] { impl_->ioc.run(); });
  }
  impl_->ioc.run();
  for (auto& t : threads) t.join();
  impl_->workers.join();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  impl_->stopping = true;
  asio::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  std::vector<std::shared_ptr<Session>> open;
  {
    std::lock_guard lock(impl_->sessions_mu);
    for (auto& [ptr, weak] : impl_->session_refs) {
      if (auto s = weak.lock()) open.push_back(s);
    }
  }
  for (auto& s : open) s->close_if_idle();
  open.clear();
  {
    std::unique_lock lock(impl_->sessions_mu);
    impl_->sessions_cv.wait_for(lock, grace, [&] { return impl_->sessions.empty(); });
  }
  impl_->guard.reset();
  impl_->ioc.stop();
}

}  // namespace kvq::server
