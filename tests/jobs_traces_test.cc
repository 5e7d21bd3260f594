// A job's trace context (AddOptions::traceparent) and the attempt a run is (Job::attempt), on
// every backend and through the fault injector (issue 44).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/jobs_fixture.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::Job;
using jobs::JobInfo;

constexpr const char* kTraceA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr const char* kTraceB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";

class JobsTracesTest : public JobsFixture {
 protected:
  Job accept_soon(AcceptOptions o = {}) {
    o.timeout = 10s;
    auto job = jobs().accept("work", o);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
  JobInfo info(const std::string& id) {
    auto got = jobs().get("work", id);
    EXPECT_TRUE(got.ok()) << got.status().to_string();
    return got.ok() ? *got : JobInfo{};
  }
};

TEST_P(JobsTracesTest, ATraceparentIsKeptAndShownWhereverTheJobIs) {
  ASSERT_TRUE(jobs().add("work", "traced", "{}", {.traceparent = kTraceA}).ok());
  ASSERT_TRUE(jobs().add("work", "plain", "{}", {.priority = 1}).ok());
  EXPECT_EQ(info("traced").traceparent, kTraceA);
  EXPECT_EQ(info("plain").traceparent, "");
  auto page = jobs().list("work");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 2u);
  for (const auto& j : page->jobs) EXPECT_EQ(j.traceparent, j.id == "traced" ? kTraceA : "");
  auto sub = jobs().subscribe("work", "traced");
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  Job job = accept_soon();
  EXPECT_EQ(job.id, "traced");
  EXPECT_EQ(job.traceparent, kTraceA);
  auto running = (*sub)->wait(jobs::State::kRunning, kv::Clock::now() + 10s);
  ASSERT_TRUE(running.ok()) << running.status().to_string();
  EXPECT_EQ(running->traceparent, kTraceA);
  ASSERT_TRUE(jobs().finish(job).ok());
  EXPECT_EQ(info("traced").traceparent, kTraceA) << "a finished job keeps it";
  EXPECT_EQ(accept_soon().traceparent, "");
}

TEST_P(JobsTracesTest, TheAddThatLastSetTheJobsDataSetsItsTraceparent) {
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":1})", {.traceparent = kTraceA}).ok());
  // The same job again under another trace changes nothing, so it writes nothing.
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":1})", {.traceparent = kTraceB}).ok());
  EXPECT_EQ(info("j").traceparent, kTraceA);
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":2})", {.traceparent = kTraceB}).ok());
  EXPECT_EQ(info("j").traceparent, kTraceB);
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":3})").ok());
  EXPECT_EQ(info("j").traceparent, "") << "replaced by an add without one";
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":4})", {.traceparent = kTraceA}).ok());
  Job job = accept_soon();
  // A running job keeps the trace of the run going on; the resubmit runs the same data.
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":5})", {.traceparent = kTraceB}).ok());
  EXPECT_TRUE(info("j").resubmitted);
  EXPECT_EQ(info("j").traceparent, kTraceA);
  ASSERT_TRUE(jobs().finish(job).ok());
  job = accept_soon();
  EXPECT_EQ(job.traceparent, kTraceA);
  ASSERT_TRUE(jobs().finish(job).ok());
  // Added anew once finished: the new add's.
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":6})", {.traceparent = kTraceB}).ok());
  EXPECT_EQ(info("j").traceparent, kTraceB);
}

TEST_P(JobsTracesTest, AnInvalidTraceparentIsRefusedAndChangesNothing) {
  const std::string bad[] = {"garbage", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                             "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                             "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                             "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"};
  for (const auto& t : bad) {
    auto added = jobs().add("work", "j", "{}", {.traceparent = t});
    EXPECT_EQ(added.status().code(), Code::kInvalidArgument) << t;
    EXPECT_NE(added.status().message().find("traceparent"), std::string::npos);
  }
  EXPECT_EQ(jobs().get("work", "j").status().code(), Code::kNotFound);
  auto many = jobs().add_many("work", {{.id = "a", .options = {.traceparent = kTraceA}},
                                       {.id = "b", .options = {.traceparent = "00-bad"}}});
  EXPECT_EQ(many.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().get("work", "a").status().code(), Code::kNotFound);
  auto ok = jobs().add_many("work", {{.id = "a", .options = {.traceparent = kTraceA}},
                                     {.id = "b", .options = {.traceparent = kTraceB}}});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(info("b").traceparent, kTraceB);
}

// Job::attempt is the count JobInfo::attempts keeps, as the accept leaves it.
TEST_P(JobsTracesTest, EachRunIsToldWhichAttemptItIs) {
  jobs::RetryPolicy quick;
  quick.backoff_base = 1ms;
  quick.backoff_cap = 1ms;
  ASSERT_TRUE(jobs().set_retry_policy("work", quick).ok());
  ASSERT_TRUE(jobs().add("work", "j", "{}").ok());
  Job job = accept_soon();
  EXPECT_EQ(job.attempt, 1u);
  ASSERT_TRUE(jobs().fail(job, {.message = "boom"}).ok());
  job = accept_soon();
  EXPECT_EQ(job.attempt, 2u) << "a failed run counts";
  ASSERT_TRUE(jobs().snooze(job).ok());
  job = accept_soon();
  EXPECT_EQ(job.attempt, 2u) << "a snoozed run does not";
  EXPECT_EQ(info("j").attempts, 2u);
  // A resubmit's run starts the count over.
  ASSERT_TRUE(jobs().add("work", "j", "{}").ok());
  ASSERT_TRUE(jobs().finish(job).ok());
  job = accept_soon();
  EXPECT_EQ(job.attempt, 1u);
  ASSERT_TRUE(jobs().fail(job, {.message = "no", .retry = false}).ok());
  ASSERT_TRUE(jobs().rerun("work", "j").ok());
  job = accept_soon();
  EXPECT_EQ(job.attempt, 1u) << "a rerun starts over";
  ASSERT_TRUE(jobs().finish(job).ok());
  ASSERT_TRUE(jobs().add("work", "j", "{}").ok());
  EXPECT_EQ(accept_soon().attempt, 1u) << "added anew once finished";
}

TEST_P(JobsTracesTest, ALostRunCountsAsAnAttempt) {
  ASSERT_TRUE(jobs().add("work", "j", "{}", {.timeout = 200ms}).ok());
  Job first = accept_soon();
  EXPECT_EQ(first.attempt, 1u);
  // The monitor loses the silent run, and the job is due again at once.
  Job second = accept_soon();
  EXPECT_EQ(second.id, "j");
  EXPECT_EQ(second.attempt, 2u);
  EXPECT_EQ(info("j").lost_runs, 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsTracesTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
