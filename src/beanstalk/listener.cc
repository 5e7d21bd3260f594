#include "beanstalk/listener.h"

#include <boost/asio.hpp>

#include <array>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "beanstalk/counters.h"
#include "beanstalk/session.h"
#include "kvq/kv.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/thread_pool.h"

namespace kvq::beanstalk {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr size_t kReadChunk = 16 * 1024;
constexpr auto kAcceptPause = 200ms;  // after a failed accept (out of descriptors, say)
constexpr auto kStopGrace = 5s;

class Connection;

}  // namespace

struct Listener::Impl {
  Impl(jobs::Jobs& jobs, ListenerOptions o)
      : options(std::move(o)),
        context{.jobs = jobs,
                .counters = counters,
                .max_job_size = options.max_job_size,
                .run_blocking = [this](std::function<void()> task) { run(std::move(task)); }},
        acceptor(ioc),
        accept_timer(ioc),
        guard(asio::make_work_guard(ioc)),
        pool(options.worker_threads > 0 ? std::make_unique<util::ThreadPool>(options.worker_threads)
                                        : nullptr) {}

  // Runs `task` on the worker pool, or with none, on an I/O thread.
  void run(std::function<void()> task) {
    if (pool) return pool->post(std::move(task));
    asio::post(ioc, std::move(task));
  }

  void accept_next();
  void track(uint64_t number, const std::shared_ptr<Connection>& connection) KVQ_EXCLUDES(mu);
  void forget(uint64_t number) KVQ_EXCLUDES(mu);

  ListenerOptions options;
  Counters counters;
  SessionContext context;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::steady_timer accept_timer;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  std::unique_ptr<util::ThreadPool> pool;  // null: commands run on the I/O threads
  std::vector<std::thread> threads;
  std::atomic<uint64_t> next_number{1};
  std::atomic<bool> stopping{false};
  bool stopped = false;

  util::Mutex mu;
  util::CondVar drained;
  std::map<uint64_t, std::weak_ptr<Connection>> live KVQ_GUARDED_BY(mu);
};

namespace {

// One client connection. Everything but the session's command runs on the socket's strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Listener::Impl& server, tcp::socket socket, uint64_t number)
      : server_(server),
        socket_(std::move(socket)),
        number_(number),
        decoder_(server.options.max_job_size),
        session_(std::make_shared<Session>(server.context, number)),
        // A whole request beyond what is being run: the longest line, the largest body and its
        // CRLF, and one read.
        read_limit_(kMaxLineBytes + server.options.max_job_size + 2 + kReadChunk) {}

  void start() {
    asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->pump(); });
  }

  // From stop(): the client is treated as gone.
  void shut() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
      self->socket_.cancel(ignored);
    });
  }

 private:
  // Keeps one read going while there is room for more, so that an end of the client is seen
  // even during a long reserve.
  void read() {
    if (reading_ || ended_ || finished_ || decoder_.buffered() >= read_limit_) return;
    reading_ = true;
    socket_.async_read_some(asio::buffer(buffer_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              self->reading_ = false;
                              if (ec) {
                                self->ended_ = true;
                                if (ec != asio::error::eof) self->broken_ = true;
                                self->session_->half_closed();
                              } else {
                                self->decoder_.feed(std::string_view(self->buffer_.data(), n));
                              }
                              self->pump();
                            });
  }

  // Starts the next request if none runs.
  void pump() {
    if (finished_ || busy_) return read();
    if (broken_) return finish();
    auto request = decoder_.next();
    if (!request) {
      if (ended_) return finish();
      return read();
    }
    busy_ = true;
    read();
    auto command = [self = shared_from_this(), request = std::move(*request)]() mutable {
      self->session_->execute(std::move(request), [self](std::string reply, bool close) {
        asio::post(self->socket_.get_executor(), [self, reply = std::move(reply), close]() mutable {
          self->on_done(std::move(reply), close);
        });
      });
    };
    // Without a pool (a store whose calls never wait on a disk or a network), here: handing
    // the command to another thread and back would cost more than it does.
    if (!server_.pool) return command();
    server_.pool->post(std::move(command));
  }

  void on_done(std::string reply, bool close) {
    if (broken_ || finished_ || reply.empty()) {
      busy_ = false;
      if (close) broken_ = true;
      return pump();
    }
    auto bytes = std::make_shared<std::string>(std::move(reply));
    asio::async_write(socket_, asio::buffer(*bytes),
                      [self = shared_from_this(), bytes](boost::system::error_code ec, size_t) {
                        self->busy_ = false;
                        if (ec) self->broken_ = true;
                        self->pump();
                      });
  }

  // The connection is over: its jobs go back (on the pool: snooze is a store call) and the
  // listener forgets it.
  void finish() {
    if (finished_) return;
    finished_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    server_.run([self = shared_from_this()] {
      self->session_->close();
      self->server_.forget(self->number_);
    });
  }

  Listener::Impl& server_;
  tcp::socket socket_;
  const uint64_t number_;
  Decoder decoder_;
  std::shared_ptr<Session> session_;
  const size_t read_limit_;
  std::array<char, kReadChunk> buffer_;
  bool reading_ = false;
  bool busy_ = false;      // a command runs
  bool ended_ = false;     // the client sends nothing more
  bool broken_ = false;    // nothing more can be sent either (or quit)
  bool finished_ = false;  // closed
};

}  // namespace

void Listener::Impl::accept_next() {
  acceptor.async_accept(
      asio::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
        if (stopping || ec == asio::error::operation_aborted) return;
        if (ec) {
          // Out of descriptors the listening socket stays readable: pause instead of spinning.
          if (options.log) options.log("beanstalk: cannot accept a connection: " + ec.message());
          accept_timer.expires_after(kAcceptPause);
          accept_timer.async_wait([this](boost::system::error_code timer_ec) {
            if (!timer_ec && !stopping) accept_next();
          });
          return;
        }
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        const uint64_t number = next_number++;
        auto connection = std::make_shared<Connection>(*this, std::move(socket), number);
        track(number, connection);
        connection->start();
        accept_next();
      });
}

void Listener::Impl::track(uint64_t number, const std::shared_ptr<Connection>& connection) {
  util::MutexLock lock(mu);
  live[number] = connection;
}

void Listener::Impl::forget(uint64_t number) {
  util::MutexLock lock(mu);
  live.erase(number);
  drained.notify_all();
}

Listener::Listener(jobs::Jobs& jobs, ListenerOptions options)
    : impl_(std::make_unique<Impl>(jobs, std::move(options))) {}

Listener::~Listener() {
  stop();
  // Runs what was posted (sessions handing back their jobs), then joins: while the pool and the
  // io_context still exist, since late tasks may use both.
  impl_->pool.reset();
}

std::variant<unsigned short, std::string> Listener::listen() {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) return "--beanstalk-listen: '" + impl_->options.host + "' is not an IP address";
  const tcp::endpoint endpoint(address, impl_->options.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return "cannot listen for the beanstalkd protocol on " + impl_->options.host + ":" +
           std::to_string(impl_->options.port) + ": " + ec.message();
  }
  return impl_->acceptor.local_endpoint().port();
}

void Listener::start() {
  impl_->accept_next();
  for (unsigned i = 0; i < std::max(1u, impl_->options.io_threads); ++i) {
    impl_->threads.emplace_back([this] {
      // The store calls that sessions make on this thread (kv::run_async on LMDB) commit
      // together, one group per turn of the loop. asio::defer, not post: from a loop thread
      // post wakes another of its threads to run it.
      kv::LoopBatching batching(
          [this](std::function<void()> task) { asio::defer(impl_->ioc, std::move(task)); });
      impl_->ioc.run();
    });
  }
}

void Listener::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping = true;
  asio::post(impl_->ioc, [this] {
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->accept_timer.cancel();
  });
  {
    util::MutexLock lock(impl_->mu);
    for (auto& [number, weak] : impl_->live) {
      if (auto connection = weak.lock()) connection->shut();
    }
    const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
    while (!impl_->live.empty() && impl_->drained.wait_until(impl_->mu, deadline)) {
    }
  }
  impl_->guard.reset();
  impl_->ioc.stop();
  for (auto& thread : impl_->threads) thread.join();
  impl_->threads.clear();
}

}  // namespace kvq::beanstalk
