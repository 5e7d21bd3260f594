// server/http_server.h — the HTTP/1.1 listener on Boost.Beast/Asio, plain or TLS.
//
// A few I/O threads run every connection asynchronously, so idle connections (keep-alive,
// long-polls, event streams) cost memory, not threads. Handlers run on a separate worker pool
// because they make (briefly) blocking store calls; a long-poll handler returns its worker to
// the pool and completes later from a callback. Routes that call the store only
// asynchronously (Router::Runs::kInline) run on the I/O threads when the store allows it.
//
// What a client can hold before it is trusted is bounded. A request's header is read first
// (within HttpOptions::header_timeout, at most 16 KiB) and judged before any of its body is
// read: framing and version, the bearer token (401 and close), the route, the declared length
// against max_body (413). Only then is the body read, within body_timeout, into memory reserved
// from one budget shared by every connection (max_body_memory; over it, 503 with Retry-After).
// Malformed requests get a status and a JSON body {"error", "message"}, then the connection
// closes: 400 bad framing (a bad Content-Length or chunk, a NUL or bad character in a header, a
// target not starting with '/', Content-Length with Transfer-Encoding), 413 body too large, 414
// target too long, 431 header too large, 501 a transfer coding other than chunked, 505 any
// version but HTTP/1.0 and HTTP/1.1 (HTTP/0.9's versionless request line included). Any
// answer given before the body was read closes the connection, after draining what the
// client still sends for a moment so that it sees the answer.
//
// When accepting fails for want of descriptors (EMFILE, ENFILE) or kernel memory, accepting
// pauses, 100 ms at first and doubling to 1.6 s while it keeps failing, instead of spinning;
// each failure is reported to on_accept_error and logged at most once per 10 s.
//
// With tls_cert set every connection is TLS (1.2 or later): the handshake must finish within
// handshake_timeout, and with tls_client_ca a client without a certificate signed by that CA is
// refused in the handshake. Every route, long-poll and stream then works as over plain HTTP.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "server/router.h"

namespace kvq::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  unsigned short port = 7411;  // 0: any free port
  std::string token;           // "" = no authentication
  size_t max_body = 1024 * 1024;
  // Request bodies being read or served, all connections together.
  size_t max_body_memory = 64 * 1024 * 1024;
  unsigned io_threads = 2;
  unsigned worker_threads = 8;     // 0: handlers run on the I/O thread that read the request
  bool nonblocking_store = false;  // Router::Runs::kInline routes run on the I/O threads
  // Waiting for a request's header (an idle keep-alive connection included), then its body.
  std::chrono::milliseconds header_timeout{60'000};
  std::chrono::milliseconds body_timeout{60'000};
  // TLS: PEM files. tls_cert (a chain) and tls_key together, or neither; tls_client_ca only
  // with them.
  std::string tls_cert, tls_key, tls_client_ca;
  std::chrono::milliseconds handshake_timeout{10'000};
  // Each failed accept, with its reason: "emfile", "enfile", "nomem" or "other". Runs on an
  // I/O thread; must not block.
  std::function<void(std::string_view reason)> on_accept_error;
  // Lines for the operator (accept failures, rate-limited); nullptr: not logged.
  std::function<void(const std::string& line)> log;

  // One answered request, for the request log. The views last only for the call.
  struct RequestRecord {
    std::string_view method;  // "-" when the request line could not be parsed
    std::string_view path;    // the target as sent, without its query; "-" when unparsed
    std::string_view route;   // the matched route pattern, "" if none
    unsigned status = 0;
    std::chrono::nanoseconds latency{0};  // header read -> answer queued (a stream: started)
    std::string_view client;              // "IP:PORT" of the peer
    // The trace-id of the request's `traceparent` header; "" without a valid one.
    std::string_view trace_id;
  };
  // Called on the I/O thread as each request is answered (a stream as it starts); must not
  // block. nullptr (the default): nothing is measured or copied for it.
  std::function<void(const RequestRecord& record)> request_log;
};

class HttpServer {
 public:
  // Called after every completed request with its method as sent ("" for a request refused
  // before its header was read), its route ("" if none matched), its status and its latency
  // (header read -> answer queued; a stream: started; 0 for a request refused before its
  // header was read).
  using Observer = std::function<void(const std::string& method, const std::string& route,
                                      unsigned status, std::chrono::nanoseconds latency)>;

  HttpServer(HttpOptions options, Router router, Observer observer);
  ~HttpServer();

  // Binds and listens (and loads the TLS files); returns the bound port, or an error message.
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
