// Flow control (kvq/jobs.h "Flow control"): pause, max_running and rate, on every backend, with
// several Jobs on one store standing for several processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kvq/jobs.h"
#include "kvq/tuple.h"
#include "support/delivered.h"
#include "support/jobs_fixture.h"
#include "util/mutex.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::Job;
using jobs::Jobs;
using jobs::RateLimit;
using jobs::State;

constexpr int kAcceptors = 64;

class FlowTest : public JobsFixture {
 protected:
  // A second Jobs on the same store (and the same faults), as another process would open.
  std::unique_ptr<Jobs> open_another() {
    std::shared_ptr<kv::Store> store = raw_;
    if (faulty_) store = faulty_;
    auto j = Jobs::open(store, {.key_prefix = "t", .monitor_checks_per_timeout = 4});
    EXPECT_TRUE(j.ok()) << j.status().to_string();
    return j.ok() ? std::move(*j) : nullptr;
  }
  // Adds j0..j<n-1> through a Jobs on the store without injected faults: the setting up is not
  // what is tested.
  void add_jobs(const std::string& type, int n) {
    auto producer = Jobs::open(raw_, {.key_prefix = "t", .run_activity_monitor = false});
    ASSERT_TRUE(producer.ok()) << producer.status().to_string();
    std::vector<jobs::NewJob> batch;
    for (int i = 0; i < n; ++i) batch.push_back({"j" + std::to_string(i)});
    auto added = (*producer)->add_many(type, batch);
    ASSERT_TRUE(added.ok()) << added.status().to_string();
  }
  // jobs_ and two more on the same store: three "servers".
  std::vector<Jobs*> three_servers() {
    others_.push_back(open_another());
    others_.push_back(open_another());
    return {jobs_.get(), others_[0].get(), others_[1].get()};
  }
  // kAcceptors threads spread over `servers`, each looping accept -> `with_job` -> finish until
  // `total` jobs of `type` finished.
  void run_acceptors(const std::vector<Jobs*>& servers, const std::string& type, int total,
                     const std::function<void(const Job&)>& with_job) {
    std::atomic<int> finished{0};
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    // Fails instead of hanging should jobs never come.
    const auto give_up = kv::Clock::now() + 120s;
    for (int t = 0; t < kAcceptors; ++t) {
      threads.emplace_back([&, server = servers[t % servers.size()]] {
        while (finished.load() < total && kv::Clock::now() < give_up) {
          auto job = server->accept(type, {.timeout = 1s});
          if (!job.ok()) {
            if (job.status().code() != Code::kDeadlineExceeded) ++errors;
            continue;
          }
          with_job(*job);
          if (Status s = server->finish(*job); !s.ok()) {
            ADD_FAILURE() << s.to_string();
            ++errors;
          }
          ++finished;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(finished.load(), total);
  }

  // Whether the type's rate window (subspace 14 under the prefix "t", src/jobs/schema.h) exists.
  bool has_rate_window(const std::string& type) {
    auto value = kv::run(raw(), [&](kv::Transaction& txn) {
      return txn.get(Subspace(std::string("t")).pack(Tuple{int64_t{14}, type}));
    });
    EXPECT_TRUE(value.ok()) << value.status().to_string();
    return value.ok() && value->has_value();
  }

  std::vector<std::unique_ptr<Jobs>> others_;
};

TEST_P(FlowTest, SettingsAreStoredValidatedAndReadBack) {
  auto settings = jobs().get_type("work");
  ASSERT_TRUE(settings.ok());
  EXPECT_FALSE(settings->paused);
  EXPECT_FALSE(settings->max_running);
  EXPECT_FALSE(settings->rate);

  ASSERT_TRUE(jobs().set_max_running("work", 3).ok());
  ASSERT_TRUE(jobs().set_rate_limit("work", RateLimit{7, 2s}).ok());
  const int64_t until = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().pause_type("work", until).ok());
  ASSERT_TRUE(jobs().set_finished_retention("work", 1h).ok());  // keeps the others
  settings = open_another()->get_type("work");
  ASSERT_TRUE(settings.ok());
  EXPECT_TRUE(settings->paused);
  EXPECT_EQ(settings->paused_until_ms, until);
  EXPECT_EQ(settings->max_running, 3u);
  EXPECT_EQ(settings->rate, (RateLimit{7, 2s}));
  EXPECT_EQ(settings->finished_retention, 1h);
  EXPECT_EQ(settings->timeout, 60s);

  ASSERT_TRUE(jobs().resume_type("work").ok());
  ASSERT_TRUE(jobs().resume_type("work").ok());  // not paused: nothing
  ASSERT_TRUE(jobs().set_max_running("work", std::nullopt).ok());
  ASSERT_TRUE(jobs().set_rate_limit("work", std::nullopt).ok());
  settings = jobs().get_type("work");
  ASSERT_TRUE(settings.ok());
  EXPECT_FALSE(settings->paused);
  EXPECT_FALSE(settings->paused_until_ms);
  EXPECT_FALSE(settings->max_running);
  EXPECT_FALSE(settings->rate);

  EXPECT_EQ(jobs().set_max_running("work", 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_max_running("work", jobs::kMaxRunningLimit + 1).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_rate_limit("work", RateLimit{0, 1s}).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_rate_limit("work", RateLimit{jobs::kMaxRateLimit + 1, 1s}).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_rate_limit("work", RateLimit{5, 0ms}).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_rate_limit("work", RateLimit{5, jobs::kMaxRatePeriod + 1ms}).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(jobs::validate_rate_limit(RateLimit{jobs::kMaxRateLimit, jobs::kMaxRatePeriod}).ok());
  EXPECT_EQ(jobs().pause_type("nope").code(), Code::kNotFound);
  EXPECT_EQ(jobs().resume_type("nope").code(), Code::kNotFound);
  EXPECT_EQ(jobs().set_max_running("nope", 1).code(), Code::kNotFound);
  EXPECT_EQ(jobs().set_rate_limit("nope", RateLimit{1, 1s}).code(), Code::kNotFound);
}

TEST_P(FlowTest, ChangeTypeSettingsAppliesEveryGivenFieldInOneTransaction) {
  // A partial retry policy merges into the type's current one; fields left out keep theirs.
  jobs::RetryPolicy policy;
  policy.max_attempts = 5;
  policy.backoff_cap = 10min;
  ASSERT_TRUE(jobs().set_retry_policy("work", policy).ok());
  ASSERT_TRUE(jobs().set_max_running("work", 3).ok());
  auto changed =
      jobs().change_type_settings("work", {.timeout = 30s,
                                           .rate = std::optional<RateLimit>(RateLimit{7, 2s}),
                                           .retry = {.max_attempts = 9, .jitter = 0.5}});
  ASSERT_TRUE(changed.ok()) << changed.status().to_string();
  EXPECT_EQ(changed->timeout, 30s);
  EXPECT_EQ(changed->rate, (RateLimit{7, 2s}));
  EXPECT_EQ(changed->max_running, 3u);
  EXPECT_EQ(changed->retry.max_attempts, 9u);
  EXPECT_EQ(changed->retry.jitter, 0.5);
  EXPECT_EQ(changed->retry.backoff_cap, 10min);
  auto stored = open_another()->get_type("work");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->retry.max_attempts, 9u);
  EXPECT_EQ(stored->rate, (RateLimit{7, 2s}));

  // An inner nullopt clears; pause and resume answer with the type as they left it.
  changed = jobs().change_type_settings("work", {.max_running = std::optional<uint32_t>()});
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->max_running, std::nullopt);
  const int64_t until = wall_ms() + 3'600'000;
  changed = jobs().change_type_settings("work", {.paused = true, .paused_until_ms = until});
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(changed->paused);
  EXPECT_EQ(changed->paused_until_ms, until);
  changed = jobs().change_type_settings("work", {.paused = false});
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(changed->paused);

  // One field out of range changes nothing, the fields before it included.
  changed =
      jobs().change_type_settings("work", {.timeout = 45s, .retry = {.backoff_factor = 1000.0}});
  EXPECT_EQ(changed.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().get_type("work")->timeout, 30s);
  EXPECT_EQ(jobs().change_type_settings("work", {.paused_until_ms = until}).status().code(),
            Code::kInvalidArgument);
  // Without a timeout a type that does not exist is not created.
  EXPECT_EQ(jobs().change_type_settings("nope", {.max_running = 2u}).status().code(),
            Code::kNotFound);
  EXPECT_EQ(jobs().change_type_settings("nope", {}).status().code(), Code::kNotFound);
}

TEST_P(FlowTest, APausedTypeHandsOutNothingUntilResumedAndItsRunningJobsGoOn) {
  ASSERT_TRUE(jobs().add("work", "running", "{}").ok());
  auto running = jobs().accept("work");
  ASSERT_TRUE(running.ok());
  ASSERT_TRUE(jobs().pause_type("work").ok());
  auto other = open_another();

  // Adds are taken; accepts, waiting or not, in any process, get nothing.
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(other->accept("work").status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(other->accept_many("work", 5).status().code(), Code::kDeadlineExceeded);
  auto in_txn = kv::run(raw(), [&](kv::Transaction& txn) { return jobs().accept(txn, "work"); });
  EXPECT_EQ(in_txn.status().code(), Code::kNotFound);
  auto waiting = std::make_shared<Delivered<Result<Job>>>();
  other->accept_async("work", {.timeout = 60s}, deliver_to(waiting));
  // A waiting accept stays waiting: one with a short timeout expires with nothing, and another
  // add (which wakes waiters) changes nothing.
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());
  EXPECT_EQ(other->accept("work", {.timeout = 300ms}).status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(jobs().accept("work", {.timeout = 300ms}).status().code(), Code::kDeadlineExceeded);
  EXPECT_TRUE(waiting->values().empty());

  // The job that was running when it was paused ends as usual.
  ASSERT_TRUE(jobs().finish(*running).ok());
  EXPECT_EQ(jobs().get("work", "running")->state, State::kFinished);
  EXPECT_EQ(*jobs().pending_count("work"), 2u);

  // Resume wakes the waiting accept (long before its timeout).
  ASSERT_TRUE(jobs().resume_type("work").ok());
  ASSERT_TRUE(waiting->wait_for(1, 30s));
  ASSERT_TRUE(waiting->values()[0].ok()) << waiting->values()[0].status().to_string();
  EXPECT_NE(waiting->values()[0]->id, "running");
  EXPECT_TRUE(jobs().accept("work").ok());
}

TEST_P(FlowTest, APauseWithAnEndEndsByItself) {
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  const int64_t until = wall_ms() + 800;
  ASSERT_TRUE(jobs().pause_type("work", until).ok());
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  // No one resumes it: the waiting accept wakes at the pause's end.
  auto job = open_another()->accept("work", {.timeout = 30s});
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  auto info = jobs().get("work", "a");
  ASSERT_TRUE(info.ok());
  EXPECT_GE(info->started_at_ms, until);
  auto settings = jobs().get_type("work");
  ASSERT_TRUE(settings.ok());
  EXPECT_FALSE(settings->paused);
}

TEST_P(FlowTest, MaxRunningHoldsAcrossServersUnder64Acceptors) {
  constexpr uint32_t kMax = 5;
  const int total = GetParam().backend.name == "etcd" ? 120 : 300;
  ASSERT_TRUE(jobs().set_max_running("work", kMax).ok());
  ASSERT_NO_FATAL_FAILURE(add_jobs("work", total));
  // Whether every slot was seen taken at once: until then each job is held until it is (or a
  // while passes), so that reaching the limit does not depend on how fast the store is; from
  // then on jobs are held briefly and churn through the slots.
  util::Mutex mu;
  util::CondVar cv;
  int running = 0;  // guarded by mu
  int most = 0;     // guarded by mu
  bool reached = false;
  run_acceptors(three_servers(), "work", total, [&](const Job&) {
    {
      util::MutexLock lock(mu);
      most = std::max(most, ++running);
      if (running == static_cast<int>(kMax)) reached = true;
      cv.notify_all();
      const auto until = kv::Clock::now() + 10s;
      while (!reached && kv::Clock::now() < until) cv.wait_until(mu, until);
    }
    std::this_thread::sleep_for(2ms);  // holding the slot: the work
    util::MutexLock lock(mu);
    --running;  // before finish: never counts a slot already freed
  });
  util::MutexLock lock(mu);
  EXPECT_LE(most, static_cast<int>(kMax));
  EXPECT_EQ(most, static_cast<int>(kMax)) << "the limit was never reached";
  EXPECT_EQ(jobs().count("work")->finished, static_cast<uint64_t>(total));
}

TEST_P(FlowTest, AFreedSlotWakesAWaitingAccept) {
  ASSERT_TRUE(jobs().set_max_running("work", 1).ok());
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());
  auto a = jobs().accept("work");
  ASSERT_TRUE(a.ok());
  auto other = open_another();
  EXPECT_EQ(other->accept("work").status().code(), Code::kDeadlineExceeded);
  auto waiting = std::make_shared<Delivered<Result<Job>>>();
  other->accept_async("work", {.timeout = 60s}, deliver_to(waiting));
  // Full: updates of the running job and new adds do not let it through.
  ASSERT_TRUE(jobs().update(*a).ok());
  ASSERT_TRUE(jobs().add("work", "c", "{}").ok());
  EXPECT_EQ(other->accept("work", {.timeout = 300ms}).status().code(), Code::kDeadlineExceeded);
  EXPECT_TRUE(waiting->values().empty());
  ASSERT_TRUE(jobs().finish(*a).ok());
  ASSERT_TRUE(waiting->wait_for(1, 30s));
  ASSERT_TRUE(waiting->values()[0].ok()) << waiting->values()[0].status().to_string();
  // What is left of a, b and c once one is taken ("a" unless a retry spread the pick).
  std::set<std::string> left{"a", "b", "c"};
  left.erase(a->id);
  EXPECT_EQ(left.erase(waiting->values()[0]->id), 1u) << waiting->values()[0]->id;
  // Raising the limit lets more through at once, and wakes waiters as well.
  auto more = std::make_shared<Delivered<Result<Job>>>();
  other->accept_async("work", {.timeout = 60s}, deliver_to(more));
  ASSERT_TRUE(jobs().set_max_running("work", 2).ok());
  ASSERT_TRUE(more->wait_for(1, 30s));
  ASSERT_TRUE(more->values()[0].ok()) << more->values()[0].status().to_string();
  EXPECT_EQ(left, std::set<std::string>{more->values()[0]->id});
  EXPECT_EQ(jobs().count("work")->running, 2u);
}

TEST_P(FlowTest, ALostRunFreesItsSlot) {
  ASSERT_TRUE(jobs().set_type_timeout("short", 1s).ok());
  ASSERT_TRUE(jobs().set_max_running("short", 1).ok());
  ASSERT_TRUE(jobs().add("short", "a", "{}").ok());
  ASSERT_TRUE(jobs().add("short", "b", "{}").ok());
  // Taken by a worker that then goes silent (crashed): its run is lost at the timeout.
  auto a = open_another()->accept("short");
  ASSERT_TRUE(a.ok());
  auto next = jobs().accept("short", {.timeout = 30s});
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  auto lost = jobs().get("short", a->id);  // "a", or "b" when a retry spread its pick
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(lost->lost_runs, 1u);
  EXPECT_EQ(jobs().count("short")->running, 1u);
}

TEST_P(FlowTest, TheRateHoldsInEveryWindowAcrossServersUnder64Acceptors) {
  constexpr uint32_t kLimit = 20;
  constexpr auto kPeriod = 500ms;
  constexpr int kTotal = 100;
  ASSERT_TRUE(jobs().set_rate_limit("work", RateLimit{kLimit, kPeriod}).ok());
  ASSERT_NO_FATAL_FAILURE(add_jobs("work", kTotal));
  const int64_t began = wall_ms();
  run_acceptors(three_servers(), "work", kTotal, [](const Job&) {});
  const int64_t took = wall_ms() - began;
  // Each accept's time as the accepting transaction stamped it (and its window recorded it).
  std::vector<int64_t> started;
  for (int i = 0; i < kTotal; ++i) {
    auto info = jobs().get("work", "j" + std::to_string(i));
    ASSERT_TRUE(info.ok());
    ASSERT_EQ(info->attempts, 1u);
    started.push_back(info->started_at_ms);
  }
  std::sort(started.begin(), started.end());
  size_t fullest = 0;
  for (size_t i = 0; i < started.size(); ++i) {
    const auto in_window =
        std::lower_bound(started.begin(), started.end(), started[i] + kPeriod.count()) -
        (started.begin() + i);
    fullest = std::max(fullest, static_cast<size_t>(in_window));
  }
  EXPECT_LE(fullest, kLimit);
  // Not starved either (and every job was accepted, run_acceptors checks): on LMDB, where an
  // accept takes well under a millisecond, the acceptors that always want more fill a window.
  // On etcd the accepts of three servers, all conflicting on the window, are slower than the
  // rate here, so how full a window gets says more about the machine than about the limit.
  if (GetParam().backend.name != "etcd") {
    EXPECT_EQ(fullest, kLimit);
  }
  const double per_second = 1000.0 * kTotal / std::max<int64_t>(took, 1);
  RecordProperty("accepts_per_second", std::to_string(per_second));
  std::printf("rate %u per %lld ms: %d accepts in %lld ms (%.1f/s)\n", kLimit,
              static_cast<long long>(kPeriod.count()), kTotal, static_cast<long long>(took),
              per_second);
}

TEST_P(FlowTest, ARateLimitedAcceptTakesOnlyWhatTheWindowHasRoomFor) {
  ASSERT_TRUE(jobs().set_rate_limit("work", RateLimit{3, 1h}).ok());
  ASSERT_NO_FATAL_FAILURE(add_jobs("work", 5));
  auto first = jobs().accept_many("work", 2);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 2u);
  auto second = open_another()->accept_many("work", 5);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->size(), 1u);
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  EXPECT_TRUE(has_rate_window("work"));
  // Removing the limit lets everything through, and its window goes.
  ASSERT_TRUE(jobs().set_rate_limit("work", std::nullopt).ok());
  EXPECT_FALSE(has_rate_window("work"));
  auto rest = jobs().accept_many("work", 5);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->size(), 2u);
  EXPECT_FALSE(has_rate_window("work"));
}

// A type without a rate limit never has a window: its accepts write nothing for flow control.
TEST_P(FlowTest, AnUnlimitedTypeKeepsNoRateWindow) {
  ASSERT_NO_FATAL_FAILURE(add_jobs("work", 3));
  auto jobs_taken = jobs().accept_many("work", 3);
  ASSERT_TRUE(jobs_taken.ok());
  EXPECT_EQ(jobs_taken->size(), 3u);
  EXPECT_FALSE(has_rate_window("work"));
}

INSTANTIATE_TEST_SUITE_P(Backends, FlowTest, ::testing::ValuesIn(jobs_params()), jobs_param_name);

}  // namespace
}  // namespace kvq::testing
