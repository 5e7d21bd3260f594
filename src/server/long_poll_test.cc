// LongPoll's one end (server/long_poll.h): of the result, the deadline, the client going away
// and server shutdown, whichever comes first ends the poll and the others do nothing. A real
// HttpServer on loopback, a real Api over LMDB, a raw socket for the client, and routes written
// for each case.
#include "server/long_poll.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"
#include "server/api.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/router.h"
#include "tests/support/temp_dir.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What one poll's answers did: each answer adds one, so a poll that ended twice shows 2.
struct Ends {
  std::atomic<int> answers{0};
  std::atomic<int> give_ups{0};
};

class LongPollTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = open_lmdb_store({.path = dir_.path(), .durability = Durability::kNoSync});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    store_ = *store;
    auto jobs = jobs::Jobs::open(store_);
    ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
    jobs_ = std::move(*jobs);
    auto workers = workers::Workers::open(store_);
    ASSERT_TRUE(workers.ok()) << workers.status().to_string();
    workers_ = std::move(*workers);
    api_.reset(new Api{*jobs_, *workers_, *store_, metrics_});  // an aggregate: no make_unique

    // GET /poll hands its exchange to route_, which the test sets before a request.
    Router router;
    router.add("GET", "/poll", [this](Request&, std::shared_ptr<Exchange> ex) { route_(ex); });
    HttpOptions options;
    options.port = 0;
    options.worker_threads = 2;
    server_ = std::make_unique<HttpServer>(options, std::move(router), nullptr);
    auto bound = server_->listen();
    ASSERT_TRUE(std::holds_alternative<unsigned short>(bound)) << std::get<std::string>(bound);
    port_ = std::get<unsigned short>(bound);
    runner_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    for (auto& t : racers_) t.join();
    if (api_) api_->end_all_waiting();
    if (server_) {
      server_->stop(2s);
      runner_.join();
    }
    {
      util::MutexLock lock(polls_mu_);
      polls_.clear();
    }
    server_.reset();
    api_.reset();
  }

  // A poll armed on `ex` whose give_up answers 204 (as a wait's deadline does), counted in `ends`.
  std::shared_ptr<LongPoll> armed_poll(const std::shared_ptr<Exchange>& ex,
                                       std::optional<kv::Clock::time_point> deadline,
                                       const std::shared_ptr<Ends>& ends) {
    auto poll = LongPoll::create(*api_);
    poll->arm(*ex, deadline, [ex, ends](LongPoll& p) {
      ++ends->give_ups;
      p.finish([ex, ends] {
        ++ends->answers;
        ex->reply({204, ""});
      });
    });
    return poll;
  }
  // Ends `poll` with its result: a 200.
  static bool finish_with_result(LongPoll& poll, const std::shared_ptr<Exchange>& ex,
                                 const std::shared_ptr<Ends>& ends) {
    return poll.finish([ex, ends] {
      ++ends->answers;
      ex->reply({200, "{\"result\":1}"});
    });
  }
  // Whether the server still counts a poll as waiting (Api::hold, released by finish).
  size_t waiting() {
    util::MutexLock lock(api_->waiting_mu);
    return api_->waiting.size();
  }

  int request_poll() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port_);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    const std::string request = "GET /poll HTTP/1.1\r\nHost: k\r\n\r\n";
    EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    return fd;
  }
  // The status of the one response on `fd`; 0 if none came within `wait`.
  static unsigned response_status(int fd, std::chrono::milliseconds wait) {
    std::string got;
    const auto deadline = Clock::now() + wait;
    while (got.find("\r\n") == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return 0;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buffer[4096];
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return 0;
      got.append(buffer, static_cast<size_t>(n));
    }
    if (got.rfind("HTTP/1.1 ", 0) != 0 || got.size() < 12) return 0;
    return static_cast<unsigned>(std::stoul(got.substr(9, 3)));
  }
  // Waits up to `wait` for `done`.
  static bool eventually(const std::function<bool()>& done, std::chrono::milliseconds wait = 5s) {
    for (const auto until = Clock::now() + wait; Clock::now() < until;
         std::this_thread::sleep_for(2ms)) {
      if (done()) return true;
    }
    return done();
  }
  // The poll route_ made for the last request, once it has.
  std::shared_ptr<LongPoll> last_poll() {
    util::MutexLock lock(polls_mu_);
    return polls_.empty() ? nullptr : polls_.back();
  }
  void remember(std::shared_ptr<LongPoll> poll) {
    util::MutexLock lock(polls_mu_);
    polls_.push_back(std::move(poll));
  }

  kvq::testing::TempDir dir_;
  std::shared_ptr<kv::Store> store_;
  std::unique_ptr<jobs::Jobs> jobs_;
  std::unique_ptr<workers::Workers> workers_;
  Metrics metrics_;
  std::unique_ptr<Api> api_;
  std::function<void(std::shared_ptr<Exchange>)> route_;
  std::unique_ptr<HttpServer> server_;
  unsigned short port_ = 0;
  std::thread runner_;
  std::vector<std::thread> racers_;
  util::Mutex polls_mu_;
  std::vector<std::shared_ptr<LongPoll>> polls_ KVQ_GUARDED_BY(polls_mu_);
};

TEST_F(LongPollTest, AResultFirstLeavesTheDeadlineTheClientAndShutdownNothingToDo) {
  auto ends = std::make_shared<Ends>();
  std::atomic<bool> first_finish{false};
  route_ = [&](std::shared_ptr<Exchange> ex) {
    auto poll = armed_poll(ex, kv::Clock::now() + 200ms, ends);
    first_finish = finish_with_result(*poll, ex, ends);
    remember(poll);
  };
  int fd = request_poll();
  EXPECT_EQ(response_status(fd, 5s), 200u);
  // The answer can reach the client before the route has stored what finish returned; it
  // remembers the poll after that.
  ASSERT_TRUE(eventually([&] { return last_poll() != nullptr; }));
  EXPECT_TRUE(first_finish);
  EXPECT_EQ(waiting(), 0u) << "finish left the poll held for shutdown";
  std::this_thread::sleep_for(400ms);  // past the deadline
  ::close(fd);                         // and the client goes
  std::this_thread::sleep_for(200ms);
  api_->end_all_waiting();
  auto poll = last_poll();
  ASSERT_NE(poll, nullptr);
  EXPECT_FALSE(finish_with_result(*poll, nullptr, ends)) << "a second finish ran its answer";
  EXPECT_FALSE(poll->while_open([] { ADD_FAILURE() << "a part ran after the end"; }));
  EXPECT_EQ(ends->give_ups, 0) << "the deadline, the client or shutdown gave up a finished poll";
  EXPECT_EQ(ends->answers, 1);
  // What the poll is given to keep once it has ended is dropped (on the timers' thread).
  auto resource = std::make_shared<int>(1);
  std::weak_ptr<int> kept = resource;
  poll->keep(std::move(resource));
  EXPECT_TRUE(eventually([&] { return kept.expired(); })) << "an ended poll kept a resource";
}

TEST_F(LongPollTest, TheDeadlineFirstEndsThePollOnceAndTheResultAfterItDoesNothing) {
  auto ends = std::make_shared<Ends>();
  std::shared_ptr<Exchange> exchange;
  route_ = [&](std::shared_ptr<Exchange> ex) {
    auto poll = armed_poll(ex, kv::Clock::now() + 50ms, ends);
    // Held until the poll ends, and dropped then.
    poll->keep(std::make_shared<int>(2));
    exchange = ex;
    remember(poll);
  };
  int fd = request_poll();
  EXPECT_EQ(response_status(fd, 5s), 204u);
  EXPECT_EQ(ends->give_ups, 1);
  EXPECT_EQ(ends->answers, 1);
  EXPECT_EQ(waiting(), 0u);
  // The deadline can answer before the route has stored the exchange (a loaded machine).
  ASSERT_TRUE(eventually([&] { return last_poll() != nullptr; }));
  auto poll = last_poll();
  EXPECT_FALSE(finish_with_result(*poll, exchange, ends)) << "the result ran after the deadline";
  ::close(fd);
  std::this_thread::sleep_for(200ms);
  api_->end_all_waiting();
  EXPECT_EQ(ends->give_ups, 1) << "the client's going or shutdown gave up an ended poll";
  EXPECT_EQ(ends->answers, 1);
}

TEST_F(LongPollTest, TheClientGoneFirstGivesUpOnceAndNothingAfterItRuns) {
  auto ends = std::make_shared<Ends>();
  std::shared_ptr<Exchange> exchange;
  route_ = [&](std::shared_ptr<Exchange> ex) {
    // An accept's give_up: it asks what it waits for to stop, whose callback answers later.
    auto poll = LongPoll::create(*api_);
    poll->arm(*ex, kv::Clock::now() + 500ms, [ends](LongPoll&) { ++ends->give_ups; });
    exchange = ex;
    remember(poll);
  };
  int fd = request_poll();
  ASSERT_TRUE(eventually([&] { return last_poll() != nullptr; }));
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return ends->give_ups > 0; })) << "the client's going went unheard";
  std::this_thread::sleep_for(700ms);  // past the deadline
  api_->end_all_waiting();
  EXPECT_EQ(ends->give_ups, 1) << "the deadline or shutdown gave up a second time";
  // What the give_up asked for ends the poll; a result racing it then does nothing.
  auto poll = last_poll();
  EXPECT_TRUE(poll->finish([&] { ++ends->answers; }));
  EXPECT_FALSE(finish_with_result(*poll, exchange, ends));
  EXPECT_EQ(ends->answers, 1);
  EXPECT_EQ(waiting(), 0u);
}

TEST_F(LongPollTest, AResultRacingTheDeadlineAndShutdownEndsEachPollExactlyOnce) {
  constexpr int kRounds = 60;
  std::vector<std::shared_ptr<Ends>> all;
  util::Mutex racers_mu;
  std::shared_ptr<Ends> ends;  // guarded by racers_mu (a local: the analysis cannot annotate it)
  route_ = [&](std::shared_ptr<Exchange> ex) {
    // The deadline is now: the timers' thread gives up while the result's thread finishes and
    // shutdown ends every waiting poll.
    util::MutexLock lock(racers_mu);  // `ends` is the main thread's, replaced each round
    auto poll = armed_poll(ex, kv::Clock::now(), ends);
    remember(poll);
    racers_.emplace_back([poll, ex, ends = ends] { finish_with_result(*poll, ex, ends); });
    racers_.emplace_back([this] { api_->end_all_waiting(); });
  };
  int results = 0;
  int gave_up = 0;
  for (int round = 0; round < kRounds; ++round) {
    {
      util::MutexLock lock(racers_mu);
      ends = std::make_shared<Ends>();
      all.push_back(ends);
    }
    int fd = request_poll();
    const unsigned status = response_status(fd, 5s);
    ::close(fd);
    ASSERT_TRUE(status == 200 || status == 204) << "round " << round << ": " << status;
    (status == 200 ? results : gave_up) += 1;
    ASSERT_TRUE(eventually([&] { return all.back()->answers > 0; }));
  }
  {
    util::MutexLock lock(racers_mu);
    for (auto& t : racers_) t.join();
    racers_.clear();
  }
  std::this_thread::sleep_for(100ms);
  for (int round = 0; round < kRounds; ++round) {
    EXPECT_EQ(all[round]->answers, 1) << "round " << round << " ended more than once";
    EXPECT_LE(all[round]->give_ups, 1) << "round " << round << " gave up more than once";
  }
  EXPECT_EQ(waiting(), 0u);
  // Not a check of the race's outcome (either may win), only a record of it.
  std::printf("results first: %d, deadline or shutdown first: %d\n", results, gave_up);
}

}  // namespace
}  // namespace kvq::server
