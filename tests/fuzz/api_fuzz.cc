// tests/fuzz/api_fuzz.cc — libFuzzer target: arbitrary requests against every route of the
// HTTP API (server/api.h), in process, on a real LMDB store, as `kvq serve` dispatches them.
//
// An input is one request: its first byte picks the method (G, P, U, D for GET, POST, PUT,
// DELETE; others by their value), the bytes up to the first newline are the target (path and
// query), the rest is the body. A finding is a crash or sanitizer report, a reply with a 5xx
// status (bad input must get a 4xx naming the problem), an exchange completed twice (or a
// stream ended that was never started), or one never completed. Long-polls and event streams
// are ended the way `kvq serve` ends them on shutdown (Api::end_all_waiting), since an input
// may ask to wait minutes.
//
// Run it with `make fuzz` (FUZZ_SECONDS=N for longer); the seed corpus is tests/fuzz/corpus.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>

#include "fuzz_server.h"
#include "server/api_error.h"
#include "util/thread_pool.h"

namespace kvq::server {
namespace {

using namespace std::chrono_literals;

[[noreturn]] void finding(const std::string& what, std::string_view target) {
  fuzz::finding("api_fuzz", what, target);
}

// An exchange that records how it completed.
class RecordingExchange : public Exchange {
 public:
  explicit RecordingExchange(util::ThreadPool& pool) : pool_(pool) {}

  void reply(Response response) override { complete(response.status, false); }
  void start_stream() override {
    std::lock_guard lock(mu_);
    if (done_) replied_twice_ = true;
    streaming_ = true;
  }
  void send_event(std::string_view, std::string_view) override {}
  void send_comment(std::string_view) override {}
  void end_stream() override { complete(200, true); }
  void on_disconnect(std::function<void()>) override {}
  void offload(std::function<void()> task) override { pool_.post(std::move(task)); }

  // The status once completed within `wait`, or 0.
  unsigned wait_for(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return done_; });
    return done_ ? status_ : 0;
  }
  bool replied_twice() {
    std::lock_guard lock(mu_);
    return replied_twice_;
  }

 private:
  void complete(unsigned status, bool ends_stream) {
    std::lock_guard lock(mu_);
    if (done_ || (ends_stream && !streaming_)) replied_twice_ = true;
    if (!done_) status_ = status;
    done_ = true;
    cv_.notify_all();
  }

  util::ThreadPool& pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool streaming_ = false;
  bool replied_twice_ = false;
  unsigned status_ = 0;
};

struct Server {
  fuzz::Backend backend{"api_fuzz"};
  Router router = backend.routes();
  util::ThreadPool pool{4};  // kvq serve's worker pool, for handlers and offloaded work
};

void run_one(Server& server, std::string_view input) {
  static constexpr const char* kMethods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
  if (input.empty()) return;
  Request request;
  switch (input[0]) {  // readable seeds: G, P, U, D
    case 'G': request.method = "GET"; break;
    case 'P': request.method = "POST"; break;
    case 'U': request.method = "PUT"; break;
    case 'D': request.method = "DELETE"; break;
    default: request.method = kMethods[static_cast<unsigned char>(input[0]) % std::size(kMethods)];
  }
  input.remove_prefix(1);
  const auto newline = input.find('\n');
  const std::string_view target = input.substr(0, newline);
  // An HTTP parser hands on only a non-empty target without spaces or control bytes.
  if (target.empty()) return;
  for (unsigned char c : target) {
    if (c <= ' ' || c == 0x7f) return;
  }
  request.body = newline == std::string_view::npos ? "" : std::string(input.substr(newline + 1));
  split_target(target, request);

  auto exchange = std::make_shared<RecordingExchange>(server.pool);
  auto matched = server.router.match(request);
  if (auto* error = std::get_if<ApiError>(&matched)) {
    reply_error(*exchange, *error);
  } else {
    const Handler* handler = std::get<Router::Match>(matched).handler;
    server.pool.post([handler, request, exchange]() mutable { (*handler)(request, exchange); });
  }
  unsigned status = exchange->wait_for(50ms);
  if (status == 0) {
    // Waiting (a long-poll or a stream): end it as a shutdown would.
    server.backend.api->end_all_waiting();
    status = exchange->wait_for(10s);
  }
  if (status == 0) finding("the exchange was never completed", target);
  if (exchange->replied_twice()) {
    finding("the exchange was completed twice, or ended a stream it never started", target);
  }
  if (status >= 500) finding("status " + std::to_string(status), target);
}

}  // namespace
}  // namespace kvq::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* server = new kvq::server::Server();  // lives for the whole run, as a server does
  kvq::server::run_one(*server, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
