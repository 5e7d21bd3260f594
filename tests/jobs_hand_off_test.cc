// An add's hand-off to a waiting accept (src/jobs/accept/hand_off.h), on every backend: where it
// happens (a nonblocking store: LMDB) the waiter gets the job as its run, and every rule that
// could refuse the job refuses it as an accept's own look would; where it does not (etcd), the
// same answers come from the accept waiters' round. TypeStats::handed_off tells which.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "support/jobs_fixture.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::Job;
using jobs::State;

class HandOffTest : public JobsFixture {
 protected:
  // Whether adds hand off here: only on a nonblocking store (not through the fault injector,
  // which does not say it is one).
  bool hands_off() { return store().nonblocking(); }
  uint64_t handed_off(const std::string& type = "work") {
    auto stats = jobs().type_stats();
    auto it = stats.find(type);
    return it == stats.end() ? 0 : it->second.handed_off;
  }
  // An accept of `type` that waits (up to 20 s) on its own thread; started once it has had
  // time to look and queue.
  std::future<Result<Job>> waiting_accept(const std::string& type = "work") {
    auto accept = std::async(std::launch::async, [this, type] {
      return jobs().accept(type, {.timeout = 20s, .worker = "w1"});
    });
    std::this_thread::sleep_for(150ms);
    return accept;
  }
  static bool answered_within(std::future<Result<Job>>& f, std::chrono::milliseconds d) {
    return f.wait_for(d) == std::future_status::ready;
  }
};

TEST_P(HandOffTest, AWaitingAcceptGetsTheAddedJobAsItsRun) {
  auto accept = waiting_accept();
  ASSERT_TRUE(jobs().add("work", "h1", R"({"n":1})").ok());
  ASSERT_TRUE(answered_within(accept, 5s));
  auto job = accept.get();
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "h1");
  EXPECT_EQ(job->data, R"({"n":1})");
  EXPECT_EQ(job->attempt, 1u);
  EXPECT_FALSE(job->lock.empty());
  auto info = jobs().get("work", "h1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::kRunning);
  EXPECT_EQ(info->worker, "w1");
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, 0u);
  EXPECT_EQ(counts->running, 1u);
  EXPECT_EQ(handed_off(), hands_off() ? 1u : 0u);
  EXPECT_EQ(jobs().type_stats()["work"].queue_latency.count, 1u) << "the accept went uncounted";
  // The run is a run like any other: its lock is the one to report and finish with, and the
  // run's end fences it.
  ASSERT_TRUE(jobs().update(*job, jobs::UpdateOptions{.progress = "1"}).ok());
  ASSERT_TRUE(jobs().finish(*job).ok());
  EXPECT_EQ(jobs().get("work", "h1")->state, State::kFinished);
  EXPECT_EQ(jobs().update(*job, jobs::UpdateOptions{}).status().code(),
            Code::kFailedPrecondition);
}

TEST_P(HandOffTest, AJobQueuedAheadKeepsItsPlaceAndTheWaiterIsStillServed) {
  // Not due yet, but in the queue: the hand-off does not look past it, and the round that
  // serves the waiter takes the new job as a look would.
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  auto accept = waiting_accept();
  ASSERT_TRUE(jobs().add("work", "now", "{}").ok());
  ASSERT_TRUE(answered_within(accept, 5s));
  auto job = accept.get();
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "now");
  EXPECT_EQ(handed_off(), 0u);
  EXPECT_EQ(jobs().get("work", "later")->state, State::kPending);
}

TEST_P(HandOffTest, AJobScheduledLaterIsNotHandedOffBeforeItIsDue) {
  auto accept = waiting_accept();
  ASSERT_TRUE(jobs().add("work", "soon", "{}", {.scheduled_time_ms = wall_ms() + 700}).ok());
  EXPECT_FALSE(answered_within(accept, 400ms)) << "taken before it was due";
  ASSERT_TRUE(answered_within(accept, 5s));
  auto job = accept.get();
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "soon");
  EXPECT_EQ(handed_off(), 0u);
}

TEST_P(HandOffTest, APausedTypesAddIsNotHandedOff) {
  auto accept = waiting_accept();
  ASSERT_TRUE(jobs().pause_type("work").ok());
  ASSERT_TRUE(jobs().add("work", "p1", "{}").ok());
  EXPECT_FALSE(answered_within(accept, 400ms)) << "a paused type's job was handed out";
  EXPECT_EQ(jobs().get("work", "p1")->state, State::kPending);
  ASSERT_TRUE(jobs().resume_type("work").ok());
  ASSERT_TRUE(answered_within(accept, 5s));
  EXPECT_EQ(accept.get()->id, "p1");
  EXPECT_EQ(handed_off(), 0u);
}

TEST_P(HandOffTest, ATypeAtItsMaxRunningHandsNothingOff) {
  ASSERT_TRUE(jobs().set_max_running("work", 1).ok());
  ASSERT_TRUE(jobs().add("work", "first", "{}").ok());
  auto first = jobs().accept("work", {});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto accept = waiting_accept();
  ASSERT_TRUE(jobs().add("work", "second", "{}").ok());
  EXPECT_FALSE(answered_within(accept, 400ms)) << "max_running 1 ran two jobs";
  ASSERT_TRUE(jobs().finish(*first).ok());
  ASSERT_TRUE(answered_within(accept, 5s));
  EXPECT_EQ(accept.get()->id, "second");
  EXPECT_EQ(handed_off(), 0u);
}

TEST_P(HandOffTest, ARateLimitedTypeHandsNothingOff) {
  ASSERT_TRUE(jobs().set_rate_limit("work", jobs::RateLimit{1, 1h}).ok());
  ASSERT_TRUE(jobs().add("work", "first", "{}").ok());
  ASSERT_TRUE(jobs().accept("work", {}).ok());
  auto accept = waiting_accept();
  ASSERT_TRUE(jobs().add("work", "second", "{}").ok());
  EXPECT_FALSE(answered_within(accept, 400ms)) << "a second accept within the hour's limit of 1";
  EXPECT_EQ(jobs().get("work", "second")->state, State::kPending);
  ASSERT_TRUE(jobs().set_rate_limit("work", std::nullopt).ok());
  ASSERT_TRUE(answered_within(accept, 5s));
  EXPECT_EQ(accept.get()->id, "second");
  EXPECT_EQ(handed_off(), 0u);
}

TEST_P(HandOffTest, AGroupAtItsLimitKeepsItsJobAndAGroupedJobIsNeverHandedOff) {
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 1).ok());
  ASSERT_TRUE(jobs().add("work", "g1", "{}", {.group = "g"}).ok());
  auto first = jobs().accept("work", {});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto accept = waiting_accept();
  ASSERT_TRUE(jobs().add("work", "g2", "{}", {.group = "g"}).ok());
  EXPECT_FALSE(answered_within(accept, 400ms)) << "group g ran two jobs at its limit of 1";
  // A job without a group, on a type that had grouped jobs: the round serves it, not the add.
  ASSERT_TRUE(jobs().add("work", "free", "{}").ok());
  ASSERT_TRUE(answered_within(accept, 5s));
  EXPECT_EQ(accept.get()->id, "free");
  EXPECT_EQ(jobs().get("work", "g2")->state, State::kPending);
  EXPECT_EQ(handed_off(), 0u);
}

TEST_P(HandOffTest, AnAsynchronousAddHandsOffAsABlockingOneDoes) {
  auto accept = waiting_accept();
  std::promise<Result<jobs::AddResult>> added;
  jobs().add_async("work", "async", "{}", {},
                   [&](Result<jobs::AddResult> r) { added.set_value(std::move(r)); });
  auto result = added.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_TRUE(answered_within(accept, 5s));
  auto job = accept.get();
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "async");
  EXPECT_EQ(handed_off(), hands_off() ? 1u : 0u);
  ASSERT_TRUE(jobs().finish(*job).ok());
}

TEST_P(HandOffTest, ACancelledWaitingAcceptLosesNoJob) {
  // Whether the cancel comes before the add claims the waiter, during its transaction or after:
  // the job ends up pending (or with the accept that was not cancelled), never running unseen.
  for (int i = 0; i < 20; ++i) {
    const std::string id = "c" + std::to_string(i);
    std::promise<Result<Job>> got;
    const uint64_t ticket = jobs().accept_async(
        "work", {.timeout = 20s}, [&](Result<Job> job) { got.set_value(std::move(job)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + i % 5));
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(50 * (i % 7)));
      jobs().cancel_accept(ticket);
    });
    ASSERT_TRUE(jobs().add("work", id, "{}").ok());
    canceller.join();
    auto job = got.get_future().get();
    auto info = jobs().get("work", id);
    ASSERT_TRUE(info.ok());
    if (job.ok()) {
      EXPECT_EQ(job->id, id);
      EXPECT_EQ(info->state, State::kRunning);
      ASSERT_TRUE(jobs().finish(*job).ok());
    } else {
      EXPECT_EQ(job.status().code(), Code::kCancelled) << job.status().to_string();
      // A job taken for the cancelled accept is given back, at the latest just after its end.
      for (auto give_up = kv::Clock::now() + 5s;
           info->state != State::kPending && kv::Clock::now() < give_up;
           std::this_thread::sleep_for(5ms))
        info = jobs().get("work", id);
      EXPECT_EQ(info->state, State::kPending) << id << " runs for a cancelled accept";
      auto taken = jobs().accept("work", {.timeout = 5s});
      ASSERT_TRUE(taken.ok()) << taken.status().to_string();
      ASSERT_TRUE(jobs().finish(*taken).ok());
    }
  }
}

TEST_P(HandOffTest, AnAddWhoseCommitResultWasUnknownHandsItsJobToTheClaimedWaiterOnce) {
  // A Jobs of its own on the raw store behind a fault injector that says it is nonblocking as
  // the store is (so adds hand off on LMDB) and hides every other commit's result, applied or not.
  auto faulty = std::make_shared<kv::FaultInjectingStore>(
      raw_ptr(), kv::FaultOptions{.seed = 42, .nonblocking = true});
  auto opened = jobs::Jobs::open(faulty, {.key_prefix = "u", .run_scheduler = false});
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  jobs::Jobs& j = **opened;
  ASSERT_TRUE(j.set_type_timeout("work", 60s).ok());
  uint64_t handed = 0;
  for (int i = 0; i < 30; ++i) {
    const std::string id = "u" + std::to_string(i);
    auto accept = std::async(std::launch::async, [&] { return j.accept("work", {.timeout = 20s}); });
    std::this_thread::sleep_for(50ms);
    faulty->set_options({.unknown_result_rate = 0.5, .seed = static_cast<uint64_t>(i)});
    auto added = j.add("work", id, "{}");
    faulty->set_options({});
    ASSERT_TRUE(added.ok()) << id << ": " << added.status().to_string();
    ASSERT_EQ(accept.wait_for(10s), std::future_status::ready) << id << " never reached the accept";
    auto job = accept.get();
    ASSERT_TRUE(job.ok()) << id << ": " << job.status().to_string();
    EXPECT_EQ(job->id, id);
    auto info = j.get("work", id);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->state, State::kRunning);
    EXPECT_EQ(info->attempts, 1u) << id << " was started twice";
    ASSERT_TRUE(j.finish(*job).ok()) << id << ": the accept's lock is not the run's";
    handed = j.type_stats()["work"].handed_off;
  }
  EXPECT_GT(faulty->counts().unknown_applied, 0u) << "no applied commit was hidden";
  if (faulty->nonblocking()) {
    EXPECT_GT(handed, 0u);
  }
  auto counts = j.count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending + counts->running, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, HandOffTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
