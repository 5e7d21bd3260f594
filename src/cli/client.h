// cli/client.h — a small synchronous client for the kvq HTTP API (docs/http-api.md).
//
// One Client owns one keep-alive connection, reused across calls and re-opened when the server
// closed it, over plain TCP for http:// or TLS (OpenSSL) for https:// URLs. Not thread-safe:
// give each thread its own Client. A TlsContext is immutable once made and may be shared by
// Clients on any threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvq/status.h"

namespace kvq::cli {

// A parsed base URL: http://HOST[:PORT][/PREFIX] or https://HOST[:PORT][/PREFIX]. `base` is the
// normalized "http://host:port" or "https://host:port" (plus prefix) used in messages.
struct Url {
  bool tls = false;    // https://
  std::string host;    // without brackets for IPv6 literals
  std::string port;    // "80" (http) or "443" (https) when omitted
  std::string prefix;  // "" or "/something" (no trailing slash)
  std::string base;
};

// Parses `text`; another scheme, no host or a bad port is kInvalidArgument, its message for the
// user ("bad port in URL 'http://h:x'").
Result<Url> parse_url(std::string_view text);

// What a Client trusts and presents on https:// URLs: paths of PEM files, "" for none.
struct TlsOptions {
  std::string ca_cert;      // the CAs the server's certificate must chain to; "" = the system's
                            // default trust store
  std::string client_cert;  // a certificate (chain) to present, for servers that require one
  std::string client_key;   // its private key, unencrypted; given exactly when client_cert is
};

// An OpenSSL client context with the certificates of one TlsOptions loaded, so that they are
// read once and not per connection. Every connection made with it verifies the server's
// certificate chain and that the certificate names the URL's host (a DNS name, or an IP address
// literal against the certificate's IP addresses), and sends the host name by SNI.
class TlsContext;

// Loads `options`, never returning nullptr. A file that is missing, unreadable or not what it
// should be, or only one of cert and key given, is kInvalidArgument, its message for the user
// ("cannot read CA certificate file 'x': No such file or directory", "cannot use client key file
// 'k': key values mismatch", ...).
Result<std::shared_ptr<const TlsContext>> make_tls_context(const TlsOptions& options);

// Percent-encodes everything but the unreserved characters (A-Z a-z 0-9 - . _ ~), so the result
// is safe as one path segment or one query value.
std::string percent_encode(std::string_view text);

// "?k=v&k2=v2" from the pairs whose value is non-empty (values percent-encoded), or "".
std::string query_string(const std::vector<std::pair<std::string, std::string>>& params);

// The outcome of one HTTP call.
struct Response {
  int status = 0;       // the HTTP status; 0 when no response arrived (network error)
  nlohmann::json body;  // the parsed JSON body; null when there is none or it is not JSON
  std::string text;     // the raw body
  std::string error;    // the server's error name ("not_found", ...), or "network"
  std::string message;  // the server's message, or what went wrong on the network

  bool ok() const { return status >= 200 && status < 300; }
  bool network_error() const { return status == 0; }
  // "not_found: job 'x' does not exist", "cannot connect to http://...: connection refused",
  // "TLS handshake with https://...: certificate verify failed (self-signed certificate)",
  // or "HTTP 502" for an error without a body.
  std::string describe() const;
};

// One server-sent event.
struct SseEvent {
  std::string event;  // "message" when the server sent no event: line
  std::string data;   // data: lines joined with '\n'
  std::string id;
};

// Incremental text/event-stream parser. The callback returns false to stop.
class SseParser {
 public:
  explicit SseParser(std::function<bool(const SseEvent&)> on_event)
      : on_event_(std::move(on_event)) {}
  // Feeds bytes; returns false once the callback asked to stop.
  bool feed(std::string_view bytes);

 private:
  bool line(std::string_view line);

  std::function<bool(const SseEvent&)> on_event_;
  std::string partial_;
  SseEvent current_;
  bool has_data_ = false;
  bool stopped_ = false;
  bool last_was_cr_ = false;
};

class Client {
 public:
  using Json = nlohmann::json;
  static constexpr std::chrono::milliseconds kDefaultTimeout{30000};

  // `tls` is used for https:// URLs; without one, an https:// Client trusts the system's default
  // store and presents no certificate.
  Client(Url url, std::string token, std::shared_ptr<const TlsContext> tls = nullptr);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Url& url() const;

  // One request. `target` is the path and query ("/v1/jobs/t/j1"), already percent-encoded;
  // `timeout` bounds connecting, and then sending the request and receiving the whole response
  // together (a new connection's TLS handshake counts as connecting). A request on a reused
  // connection that the server had closed is retried once on a new connection.
  Response request(std::string_view method, std::string_view target, const Json* body = nullptr,
                   std::chrono::milliseconds timeout = kDefaultTimeout);
  Response get(std::string_view target, std::chrono::milliseconds timeout = kDefaultTimeout) {
    return request("GET", target, nullptr, timeout);
  }
  Response post(std::string_view target, const Json& body,
                std::chrono::milliseconds timeout = kDefaultTimeout) {
    return request("POST", target, &body, timeout);
  }
  Response put(std::string_view target, const Json& body,
               std::chrono::milliseconds timeout = kDefaultTimeout) {
    return request("PUT", target, &body, timeout);
  }
  Response del(std::string_view target, std::chrono::milliseconds timeout = kDefaultTimeout) {
    return request("DELETE", target, nullptr, timeout);
  }

  // GETs an event stream and calls `on_event` for each event until the server closes the
  // stream or the callback returns false. Returns a 200 Response when the stream ended that way,
  // else the error (an HTTP error response, or a network error). `idle_timeout` (0 = none)
  // bounds the silence between two reads.
  Response stream(std::string_view target, const std::function<bool(const SseEvent&)>& on_event,
                  std::chrono::milliseconds idle_timeout = std::chrono::milliseconds(0));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "/v1/jobs/{type}/{id}"-style helper: joins percent-encoded segments after `prefix`.
std::string path(std::string_view prefix, std::initializer_list<std::string_view> segments);

}  // namespace kvq::cli
