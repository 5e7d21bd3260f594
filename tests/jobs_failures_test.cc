// Failures, retries and outcomes (kvq/jobs.h: fail, snooze, the retry policy, lost runs, errors,
// result and progress), on every backend and through the fault injector.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/jobs_fixture.h"
#include "support/kv_helpers.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::FailOptions;
using jobs::Job;
using jobs::JobInfo;
using jobs::Jobs;
using jobs::Outcome;
using jobs::RetryPolicy;
using jobs::State;

// The fixture of tests/jobs_test.cc.
class JobsFailuresTest : public JobsFixture {
 protected:
  // Waits up to 10 s for a due job.
  Job accept_soon(const std::string& type = "work", AcceptOptions o = {}) {
    o.timeout = 10s;
    auto job = jobs_->accept(type, o);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
  JobInfo info(const std::string& id, const std::string& type = "work") {
    auto got = jobs_->get(type, id);
    EXPECT_TRUE(got.ok()) << got.status().to_string();
    return got.ok() ? *got : JobInfo{};
  }
  // Polls until `done(info)` holds (a lost run is the monitor's, on its own time), up to 15 s.
  template <typename Pred>
  JobInfo wait_until(const std::string& type, const std::string& id, Pred done) {
    const auto deadline = kv::Clock::now() + 15s;
    JobInfo got = info(id, type);
    while (!done(got) && kv::Clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
      got = info(id, type);
    }
    return got;
  }
  FailOptions failure(std::string message) {
    FailOptions o;
    o.message = std::move(message);
    return o;
  }
};

TEST_P(JobsFailuresTest, AJobThatFailsThreeTimesThenSucceedsKeepsItsErrorsResultAndData) {
  ASSERT_TRUE(jobs().add("work", "a", R"({"in": 1})").ok());
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    Job job = accept_soon();
    EXPECT_EQ(job.attempt, attempt);
    FailOptions o = failure("boom " + std::to_string(attempt));
    o.kind = "io";
    o.details = R"({"try": )" + std::to_string(attempt) + "}";
    o.retry_in = 0ms;
    auto failed = jobs().fail(job, o);
    ASSERT_TRUE(failed.ok()) << failed.status().to_string();
    EXPECT_FALSE(failed->dead);
    EXPECT_EQ(failed->attempt, attempt);
    EXPECT_EQ(info("a").state, State::kPending);
    EXPECT_EQ(info("a").outcome, Outcome::kNone);
  }
  Job job = accept_soon();
  EXPECT_EQ(job.attempt, 4u);
  ASSERT_TRUE(jobs().finish(job, {.result = R"({"ok": true})"}).ok());
  JobInfo done = info("a");
  EXPECT_EQ(done.state, State::kFinished);
  EXPECT_EQ(done.outcome, Outcome::kSucceeded);
  EXPECT_FALSE(done.gave_up);
  EXPECT_EQ(done.attempts, 4u);
  ASSERT_TRUE(done.result.has_value());
  EXPECT_EQ(*done.result, R"({"ok":true})");
  EXPECT_EQ(done.data, R"({"in":1})");
  ASSERT_EQ(done.errors.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(done.errors[i].attempt, i + 1);
    EXPECT_EQ(done.errors[i].kind, "io");
    EXPECT_EQ(done.errors[i].message, "boom " + std::to_string(i + 1));
    EXPECT_EQ(done.errors[i].details, R"({"try":)" + std::to_string(i + 1) + "}");
    EXPECT_GT(done.errors[i].at_ms, 0);
  }
  EXPECT_GE(done.ended_at_ms, done.started_at_ms);
  EXPECT_GT(done.started_at_ms, 0);
  auto stats = jobs().type_stats();
  EXPECT_EQ(stats["work"].failed, 3u);
  EXPECT_EQ(stats["work"].retried, 3u);
  EXPECT_EQ(stats["work"].succeeded, 1u);
  EXPECT_EQ(stats["work"].run_time.count, 4u);
  EXPECT_EQ(stats["work"].queue_latency.count, 4u) << "one per accept";
  ASSERT_EQ(stats["work"].queue_latency.counts.size(), Jobs::Histogram::bounds().size() + 1);
}

TEST_P(JobsFailuresTest, AFinishOrFailRepeatedWithItsHandleIsCountedOnce) {
  // A client that lost the answer sends the call again with the same handle: the call finds
  // its own commit and answers as it did, and the stats count the run once.
  ASSERT_TRUE(jobs().add("work", "f", "{}").ok());
  Job finished = accept_soon();
  ASSERT_TRUE(jobs().finish(finished).ok());
  ASSERT_TRUE(jobs().finish(finished).ok());
  std::promise<Status> again;
  jobs().finish_async(finished, {}, [&](Status s) { again.set_value(s); });
  ASSERT_TRUE(again.get_future().get().ok());
  auto with_next = jobs().finish_and_accept(finished, {}, {"work"}, {});
  ASSERT_TRUE(with_next.ok()) << with_next.status().to_string();
  EXPECT_FALSE(with_next->has_value()) << "nothing else is due";

  ASSERT_TRUE(jobs().add("work", "d", "{}").ok());
  Job failed = accept_soon();
  ASSERT_TRUE(jobs().fail(failed, {.message = "no", .retry = false}).ok());
  auto failed_again = jobs().fail(failed, {.message = "no", .retry = false});
  ASSERT_TRUE(failed_again.ok()) << failed_again.status().to_string();
  EXPECT_TRUE(failed_again->dead);

  auto stats = jobs().type_stats()["work"];
  EXPECT_EQ(stats.succeeded, 1u);
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(stats.dead, 1u);
  EXPECT_EQ(stats.run_time.count, 2u);
}

TEST_P(JobsFailuresTest, EveryAcceptFormCountsItsQueueLatencyOnce) {
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(jobs().add("work", "l" + std::to_string(i), "{}").ok());
  Job one = accept_soon();
  auto many = jobs().accept_many("work", 2);
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  EXPECT_EQ(many->size(), 2u);
  std::promise<Result<std::vector<Job>>> due;
  jobs().accept_due_async("work", 3, {}, [&](Result<std::vector<Job>> r) { due.set_value(r); });
  auto got = due.get_future().get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->size(), 3u);
  // Nothing left: a look that takes none counts none.
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  auto stats = jobs().type_stats()["work"];
  EXPECT_EQ(stats.queue_latency.count, 6u);
  uint64_t in_buckets = 0;
  for (uint64_t c : stats.queue_latency.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, 6u);
  EXPECT_GE(stats.queue_latency.sum_seconds, 0.0);
}

TEST_P(JobsFailuresTest, AFailedJobComesBackAtItsBackoffTimeAndNotBefore) {
  RetryPolicy policy;
  policy.max_attempts = 10;
  policy.backoff_base = 200ms;
  policy.backoff_factor = 2;
  policy.backoff_cap = 10s;
  policy.jitter = 0.5;
  ASSERT_TRUE(jobs().set_retry_policy("work", policy).ok());
  auto type = jobs().get_type("work");
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(type->retry.max_attempts, 10u);
  EXPECT_EQ(type->retry.backoff_base, 200ms);
  EXPECT_DOUBLE_EQ(type->retry.jitter, 0.5);
  EXPECT_EQ(type->timeout, 60s);
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());

  for (uint32_t n = 1; n <= 2; ++n) {
    Job job = accept_soon();
    const int64_t before = wall_ms();
    auto failed = jobs().fail(job, failure("later"));
    const int64_t after = wall_ms();
    ASSERT_TRUE(failed.ok()) << failed.status().to_string();
    const int64_t d = 200 << (n - 1);  // d(n) = 200 ms * 2^(n-1)
    EXPECT_GE(failed->retry_at_ms, before + d / 2) << "attempt " << n;
    EXPECT_LE(failed->retry_at_ms, after + d) << "attempt " << n;
    EXPECT_EQ(info("b").scheduled_time_ms, failed->retry_at_ms);
    // Not due before its time.
    if (wall_ms() < failed->retry_at_ms - 20) {
      EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
    }
    Job again = accept_soon();
    EXPECT_GE(wall_ms(), failed->retry_at_ms);
    EXPECT_EQ(again.attempt, n + 1);
    auto snoozed = jobs().snooze(again, {.delay = 0ms});  // hands it back, not counted
    ASSERT_TRUE(snoozed.ok()) << snoozed.to_string();
  }
  // retry_in overrides the backoff.
  Job job = accept_soon();
  FailOptions o = failure("soon");
  o.retry_in = 5s;
  const int64_t before = wall_ms();
  auto failed = jobs().fail(job, o);
  ASSERT_TRUE(failed.ok());
  EXPECT_GE(failed->retry_at_ms, before + 5000);
  EXPECT_LE(failed->retry_at_ms, wall_ms() + 5000);
  // retry = false: dead at once, with attempts left.
  ASSERT_TRUE(jobs().add("work", "c", "{}").ok());
  Job c = accept_soon("work", {.max_scheduled_time_ms = wall_ms()});
  ASSERT_EQ(c.id, "c");
  FailOptions never = failure("fatal");
  never.retry = false;
  auto dead = jobs().fail(c, never);
  ASSERT_TRUE(dead.ok());
  EXPECT_TRUE(dead->dead);
  EXPECT_EQ(dead->attempt, 1u);
  JobInfo got = info("c");
  EXPECT_EQ(got.state, State::kFinished);
  EXPECT_EQ(got.outcome, Outcome::kDead);
  EXPECT_FALSE(got.gave_up) << "it died of a failure, not of lost runs";
  ASSERT_EQ(got.errors.size(), 1u);
  EXPECT_EQ(got.errors[0].message, "fatal");
  EXPECT_EQ(got.errors[0].kind, "error");
}

TEST_P(JobsFailuresTest, AJobEndsDeadAfterMaxAttemptsEachCountedOnce) {
  RetryPolicy policy;
  policy.max_attempts = 4;
  policy.backoff_base = 1ms;
  policy.backoff_cap = 1ms;
  policy.jitter = 0;
  ASSERT_TRUE(jobs().set_retry_policy("work", policy).ok());
  ASSERT_TRUE(jobs().add("work", "d", R"({"k":"d"})").ok());
  for (uint32_t attempt = 1; attempt <= 4; ++attempt) {
    Job job = accept_soon();
    ASSERT_EQ(job.attempt, attempt);
    auto failed = jobs().fail(job, failure("no " + std::to_string(attempt)));
    ASSERT_TRUE(failed.ok()) << failed.status().to_string();
    EXPECT_EQ(failed->dead, attempt == 4);
    EXPECT_EQ(failed->attempt, attempt);
    // Failing again with the same lock answers what the first call decided, and counts nothing.
    auto again = jobs().fail(job, failure("again"));
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ(again->dead, failed->dead);
    EXPECT_EQ(again->attempt, attempt);
    if (!failed->dead) {
      EXPECT_EQ(again->retry_at_ms, failed->retry_at_ms);
    }
  }
  JobInfo got = info("d");
  EXPECT_EQ(got.state, State::kFinished);
  EXPECT_EQ(got.outcome, Outcome::kDead);
  EXPECT_EQ(got.attempts, 4u);
  ASSERT_EQ(got.errors.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got.errors[i].attempt, i + 1);
    EXPECT_EQ(got.errors[i].message, "no " + std::to_string(i + 1));
  }
  EXPECT_EQ(got.data, R"({"k":"d"})");
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
}

TEST_P(JobsFailuresTest, AStaleWorkersFailIsRefusedAndChangesNothing) {
  ASSERT_TRUE(jobs().add("work", "e", "{}").ok());
  Job stale = accept_soon("work", {.worker = "w1"});
  auto released = jobs().release_worker("", "w1");
  ASSERT_TRUE(released.ok()) << released.status().to_string();
  EXPECT_EQ(*released, 1u);
  Job current = accept_soon("work", {.worker = "w2"});
  const JobInfo before = info("e");
  EXPECT_EQ(jobs().fail(stale, failure("late")).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().snooze(stale).code(), Code::kFailedPrecondition);
  const JobInfo after = info("e");
  EXPECT_EQ(after.state, State::kRunning);
  EXPECT_EQ(after.worker, "w2");
  EXPECT_EQ(after.attempts, before.attempts);
  EXPECT_EQ(after.errors.size(), before.errors.size());
  EXPECT_EQ(after.updated_at_ms, before.updated_at_ms);
  EXPECT_TRUE(jobs().finish(current).ok());
}

// A run its worker ended (finish, fail or snooze) is over: its lock passes only the same call
// again (the retry of a call whose answer was lost); every other call with it halts, names what
// ended the run, and changes nothing, as for any stale worker.
TEST_P(JobsFailuresTest, AnEndedRunsLockPassesOnlyARetryOfTheCallThatEndedIt) {
  auto expect_halted = [](const Status& s, const std::string& why) {
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.to_string();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.to_string();
  };
  auto expect_unchanged = [&](const std::string& id, const JobInfo& before) {
    const JobInfo after = info(id);
    EXPECT_EQ(after.state, before.state) << id;
    EXPECT_EQ(after.outcome, before.outcome) << id;
    EXPECT_EQ(after.attempts, before.attempts) << id;
    EXPECT_EQ(after.errors.size(), before.errors.size()) << id;
    EXPECT_EQ(after.scheduled_time_ms, before.scheduled_time_ms) << id;
    EXPECT_EQ(after.updated_at_ms, before.updated_at_ms) << id;
  };

  ASSERT_TRUE(jobs().add("work", "snoozed", "{}").ok());
  Job snoozed = accept_soon();
  ASSERT_TRUE(jobs().snooze(snoozed, {.delay = 1h}).ok());
  const JobInfo after_snooze = info("snoozed");
  expect_halted(jobs().finish(snoozed), "was already snoozed with this lock");
  expect_halted(jobs().fail(snoozed, failure("late")).status(), "was already snoozed");
  expect_halted(jobs().update(snoozed).status(), "was already snoozed");
  expect_halted(jobs().resubmit(snoozed), "was already snoozed");
  expect_halted(jobs().finish_and_accept(snoozed, {}, {"work"}, {}).status(),
                "was already snoozed");
  EXPECT_TRUE(jobs().snooze(snoozed, {.delay = 1h}).ok()) << "a retry of the snooze";
  expect_unchanged("snoozed", after_snooze);
  EXPECT_EQ(after_snooze.state, State::kPending);

  ASSERT_TRUE(jobs().add("work", "failed", "{}").ok());
  Job failed = accept_soon();
  FailOptions later = failure("boom");
  later.retry_in = 1h;
  ASSERT_TRUE(jobs().fail(failed, later).ok());
  const JobInfo after_fail = info("failed");
  expect_halted(jobs().finish(failed), "was already failed with this lock");
  expect_halted(jobs().snooze(failed), "was already failed");
  auto failed_again = jobs().fail(failed, later);
  ASSERT_TRUE(failed_again.ok()) << "a retry of the fail: " << failed_again.status().to_string();
  EXPECT_FALSE(failed_again->dead);
  EXPECT_EQ(failed_again->attempt, 1u);
  expect_unchanged("failed", after_fail);
  EXPECT_EQ(after_fail.errors.size(), 1u);

  ASSERT_TRUE(jobs().add("work", "finished", "{}").ok());
  Job finished = accept_soon();
  ASSERT_TRUE(jobs().finish(finished, {.result = "1"}).ok());
  const JobInfo after_finish = info("finished");
  expect_halted(jobs().fail(finished, failure("late")).status(),
                "was already finished with this lock");
  expect_halted(jobs().snooze(finished), "was already finished");
  EXPECT_TRUE(jobs().finish(finished, {.result = "1"}).ok()) << "a retry of the finish";
  expect_unchanged("finished", after_finish);
  EXPECT_EQ(after_finish.outcome, Outcome::kSucceeded);

  auto stats = jobs().type_stats()["work"];
  EXPECT_EQ(stats.succeeded, 1u);
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(stats.run_time.count, 3u) << "each run counted once";
}

TEST_P(JobsFailuresTest, ErrorsAreBoundedAndTruncatedAndBadFailuresAreRefused) {
  ASSERT_TRUE(jobs().add("work", "f", "{}").ok());
  Job job = accept_soon();
  // Refused, changing nothing.
  EXPECT_EQ(jobs().fail(job, failure("")).status().code(), Code::kInvalidArgument);
  FailOptions bad = failure("m");
  bad.kind = "";
  EXPECT_EQ(jobs().fail(job, bad).status().code(), Code::kInvalidArgument);
  bad.kind = std::string(jobs::kMaxErrorKindBytes + 1, 'k');
  EXPECT_EQ(jobs().fail(job, bad).status().code(), Code::kInvalidArgument);
  bad.kind = "error";
  bad.details = "not json";
  EXPECT_EQ(jobs().fail(job, bad).status().code(), Code::kInvalidArgument);
  bad.details.reset();
  bad.retry_in = -1ms;
  EXPECT_EQ(jobs().fail(job, bad).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().snooze(job, {.delay = -1ms}).code(), Code::kInvalidArgument);
  EXPECT_EQ(info("f").state, State::kRunning);
  EXPECT_TRUE(info("f").errors.empty());

  const size_t total = jobs::kMaxErrorsKept + 2;
  for (size_t i = 1; i <= total; ++i) {
    if (i > 1) job = accept_soon();
    FailOptions o = failure("fail " + std::to_string(i));
    o.retry_in = 0ms;
    if (i == total) {
      // 2-byte characters past the limit: cut at a character, with an ellipsis.
      std::string long_message;
      while (long_message.size() < jobs::kMaxErrorMessageBytes + 100) long_message += "\xC3\xA9";
      o.message = "x" + long_message;
      o.details = R"({"stack": ")" + std::string(jobs::kMaxErrorDetailsBytes, 'q') + R"("})";
    }
    ASSERT_TRUE(jobs().fail(job, o).ok());
  }
  JobInfo got = info("f");
  ASSERT_EQ(got.errors.size(), jobs::kMaxErrorsKept);
  EXPECT_EQ(got.errors.front().attempt, total - jobs::kMaxErrorsKept + 1);
  EXPECT_EQ(got.errors.front().message, "fail 3");
  const auto& last = got.errors.back();
  EXPECT_EQ(last.attempt, total);
  EXPECT_LE(last.message.size(), jobs::kMaxErrorMessageBytes);
  EXPECT_GE(last.message.size(), jobs::kMaxErrorMessageBytes - 4);
  const std::string ellipsis = "\xE2\x80\xA6";
  ASSERT_GE(last.message.size(), ellipsis.size());
  EXPECT_EQ(last.message.substr(last.message.size() - ellipsis.size()), ellipsis);
  // "x" then whole é's: the byte before the ellipsis ends a character.
  EXPECT_EQ(last.message[last.message.size() - ellipsis.size() - 1], '\xA9');
  EXPECT_LE(last.details.size(), jobs::kMaxErrorDetailsBytes);
  EXPECT_EQ(last.details.rfind(R"({"truncated":"{\"stack\":\"qqq)", 0), 0u) << last.details;
  EXPECT_EQ(last.details.substr(last.details.size() - 2), R"("})");
  EXPECT_GT(last.details.size(), jobs::kMaxErrorDetailsBytes - 16);
}

TEST_P(JobsFailuresTest, ALostRunIsAFailedAttemptAndEndsDeadAtMaxAttempts) {
  ASSERT_TRUE(jobs().set_type_timeout("short", 300ms).ok());
  RetryPolicy policy;
  policy.max_attempts = 2;
  ASSERT_TRUE(jobs().set_retry_policy("short", policy).ok());
  ASSERT_TRUE(jobs().add("short", "g", R"({"k":1})").ok());
  Job first = accept_soon("short");
  EXPECT_EQ(first.attempt, 1u);
  JobInfo lost = wait_until("short", "g", [](const JobInfo& i) { return !i.errors.empty(); });
  ASSERT_EQ(lost.errors.size(), 1u);
  EXPECT_EQ(lost.state, State::kPending) << "retried at once";
  EXPECT_EQ(lost.errors[0].kind, "timeout");
  EXPECT_NE(lost.errors[0].message.find("300 ms"), std::string::npos) << lost.errors[0].message;
  EXPECT_EQ(lost.errors[0].attempt, 1u);
  EXPECT_EQ(lost.attempts, 1u);
  EXPECT_EQ(jobs().update(first).status().code(), Code::kFailedPrecondition);

  Job second = accept_soon("short");
  EXPECT_EQ(second.attempt, 2u);
  JobInfo dead =
      wait_until("short", "g", [](const JobInfo& i) { return i.state == State::kFinished; });
  EXPECT_EQ(dead.state, State::kFinished);
  EXPECT_EQ(dead.outcome, Outcome::kDead);
  EXPECT_TRUE(dead.gave_up) << "dead of lost runs";
  EXPECT_EQ(dead.attempts, 2u);
  ASSERT_EQ(dead.errors.size(), 2u);
  EXPECT_EQ(dead.errors[1].kind, "timeout");
  EXPECT_EQ(dead.errors[1].attempt, 2u);
  EXPECT_EQ(dead.data, R"({"k":1})");
  EXPECT_EQ(jobs().finish(second).code(), Code::kFailedPrecondition);
  // The monitor counts a lost run once its commit is known, after the commit the row shows:
  // so wait for the count, then check it is exact (a lost run counted twice would show 3).
  const auto deadline = kv::Clock::now() + 15s;
  auto stats = jobs().type_stats()["short"];
  while ((stats.lost < 2 || stats.dead < 1) && kv::Clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    stats = jobs().type_stats()["short"];
  }
  EXPECT_EQ(stats.lost, 2u);
  EXPECT_EQ(stats.dead, 1u);
}

TEST_P(JobsFailuresTest, AReleasedWorkersRunIsRecordedAsWorkerLost) {
  ASSERT_TRUE(jobs().add("work", "h", "{}").ok());
  Job job = accept_soon("work", {.worker = "w9", .worker_type = "pool"});
  auto released = jobs().release_worker("pool", "w9");
  ASSERT_TRUE(released.ok()) << released.status().to_string();
  EXPECT_EQ(*released, 1u);
  JobInfo got = info("h");
  EXPECT_EQ(got.state, State::kPending);
  ASSERT_EQ(got.errors.size(), 1u);
  EXPECT_EQ(got.errors[0].kind, "worker_lost");
  EXPECT_EQ(got.errors[0].worker, "w9");
  EXPECT_EQ(got.errors[0].attempt, 1u);
  EXPECT_NE(got.errors[0].message.find("w9"), std::string::npos) << got.errors[0].message;
  EXPECT_EQ(jobs().finish(job).code(), Code::kFailedPrecondition);
}

TEST_P(JobsFailuresTest, SnoozeDoesNotCountAnAttemptAndRecordsNoError) {
  ASSERT_TRUE(jobs().add("work", "s", R"({"v":1})").ok());
  Job job = accept_soon();
  EXPECT_EQ(job.attempt, 1u);
  ASSERT_TRUE(jobs().snooze(job, {.delay = 0ms}).ok());
  // Again with the same lock after an unknown commit result: the same success.
  ASSERT_TRUE(jobs().snooze(job, {.delay = 0ms}).ok());
  JobInfo got = info("s");
  EXPECT_EQ(got.state, State::kPending);
  EXPECT_EQ(got.attempts, 0u);
  EXPECT_TRUE(got.errors.empty());
  job = accept_soon();
  EXPECT_EQ(job.attempt, 1u);
  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().snooze(job, {.scheduled_time_ms = later}).ok());
  got = info("s");
  EXPECT_EQ(got.scheduled_time_ms, later);
  EXPECT_EQ(got.attempts, 0u);
  EXPECT_EQ(got.data, R"({"v":1})");
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
}

TEST_P(JobsFailuresTest, ProgressAndResultAreKeptApartFromTheData) {
  ASSERT_TRUE(jobs().add("work", "p", R"({"in":"x"})").ok());
  Job job = accept_soon();
  auto updated = jobs().update(job, jobs::UpdateOptions{.progress = "[1, 2]"});
  ASSERT_TRUE(updated.ok()) << updated.status().to_string();
  JobInfo got = info("p");
  ASSERT_TRUE(got.progress.has_value());
  EXPECT_EQ(*got.progress, "[1,2]");
  EXPECT_EQ(got.data, R"({"in":"x"})");
  EXPECT_FALSE(got.result.has_value());
  EXPECT_EQ(jobs().update(job, jobs::UpdateOptions{.progress = "{nope"}).status().code(),
            Code::kInvalidArgument);
  // A new run starts without the last one's progress.
  FailOptions o = failure("again");
  o.retry_in = 0ms;
  ASSERT_TRUE(jobs().fail(job, o).ok());
  EXPECT_TRUE(info("p").progress.has_value()) << "kept until the next run starts";
  job = accept_soon();
  EXPECT_FALSE(info("p").progress.has_value());
  ASSERT_TRUE(jobs().finish(job, {.result = R"( "done" )"}).ok());
  got = info("p");
  ASSERT_TRUE(got.result.has_value());
  EXPECT_EQ(*got.result, R"("done")");
  EXPECT_EQ(got.data, R"({"in":"x"})");
  auto sub = jobs().subscribe("work", "p");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ((*sub)->initial().outcome, Outcome::kSucceeded);
  ASSERT_TRUE((*sub)->initial().result.has_value());
  EXPECT_EQ(*(*sub)->initial().result, R"("done")");
  EXPECT_EQ((*sub)->initial().attempts, 2u);

  // The couch_jobs forms still replace the data.
  ASSERT_TRUE(jobs().add("work", "q", R"({"in":1})").ok());
  Job q = accept_soon();
  ASSERT_EQ(q.id, "q");
  ASSERT_TRUE(jobs().update(q, std::optional<std::string_view>(R"({"step": 2})")).ok());
  EXPECT_EQ(info("q").data, R"({"step":2})");
  ASSERT_TRUE(jobs().finish(q, std::optional<std::string_view>(R"({"step": 3})")).ok());
  got = info("q");
  EXPECT_EQ(got.data, R"({"step":3})");
  EXPECT_EQ(got.outcome, Outcome::kSucceeded);
  EXPECT_FALSE(got.result.has_value());
}

TEST_P(JobsFailuresTest, RetryPoliciesOutOfRangeAreRefused) {
  RetryPolicy p;
  p.max_attempts = 0;
  EXPECT_EQ(jobs().set_retry_policy("work", p).code(), Code::kInvalidArgument);
  p = RetryPolicy{};
  p.backoff_factor = 0.5;
  EXPECT_EQ(jobs().set_retry_policy("work", p).code(), Code::kInvalidArgument);
  p = RetryPolicy{};
  p.backoff_cap = 10ms;
  p.backoff_base = 20ms;
  EXPECT_EQ(jobs().set_retry_policy("work", p).code(), Code::kInvalidArgument);
  p = RetryPolicy{};
  p.jitter = 1.5;
  EXPECT_EQ(jobs().set_retry_policy("work", p).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_retry_policy("nosuch", RetryPolicy{}).code(), Code::kNotFound);
  // Setting the timeout keeps the policy.
  p = RetryPolicy{};
  p.max_attempts = 3;
  ASSERT_TRUE(jobs().set_retry_policy("work", p).ok());
  ASSERT_TRUE(jobs().set_type_timeout("work", 30s).ok());
  EXPECT_EQ(jobs().get_type("work")->retry.max_attempts, 3u);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsFailuresTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
