// server/http_server.h — the HTTP/1.1 listener on Boost.Beast/Asio.
//
// A few I/O threads run every connection asynchronously, so idle connections (keep-alive,
// long-polls, event streams) cost memory, not threads. Handlers run on a separate worker pool
// because they make (briefly) blocking store calls; a long-poll handler returns its worker to
// the pool and completes later from a callback. Routes that call the store only
// asynchronously (Router::Runs::kInline) run on the I/O threads when the store allows it. A request is read with a body limit (413
// body_too_large beyond it), checked against the bearer token, and routed.
#pragma once

#include <atomic>
#include <chrono>
#include <variant>
#include <functional>
#include <memory>
#include <string>

#include "server/router.h"

namespace kvq::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  unsigned short port = 7411;  // 0: any free port
  std::string token;           // "" = no authentication
  size_t max_body = 1024 * 1024;
  unsigned io_threads = 2;
  unsigned worker_threads = 8;  // 0: handlers run on the I/O thread that read the request
  bool nonblocking_store = false;  // Router::Runs::kInline routes run on the I/O threads
};

class HttpServer {
 public:
  // Called after every completed request with its route ("" if none matched) and status.
  using Observer = std::function<void(const std::string& route, unsigned status)>;

  HttpServer(HttpOptions options, Router router, Observer observer);
  ~HttpServer();

  // Binds and listens; returns the bound port, or an error message.
  std::variant<unsigned short, std::string> listen();
  // Serves until stop(); returns after every thread has finished.
  void run();
  // Stops accepting connections and lets in-flight requests finish (their replies are still
  // written), then ends run() once every connection is closed or `grace` has passed.
  void stop(std::chrono::milliseconds grace);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvq::server
