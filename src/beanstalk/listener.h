// beanstalk/listener.h — the TCP listener of `kvq serve --beanstalk-listen`: beanstalkd's
// protocol (beanstalk/protocol.h) over the public jobs API (beanstalk/session.h).
//
// What it promises:
// - A few I/O threads (Boost.Asio) read and write every connection asynchronously; an idle
//   connection, or one waiting in a reserve, holds memory, never a thread.
// - Each command runs on a worker pool (worker_threads), because most jobs calls the protocol
//   maps to are synchronous and a durable commit waits for an fsync: on the I/O threads it
//   would hold up every other connection. With worker_threads 0 — for a store whose calls never
//   wait on a disk or a network, LMDB with relaxed durability, as `kvq serve --worker-threads`
//   decides for HTTP — commands run on the I/O thread that read them, since handing a
//   microsecond's call to another thread and back costs more than the call. A reserve's wait
//   holds no thread either way (Jobs::accept_any_async).
// - A connection's commands run one at a time, in order, and their replies go out in that
//   order. While one runs, the connection keeps reading (so that a client that goes away during
//   a reserve is seen at once) until it holds about one more request: memory per connection is
//   bounded by max_job_size plus a line and a read buffer, whatever the client sends.
// - When a connection closes, the jobs it reserved go back to ready at once (Session::close).
// - stop() stops accepting, ends every connection (a waiting reserve answers TIMED_OUT to no
//   one), hands back their jobs, and joins the I/O threads; the destructor then joins the
//   worker pool once it has run what was posted. REQUIRES: the Jobs outlives the Listener.
//
// Thread-safety: listen(), start() and stop() are called from one thread, in that order.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "kvq/jobs.h"

namespace kvq::beanstalk {

struct ListenerOptions {
  std::string host = "127.0.0.1";  // a numeric address
  unsigned short port = 11300;     // 0: any free port
  size_t max_job_size = 65535;     // beanstalkd's -z; REQUIRES <= JobsOptions::max_data_bytes
  unsigned io_threads = 2;
  unsigned worker_threads = 4;  // 0: commands run on the I/O threads
  // Lines for the operator (accept failures); nullptr: not logged.
  std::function<void(const std::string& line)> log;
};

class Listener {
 public:
  // REQUIRES: `jobs` outlives the Listener.
  Listener(jobs::Jobs& jobs, ListenerOptions options);
  ~Listener();  // stop()s if needed
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds and listens; the bound port, or an error message.
  std::variant<unsigned short, std::string> listen();
  // Starts the I/O threads, which accept and serve connections until stop().
  void start();
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvq::beanstalk
