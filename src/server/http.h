// server/http.h — the server's view of one HTTP exchange, independent of Beast.
//
// A handler gets the Request and an Exchange, and completes the exchange exactly once: with
// reply(), or by turning it into an event stream (start_stream, send_event..., end_stream).
// Exchange methods are thread-safe, so a handler may complete from any thread (a store worker,
// the jobs layer's acceptor, a subscription callback).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvq::server {

struct Request {
  std::string method;                         // "GET", "POST", ...
  std::vector<std::string> segments;          // the path, split at '/' and percent-decoded
  std::map<std::string, std::string> query;   // decoded query parameters
  std::map<std::string, std::string> params;  // the route's {placeholders}
  std::string body;
  std::string route;  // the matched route pattern, for metrics
  // The request's W3C `traceparent` header if it sent exactly one and it is valid, else ""
  // (W3C Trace Context: an invalid one is ignored).
  std::string traceparent;
  // Whether the caller may do everything: it sent the server's token, or the server has none.
  // Public routes (Router::Access::kPublic) are served either way and use this to show less.
  bool authorized = false;
};

struct Response {
  unsigned status = 200;
  std::string body;  // empty for 204
  std::string content_type = "application/json";
  unsigned retry_after = 0;  // seconds; 0 sends no Retry-After header
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void reply(Response response) = 0;
  // Sends 200 with text/event-stream; the connection closes after end_stream().
  virtual void start_stream() = 0;
  virtual void send_event(std::string_view event, std::string_view data) = 0;
  virtual void send_comment(std::string_view text) = 0;
  virtual void end_stream() = 0;
  // `callback` runs once if the client disconnects before the exchange completes (for
  // long-polls and streams, which otherwise would not notice).
  virtual void on_disconnect(std::function<void()> callback) = 0;
  // Runs `task`, which may block on the store, later and where that is allowed: on the
  // server's worker pool (with none, on an I/O thread), never inside the caller's stack. For
  // Router::Runs::kInline handlers, and for callbacks of asynchronous store calls, which must
  // not block (kv.h).
  virtual void offload(std::function<void()> task) = 0;
};

using Handler = std::function<void(Request&, std::shared_ptr<Exchange>)>;

std::string percent_decode(std::string_view text, bool plus_is_space);
// Fills request.segments (percent-decoded, the trailing empty one dropped) and request.query
// from a request target such as "/v1/jobs/t?state=pending".
void split_target(std::string_view target, Request& request);

}  // namespace kvq::server
