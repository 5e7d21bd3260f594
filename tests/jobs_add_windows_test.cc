// Debounce and unique windows on adds (kvq/add_windows.h): a debounced add replaces a pending
// job's data and pushes its time out, never past the first add + max_delay, adds a new run to a
// running job and adds a finished one anew; a unique window keeps the job as it is in every state
// until it ends; both exact under concurrent adds from two Jobs on one store and through a retry
// after an unknown commit result; on every backend and through the fault injector.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kv/fault_injection.h"
#include "kvq/add_windows.h"
#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/jobs_fixture.h"
#include "support/unknown_commit_once.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AddOptions;
using jobs::AddResult;
using jobs::Debounce;
using jobs::Job;
using jobs::JobInfo;
using jobs::Jobs;
using jobs::Millis;
using jobs::NewJob;
using jobs::State;

AddOptions debounce(Millis delay, Millis max_delay = jobs::kMaxAddWindow) {
  return AddOptions{.debounce = Debounce{.delay = delay, .max_delay = max_delay}};
}

AddOptions unique_for(Millis window) { return AddOptions{.unique_for = window}; }

std::string data(int v) { return "{\"v\":" + std::to_string(v) + "}"; }

// Returns once the wall clock has passed `ms`: what a test of a window waits for is time itself.
void wait_until_past(int64_t ms) {
  while (wall_ms() <= ms) std::this_thread::sleep_for(1ms);
}

class JobsAddWindowsTest : public JobsFixture {
 protected:
  AddResult add(const std::string& id, const std::string& d, const AddOptions& o = {}) {
    auto added = jobs().add("work", id, d, o);
    EXPECT_TRUE(added.ok()) << id << ": " << added.status().to_string();
    return added.ok() ? *added : AddResult{};
  }
  JobInfo info_of(const std::string& id) {
    auto info = jobs().get("work", id);
    EXPECT_TRUE(info.ok()) << id << ": " << info.status().to_string();
    return info.ok() ? *info : JobInfo{};
  }
  Job take(const std::string& id) {
    auto job = jobs().accept_job("work", id);
    EXPECT_TRUE(job.ok()) << id << ": " << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
};

// ---- Debounce ----

TEST_P(JobsAddWindowsTest, ADebouncedAddOfANewIdAddsItDueAfterItsDelay) {
  const int64_t before = wall_ms();
  AddResult r = add("j", data(1), debounce(30s));
  const int64_t after = wall_ms();
  EXPECT_TRUE(r.added);
  EXPECT_FALSE(r.debounced) << "a new job is added, not debounced";
  EXPECT_GE(r.scheduled_time_ms, before + 30'000);
  EXPECT_LE(r.scheduled_time_ms, after + 30'000);
  JobInfo j = info_of("j");
  EXPECT_EQ(j.state, State::kPending);
  EXPECT_EQ(j.scheduled_time_ms, r.scheduled_time_ms);
  EXPECT_EQ(j.debounce_since_ms, r.scheduled_time_ms - 30'000) << "the window's first add";
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded) << "not yet due";
}

TEST_P(JobsAddWindowsTest, ADebouncedAddReplacesAPendingJobsDataAndPushesItsTime) {
  AddResult first = add("j", data(1), debounce(30s, 120s));
  const int64_t since = info_of("j").debounce_since_ms;
  wait_until_past(since + 5);
  AddResult second = add("j", data(2), debounce(30s, 120s));
  EXPECT_TRUE(second.added);
  EXPECT_TRUE(second.debounced);
  EXPECT_GT(second.scheduled_time_ms, first.scheduled_time_ms) << "pushed out";
  JobInfo j = info_of("j");
  EXPECT_EQ(j.data, data(2));
  EXPECT_EQ(j.scheduled_time_ms, second.scheduled_time_ms);
  EXPECT_EQ(j.debounce_since_ms, since) << "the window still counts from the first add";
  // A plain pending job has no window: its first debounced add opens one at its own time.
  add("plain", data(1));
  EXPECT_EQ(info_of("plain").debounce_since_ms, 0);
  AddResult d = add("plain", data(3), debounce(10s));
  EXPECT_TRUE(d.debounced);
  EXPECT_EQ(info_of("plain").debounce_since_ms, d.scheduled_time_ms - 10'000);
}

TEST_P(JobsAddWindowsTest, RepeatedDebouncedAddsNeverPushPastTheFirstAddPlusMaxDelay) {
  constexpr Millis kDelay = 600s, kMax = kDelay + 40ms;
  add("j", data(0), debounce(kDelay, kMax));
  const int64_t since = info_of("j").debounce_since_ms;
  ASSERT_NE(since, 0);
  const int64_t bound = since + kMax.count();
  int64_t last = 0;
  int i = 1;
  // Adds for longer than max_delay - delay, so that now + delay passes the bound.
  for (; wall_ms() <= since + 120; ++i) {
    AddResult r = add("j", data(i), debounce(kDelay, kMax));
    ASSERT_TRUE(r.debounced);
    ASSERT_LE(r.scheduled_time_ms, bound) << "add " << i << " pushed past first add + max_delay";
    ASSERT_GE(r.scheduled_time_ms, last) << "a debounce never pulls the time in here";
    last = r.scheduled_time_ms;
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(last, bound) << "the bound binds once now + delay is past it";
  JobInfo j = info_of("j");
  EXPECT_EQ(j.scheduled_time_ms, bound);
  EXPECT_EQ(j.data, data(i - 1));
  EXPECT_EQ(j.debounce_since_ms, since);
  // max_delay = delay: every later add keeps the first add's time, replacing the data.
  AddResult a = add("k", data(1), debounce(10s, 10s));
  AddResult b = add("k", data(2), debounce(10s, 10s));
  EXPECT_TRUE(b.debounced);
  EXPECT_EQ(b.scheduled_time_ms, a.scheduled_time_ms);
  EXPECT_EQ(info_of("k").data, data(2));
}

TEST_P(JobsAddWindowsTest, ADebouncedAddOnARunningJobAddsANewRunAfterIt) {
  add("j", data(1));
  Job run = take("j");
  const int64_t t0 = wall_ms();
  AddResult r = add("j", data(2), debounce(30s, 60s));
  EXPECT_TRUE(r.added);
  EXPECT_FALSE(r.debounced) << "a running job is resubmitted, as if_exists update does";
  EXPECT_GE(r.scheduled_time_ms, t0 + 30'000);
  JobInfo running = info_of("j");
  EXPECT_EQ(running.state, State::kRunning);
  EXPECT_TRUE(running.resubmitted);
  EXPECT_EQ(running.data, data(1)) << "a running job's data is its worker's";
  const int64_t since = running.debounce_since_ms;
  EXPECT_EQ(since, r.scheduled_time_ms - 30'000) << "the next run's window opened";
  // A second debounced add pushes the next run, within the same window.
  wait_until_past(since + 5);
  AddResult again = add("j", data(3), debounce(30s, 60s));
  EXPECT_GT(again.scheduled_time_ms, r.scheduled_time_ms);
  EXPECT_LE(again.scheduled_time_ms, since + 60'000);
  ASSERT_TRUE(jobs().finish(run).ok());
  JobInfo next = info_of("j");
  EXPECT_EQ(next.state, State::kPending);
  EXPECT_EQ(next.scheduled_time_ms, again.scheduled_time_ms);
  EXPECT_EQ(next.debounce_since_ms, since) << "the next run keeps its window";
  AddResult pending = add("j", data(4), debounce(30s, 60s));
  EXPECT_TRUE(pending.debounced);
  EXPECT_LE(pending.scheduled_time_ms, since + 60'000);
  EXPECT_EQ(info_of("j").data, data(4));
}

TEST_P(JobsAddWindowsTest, ADebouncedAddOnAFinishedJobAddsItAnewInANewWindow) {
  add("j", data(1), debounce(0ms));
  Job run = take("j");
  EXPECT_EQ(info_of("j").debounce_since_ms, 0) << "the window ends when its run is accepted";
  ASSERT_TRUE(jobs().finish(run, {.result = "1"}).ok());
  const int64_t t0 = wall_ms();
  AddResult r = add("j", data(2), debounce(20s));
  EXPECT_FALSE(r.debounced);
  EXPECT_GE(r.scheduled_time_ms, t0 + 20'000);
  JobInfo j = info_of("j");
  EXPECT_EQ(j.state, State::kPending);
  EXPECT_EQ(j.data, data(2));
  EXPECT_EQ(j.attempts, 0u);
  EXPECT_GE(j.debounce_since_ms, t0);
}

TEST_P(JobsAddWindowsTest, ADebouncedJobRunsOnceAfterTheAddsGoQuiet) {
  constexpr Millis kDelay = 300ms;
  int64_t due = 0;
  for (int i = 1; i <= 5; ++i) {
    AddResult r = add("j", data(i), debounce(kDelay, 10s));
    due = r.scheduled_time_ms;
  }
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded) << "run too soon";
  auto job = jobs().accept("work", {.timeout = 5s});
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_GE(wall_ms(), due) << "accepted before it was due";
  EXPECT_EQ(job->id, "j");
  EXPECT_EQ(job->data, data(5)) << "the last add's data runs";
  ASSERT_TRUE(jobs().finish(*job).ok());
  EXPECT_EQ(jobs().accept("work", {.timeout = 200ms}).status().code(), Code::kDeadlineExceeded)
      << "the debounced adds ran more than once";
}

TEST_P(JobsAddWindowsTest, BadDebounceOrUniqueForIsRefusedChangingNothing) {
  const std::vector<AddOptions> bad = {
      debounce(-1ms),
      debounce(10s, 9s),
      debounce(jobs::kMaxAddWindow + 1ms),
      debounce(1s, jobs::kMaxAddWindow + 1ms),
      AddOptions{.scheduled_time_ms = 5, .debounce = Debounce{.delay = 1s}},
      AddOptions{.if_exists = jobs::IfExists::kKeep, .debounce = Debounce{.delay = 1s}},
      unique_for(0ms),
      unique_for(jobs::kMaxAddWindow + 1ms),
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    auto r = jobs().add("work", "j", "{}", bad[i]);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << "case " << i;
  }
  EXPECT_EQ(jobs().get("work", "j").status().code(), Code::kNotFound);
  auto many = jobs().add_many("work", {NewJob{"a"}, NewJob{"b", "{}", debounce(-1ms)}});
  EXPECT_EQ(many.status().code(), Code::kInvalidArgument);
  EXPECT_NE(many.status().message().find("job 1"), std::string::npos);
  EXPECT_NE(many.status().message().find("debounce"), std::string::npos);
}

// ---- Unique windows ----

TEST_P(JobsAddWindowsTest, AnAddWithinTheUniqueWindowKeepsThePendingJobAsItIs) {
  const int64_t t0 = wall_ms();
  AddResult first = add("j", data(1), unique_for(60s));
  EXPECT_TRUE(first.added);
  EXPECT_GE(first.unique_until_ms, t0 + 60'000);
  // Every add in the window is kept: without unique_for, with it, debounced, with a time.
  const std::vector<AddOptions> others = {
      {}, unique_for(1s), debounce(5s), AddOptions{.scheduled_time_ms = t0 + 99'000}};
  for (size_t i = 0; i < others.size(); ++i) {
    AddResult r = add("j", data(2), others[i]);
    EXPECT_FALSE(r.added) << "case " << i;
    EXPECT_EQ(r.unique_until_ms, first.unique_until_ms) << "case " << i;
    EXPECT_FALSE(r.debounced) << "case " << i;
  }
  JobInfo j = info_of("j");
  EXPECT_EQ(j.data, data(1));
  EXPECT_EQ(j.unique_until_ms, first.unique_until_ms);
  EXPECT_LT(j.scheduled_time_ms, t0 + 99'000);
}

TEST_P(JobsAddWindowsTest, TheUniqueWindowKeepsTheJobRunningFinishedOrWaiting) {
  add("run", data(1), unique_for(60s));
  Job run = take("run");
  EXPECT_FALSE(add("run", data(2)).added);
  JobInfo running = info_of("run");
  EXPECT_EQ(running.state, State::kRunning);
  EXPECT_FALSE(running.resubmitted) << "kept, not resubmitted";
  ASSERT_TRUE(jobs().finish(run, {.result = "7"}).ok());
  EXPECT_FALSE(add("run", data(3)).added);
  JobInfo finished = info_of("run");
  EXPECT_EQ(finished.state, State::kFinished) << "kept, not added anew";
  EXPECT_EQ(finished.result, "7");
  add("dep", data(1));
  add("waits", data(1),
      AddOptions{.depends_on = {jobs::DependencyRef{"work", "dep"}}, .unique_for = 60s});
  EXPECT_FALSE(add("waits", data(2)).added);
  EXPECT_EQ(info_of("waits").state, State::kWaiting);
  EXPECT_EQ(info_of("waits").data, data(1));
}

TEST_P(JobsAddWindowsTest, AfterTheUniqueWindowOrARemoveAnAddBehavesAsWithoutIt) {
  AddResult first = add("j", data(1), unique_for(50ms));
  wait_until_past(first.unique_until_ms);
  AddResult plain = add("j", data(2));
  EXPECT_TRUE(plain.added);
  EXPECT_EQ(plain.unique_until_ms, 0);
  EXPECT_EQ(info_of("j").data, data(2));
  EXPECT_EQ(info_of("j").unique_until_ms, 0) << "an ended window dropped by the write";
  // With unique_for, the add after the window opens the next one, from its own time.
  AddResult next = add("j", data(3), unique_for(60s));
  EXPECT_TRUE(next.added);
  EXPECT_GT(next.unique_until_ms, first.unique_until_ms);
  EXPECT_FALSE(add("j", data(4)).added);
  // The window lives in the row: a removed job is added anew.
  ASSERT_TRUE(jobs().remove("work", "j").ok());
  AddResult anew = add("j", data(5));
  EXPECT_TRUE(anew.added);
  EXPECT_EQ(info_of("j").data, data(5));
  EXPECT_EQ(info_of("j").unique_until_ms, 0);
}

TEST_P(JobsAddWindowsTest, ABatchKeepsTheIdsItsWindowsKeep) {
  add("a", data(1), unique_for(60s));
  auto many = jobs().add_many(
      "work", {NewJob{"a", data(2)}, NewJob{"b", data(1), unique_for(60s)}, NewJob{"b", data(2)}});
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  EXPECT_EQ(many->added, 1u);
  EXPECT_EQ(many->kept, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(info_of("a").data, data(1));
  EXPECT_EQ(info_of("b").data, data(1)) << "the batch's second add of b saw its first";
}

// ---- Exact across processes and retries ----

// Two processes (two Jobs on one store) add the same new id at the same moment, over and over:
// one adds it, the other is kept by the window the first opened.
TEST_P(JobsAddWindowsTest, ConcurrentAddsWithUniqueForFromTwoJobsMakeOneJob) {
  if (GetParam().faults) GTEST_SKIP() << "two processes on the raw store";
  auto second = Jobs::open(raw_ptr(), {.key_prefix = "t", .run_scheduler = false});
  ASSERT_TRUE(second.ok());
  constexpr int kRounds = 20;
  for (int r = 0; r < kRounds; ++r) {
    const std::string id = "u" + std::to_string(r);
    Result<AddResult> ra = Internal("unset"), rb = Internal("unset");
    std::thread t1([&] { ra = jobs().add("work", id, data(1), unique_for(60s)); });
    std::thread t2([&] { rb = (*second)->add("work", id, data(2), unique_for(60s)); });
    t1.join();
    t2.join();
    ASSERT_TRUE(ra.ok()) << ra.status().to_string();
    ASSERT_TRUE(rb.ok()) << rb.status().to_string();
    ASSERT_NE(ra->added, rb->added) << id << ": exactly one add takes effect";
    EXPECT_EQ(ra->unique_until_ms, rb->unique_until_ms) << id << ": one window";
    EXPECT_EQ(info_of(id).data, ra->added ? data(1) : data(2)) << id;
  }
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, static_cast<uint64_t>(kRounds));
}

// Two processes debounce the same new id at the same moment: one adds it, the other debounces
// what the first added, and the job is as the later of the two left it.
TEST_P(JobsAddWindowsTest, ConcurrentDebouncedAddsFromTwoJobsAddOnceAndDebounceOnce) {
  if (GetParam().faults) GTEST_SKIP() << "two processes on the raw store";
  auto second = Jobs::open(raw_ptr(), {.key_prefix = "t", .run_scheduler = false});
  ASSERT_TRUE(second.ok());
  constexpr int kRounds = 20;
  for (int r = 0; r < kRounds; ++r) {
    const std::string id = "d" + std::to_string(r);
    Result<AddResult> ra = Internal("unset"), rb = Internal("unset");
    std::thread t1([&] { ra = jobs().add("work", id, data(1), debounce(30s, 60s)); });
    std::thread t2([&] { rb = (*second)->add("work", id, data(2), debounce(30s, 60s)); });
    t1.join();
    t2.join();
    ASSERT_TRUE(ra.ok()) << ra.status().to_string();
    ASSERT_TRUE(rb.ok()) << rb.status().to_string();
    ASSERT_NE(ra->debounced, rb->debounced) << id << ": one adds, the other debounces";
    const AddResult& later = ra->debounced ? *ra : *rb;
    const AddResult& earlier = ra->debounced ? *rb : *ra;
    EXPECT_GE(later.scheduled_time_ms, earlier.scheduled_time_ms) << id;
    JobInfo j = info_of(id);
    EXPECT_EQ(j.scheduled_time_ms, later.scheduled_time_ms) << id;
    EXPECT_EQ(j.data, ra->debounced ? data(1) : data(2)) << id;
    EXPECT_EQ(j.debounce_since_ms, earlier.scheduled_time_ms - 30'000) << id;
  }
}

// An add with unique_for whose commit applies but is reported unknown, then retried: the retry
// recognises its own add and answers added (a fresh look would see the window it opened, and
// answer kept).
TEST_P(JobsAddWindowsTest, AUniqueAddRetriedAfterAnUnknownCommitAnswersAdded) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  UnknownCommitOnce producer(raw_ptr(), 5);
  ASSERT_TRUE(producer.jobs());
  auto r = producer.jobs()->add("work", "j", data(1), unique_for(60s));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(producer.happened()) << "no commit was reported unknown after applying";
  EXPECT_TRUE(r->added) << "the retry took its own window for another add's";
  EXPECT_EQ(r->unique_until_ms, info_of("j").unique_until_ms);
  EXPECT_FALSE(add("j", data(2)).added);
}

// A debounced add whose commit is reported unknown, then retried: it is applied once, and its
// answer is the first application's (a fresh look would see a pending job and say debounced).
TEST_P(JobsAddWindowsTest, ADebouncedAddRetriedAfterAnUnknownCommitAppliesOnce) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  UnknownCommitOnce producer(raw_ptr(), 7);
  ASSERT_TRUE(producer.jobs());
  auto r = producer.jobs()->add("work", "j", data(1), debounce(30s, 60s));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(producer.happened()) << "no commit was reported unknown after applying";
  EXPECT_FALSE(r->debounced) << "the retry debounced the job its own first attempt added";
  JobInfo j = info_of("j");
  EXPECT_EQ(j.scheduled_time_ms, r->scheduled_time_ms);
  EXPECT_EQ(j.debounce_since_ms, r->scheduled_time_ms - 30'000);
  EXPECT_EQ(j.data, data(1));
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsAddWindowsTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
