// What the beanstalkd protocol front end needs of the jobs layer (kvq/jobs.h, issue 22): a job's
// own activity timeout, bytes data, ids unique across types and job numbers, remove by the
// worker holding a job, reschedule, make_due, peek, rerun_some and priorities on fail and
// snooze. On every backend and through the fault injector.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/jobs_fixture.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::AddOptions;
using jobs::DataFormat;
using jobs::FailOptions;
using jobs::Job;
using jobs::JobInfo;
using jobs::Jobs;
using jobs::Outcome;
using jobs::Peek;
using jobs::State;

class JobsProtocolSupportTest : public JobsFixture {
 protected:
  Job accept_soon(const std::string& type = "work", AcceptOptions o = {}) {
    o.timeout = 10s;
    auto job = jobs().accept(type, o);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
  JobInfo info(const std::string& id, const std::string& type = "work") {
    auto got = jobs().get(type, id);
    EXPECT_TRUE(got.ok()) << got.status().to_string();
    return got.ok() ? *got : JobInfo{};
  }
  // Polls until `done(info)` holds (a lost run is the monitor's, on its own time), up to 15 s.
  template <typename Pred>
  JobInfo wait_until(const std::string& id, Pred done) {
    const auto deadline = kv::Clock::now() + 15s;
    JobInfo got = info(id);
    while (!done(got) && kv::Clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
      got = info(id);
    }
    return got;
  }
};

TEST_P(JobsProtocolSupportTest, AJobsOwnTimeoutLosesItsRunWhileASiblingOnTheTypesTimeoutRuns) {
  ASSERT_TRUE(jobs().add("work", "sibling", "{}", {.priority = 0}).ok());
  ASSERT_TRUE(jobs().add("work", "short", "{}", {.priority = 1, .timeout = 300ms}).ok());
  Job sibling = accept_soon();
  Job short_run = accept_soon();
  ASSERT_EQ(sibling.id, "sibling");
  ASSERT_EQ(short_run.id, "short");
  EXPECT_EQ(sibling.timeout, 60s) << "the type's timeout";
  EXPECT_EQ(short_run.timeout, 300ms) << "its own";
  EXPECT_EQ(short_run.priority, 1);
  EXPECT_EQ(info("short").timeout, std::optional<jobs::Millis>(300ms));

  JobInfo lost = wait_until("short", [](const JobInfo& j) { return j.state != State::kRunning; });
  EXPECT_EQ(lost.state, State::kPending);
  ASSERT_EQ(lost.errors.size(), 1u);
  EXPECT_EQ(lost.errors[0].kind, "timeout");
  EXPECT_NE(lost.errors[0].message.find("job's timeout of 300 ms"), std::string::npos)
      << lost.errors[0].message;
  EXPECT_EQ(jobs().finish(short_run).code(), Code::kFailedPrecondition);
  EXPECT_EQ(info("sibling").state, State::kRunning);
  EXPECT_TRUE(jobs().finish(sibling).ok());
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->running, 0u);
  EXPECT_EQ(counts->pending, 1u);
}

TEST_P(JobsProtocolSupportTest, HeartbeatsKeepARunWithItsOwnTimeoutAlive) {
  ASSERT_TRUE(jobs().add("work", "beating", "{}", {.timeout = 600ms}).ok());
  Job job = accept_soon();
  // Past three of its timeouts in all, each heartbeat well within one.
  for (int i = 0; i < 12; ++i) {
    std::this_thread::sleep_for(150ms);
    ASSERT_TRUE(jobs().update(job).ok()) << "beat " << i;
  }
  EXPECT_EQ(info("beating").state, State::kRunning);
  EXPECT_TRUE(info("beating").errors.empty());
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->running, 1u) << "a run with its own timeout counts as running";
  EXPECT_TRUE(jobs().finish(job).ok());
}

TEST_P(JobsProtocolSupportTest, MaxRunningCountsRunsWithTheirOwnTimeout) {
  ASSERT_TRUE(jobs().set_max_running("work", 1).ok());
  ASSERT_TRUE(jobs().add("work", "a", "{}", {.timeout = 30s}).ok());
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());
  // Either may come first (a retried accept spreads its pick): one has its own timeout.
  Job first = accept_soon();
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded) << "full";
  ASSERT_TRUE(jobs().finish(first).ok());
  Job second = accept_soon();
  EXPECT_NE(second.id, first.id);
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded) << "full again";
  ASSERT_TRUE(jobs().finish(second).ok());
}

TEST_P(JobsProtocolSupportTest, OwnTimeoutsOutOfRangeAreRefused) {
  EXPECT_EQ(jobs().add("work", "z", "{}", {.timeout = 0ms}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().add("work", "z", "{}", {.timeout = jobs::kMaxJobTimeout + 1ms}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().get("work", "z").status().code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, BytesDataWithNulRoundTripsUnparsed) {
  const std::string body("not json\0\x01\xff{", 12);
  ASSERT_TRUE(jobs().add("work", "raw", body, {.data_format = DataFormat::kBytes}).ok());
  JobInfo got = info("raw");
  EXPECT_EQ(got.data, body);
  EXPECT_EQ(got.data_format, DataFormat::kBytes);
  Job job = accept_soon();
  EXPECT_EQ(job.data, body);
  EXPECT_EQ(job.data_format, DataFormat::kBytes);
  const std::string next("\0\0 two", 6);
  ASSERT_TRUE(jobs().update(job, {.data = next}).ok()) << "the job's format is kept";
  EXPECT_EQ(info("raw").data, next);
  ASSERT_TRUE(jobs().finish(job, {.data = std::string("x\0y", 3)}).ok());
  EXPECT_EQ(info("raw").data, std::string("x\0y", 3));
  EXPECT_EQ(info("raw").data_format, DataFormat::kBytes);

  EXPECT_EQ(jobs().add("work", "json", body).status().code(), Code::kInvalidArgument)
      << "JSON is still parsed";
  const std::string big(jobs().options().max_data_bytes + 1, '\0');
  EXPECT_EQ(jobs().add("work", "big", big, {.data_format = DataFormat::kBytes}).status().code(),
            Code::kInvalidArgument);
}

TEST_P(JobsProtocolSupportTest, AGlobalIdIsUniqueAcrossTypesUntilItsJobIsRemoved) {
  ASSERT_TRUE(jobs().set_type_timeout("other", 60s).ok());
  ASSERT_TRUE(jobs().add("work", "17", "{}", {.global_id = true}).ok());
  EXPECT_TRUE(info("17").global_id);
  auto clash = jobs().add("other", "17", "{}", {.global_id = true});
  EXPECT_EQ(clash.status().code(), Code::kAlreadyExists) << clash.status().to_string();
  EXPECT_EQ(jobs().get("other", "17").status().code(), Code::kNotFound);
  auto type = jobs().type_of("17");
  ASSERT_TRUE(type.ok()) << type.status().to_string();
  EXPECT_EQ(*type, "work");
  ASSERT_TRUE(jobs().add("work", "17", R"({"again": 1})").ok()) << "an add of the job itself";
  EXPECT_TRUE(info("17").global_id) << "keeps its global id";

  ASSERT_TRUE(jobs().remove("work", "17").ok());
  EXPECT_EQ(jobs().type_of("17").status().code(), Code::kNotFound);
  EXPECT_TRUE(jobs().add("other", "17", "{}", {.global_id = true}).ok());
  EXPECT_EQ(*jobs().type_of("17"), "other");
  EXPECT_EQ(jobs().type_of("18").status().code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, RetentionRemovesAGlobalId) {
  ASSERT_TRUE(jobs().set_finished_retention("work", 200ms).ok());
  ASSERT_TRUE(jobs().add("work", "g", "{}", {.global_id = true}).ok());
  Job job = accept_soon();
  ASSERT_TRUE(jobs().finish(job).ok());
  const auto deadline = kv::Clock::now() + 15s;
  while (jobs().type_of("g").ok() && kv::Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(jobs().type_of("g").status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().get("work", "g").status().code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, JobNumbersAreUniqueAcrossInstancesAndThreads) {
  auto second = Jobs::open(
      raw_ptr(), {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(second.ok());
  std::mutex mu;
  std::set<uint64_t> seen;
  size_t taken = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    Jobs* from = t % 2 == 0 ? &jobs() : second->get();
    threads.emplace_back([&, from] {
      uint64_t last = 0;
      for (int i = 0; i < 130; ++i) {
        auto n = from->next_job_number();
        ASSERT_TRUE(n.ok()) << n.status().to_string();
        EXPECT_GE(*n, 1u);
        std::lock_guard hold(mu);
        EXPECT_TRUE(seen.insert(*n).second) << *n << " handed out twice";
        ++taken;
        last = *n;
      }
      (void)last;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(seen.size(), taken);
  EXPECT_EQ(taken, 520u);
  // Within one instance, increasing.
  auto a = jobs().next_job_number();
  auto b = jobs().next_job_number();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(*a, *b);
}

TEST_P(JobsProtocolSupportTest, RemoveByItsWorkerIsFencedOnceTheRunWasLost) {
  ASSERT_TRUE(jobs().add("work", "mine", "{}").ok());
  Job job = accept_soon();
  ASSERT_TRUE(jobs().remove(job).ok());
  EXPECT_EQ(jobs().get("work", "mine").status().code(), Code::kNotFound);

  ASSERT_TRUE(jobs().add("work", "lost", "{}", {.timeout = 200ms}).ok());
  Job stale = accept_soon();
  JobInfo lost = wait_until("lost", [](const JobInfo& j) { return j.state != State::kRunning; });
  ASSERT_EQ(lost.state, State::kPending);
  EXPECT_EQ(jobs().remove(stale).code(), Code::kFailedPrecondition);
  EXPECT_EQ(info("lost").state, State::kPending) << "a fenced remove changes nothing";
  Job again = accept_soon();
  EXPECT_EQ(jobs().remove(stale).code(), Code::kFailedPrecondition) << "held by another run";
  std::promise<Status> removed;
  jobs().remove_async(again, [&](Status s) { removed.set_value(s); });
  EXPECT_TRUE(removed.get_future().get().ok());
  EXPECT_EQ(jobs().get("work", "lost").status().code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, RemoveByItsWorkerCountsTheRunItEndsOnce) {
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(jobs().add("work", id, "{}").ok());
  Job a = accept_soon();
  ASSERT_TRUE(jobs().remove(a).ok());
  EXPECT_EQ(jobs().remove(a).code(), Code::kFailedPrecondition) << "gone: fenced, not counted";
  Job b = accept_soon();
  std::promise<Status> removed;
  jobs().remove_async(b, [&](Status s) { removed.set_value(s); });
  ASSERT_TRUE(removed.get_future().get().ok());
  // In the caller's transaction: the jobs layer never learns whether it commits.
  Job c = accept_soon();
  ASSERT_TRUE(kv::run(raw(), [&](kv::Transaction& txn) { return jobs().remove(txn, c); }).ok());
  // A job removed while not running ends no run.
  ASSERT_TRUE(jobs().add("work", "d", "{}").ok());
  ASSERT_TRUE(jobs().remove("work", "d", {.unless_running = true}).ok());

  auto stats = jobs().type_stats()["work"];
  EXPECT_EQ(stats.removed, 2u);
  EXPECT_EQ(stats.run_time.count, 2u);
  EXPECT_EQ(stats.succeeded, 0u);
  EXPECT_EQ(stats.cancelled, 0u);
}

TEST_P(JobsProtocolSupportTest, RemoveUnlessRunningRefusesARunningJob) {
  ASSERT_TRUE(jobs().add("work", "r", "{}").ok());
  Job job = accept_soon();
  EXPECT_EQ(jobs().remove("work", "r", {.unless_running = true}).code(), Code::kWrongState);
  EXPECT_EQ(info("r").state, State::kRunning);
  ASSERT_TRUE(jobs().finish(job).ok());
  EXPECT_TRUE(jobs().remove("work", "r", {.unless_running = true}).ok());
  EXPECT_EQ(jobs().remove("work", "r", {.unless_running = true}).code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, RescheduleMovesAPendingJobOnly) {
  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  ASSERT_TRUE(jobs().reschedule("work", "a", {.scheduled_time_ms = later, .priority = 5}).ok());
  EXPECT_EQ(info("a").scheduled_time_ms, later);
  EXPECT_EQ(info("a").priority, 5);
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded) << "not due any more";
  ASSERT_TRUE(jobs().reschedule("work", "a", {.scheduled_time_ms = wall_ms()}).ok());
  EXPECT_EQ(info("a").priority, 5) << "kept";
  Job job = accept_soon();
  EXPECT_EQ(job.priority, 5);
  EXPECT_EQ(jobs().reschedule("work", "a", {.priority = 1}).code(), Code::kWrongState);
  EXPECT_EQ(jobs().reschedule("work", "nope", {.priority = 1}).code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, MakeDueTakesTheJobsDueSoonestFirst) {
  const int64_t now = wall_ms();
  ASSERT_TRUE(jobs().add("work", "late", "{}", {.scheduled_time_ms = now + 3'000'000}).ok());
  ASSERT_TRUE(
      jobs().add("work", "soon", "{}", {.scheduled_time_ms = now + 1'000'000, .priority = 9}).ok());
  ASSERT_TRUE(jobs().add("work", "mid", "{}", {.scheduled_time_ms = now + 2'000'000}).ok());
  ASSERT_TRUE(jobs().add("work", "due", "{}").ok());
  auto scheduled = jobs().peek("work", Peek::kScheduled);
  ASSERT_TRUE(scheduled.ok()) << scheduled.status().to_string();
  EXPECT_EQ(scheduled->id, "soon");
  auto made = jobs().make_due("work", 2);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  EXPECT_EQ(*made, 2u);
  EXPECT_LE(info("soon").scheduled_time_ms, wall_ms());
  EXPECT_LE(info("mid").scheduled_time_ms, wall_ms());
  EXPECT_EQ(info("late").scheduled_time_ms, now + 3'000'000);
  EXPECT_EQ(jobs().peek("work", Peek::kScheduled)->id, "late");
  EXPECT_EQ(*jobs().make_due("work", 10), 1u);
  EXPECT_EQ(jobs().peek("work", Peek::kScheduled).status().code(), Code::kNotFound);
  EXPECT_EQ(*jobs().make_due("work", 10), 0u);
  EXPECT_EQ(jobs().make_due("nope", 1).status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().make_due("work", 0).status().code(), Code::kInvalidArgument);
}

TEST_P(JobsProtocolSupportTest, PeekShowsWhatAcceptWouldTakeAndTheFirstDeadJob) {
  EXPECT_EQ(jobs().peek("work", Peek::kDue).status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().peek("nope", Peek::kDue).status().code(), Code::kNotFound);
  ASSERT_TRUE(jobs().add("work", "b", "{}", {.priority = 2}).ok());
  ASSERT_TRUE(jobs().add("work", "a", "{}", {.priority = 1}).ok());
  ASSERT_TRUE(jobs().add("work", "g", "{}", {.priority = 1, .group = "tenant"}).ok());
  auto due = jobs().peek("work", Peek::kDue);
  ASSERT_TRUE(due.ok()) << due.status().to_string();
  EXPECT_EQ(due->id, "a");
  Job first = accept_soon();
  EXPECT_EQ(first.id, due->id);
  EXPECT_EQ(jobs().peek("work", Peek::kDue)->id, "g") << "the group's turn";
  EXPECT_EQ(accept_soon().id, "g");
  EXPECT_EQ(jobs().peek("work", Peek::kDue)->id, "b");

  EXPECT_EQ(jobs().peek("work", Peek::kDead).status().code(), Code::kNotFound);
  FailOptions bury;
  bury.message = "bury";
  bury.retry = false;
  ASSERT_TRUE(jobs().fail(first, bury).ok());
  auto dead = jobs().peek("work", Peek::kDead);
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->id, "a");
  EXPECT_EQ(dead->outcome, Outcome::kDead);
}

TEST_P(JobsProtocolSupportTest, RerunSomeKicksAtMostItsLimitOfDeadJobs) {
  FailOptions bury;
  bury.message = "bury";
  bury.retry = false;
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(jobs().add("work", id, "{}").ok());
    Job job = accept_soon();
    ASSERT_TRUE(jobs().fail(job, bury).ok());
  }
  auto kicked = jobs().rerun_some("work", Outcome::kDead, 2);
  ASSERT_TRUE(kicked.ok()) << kicked.status().to_string();
  EXPECT_EQ(*kicked, 2u);
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->dead, 1u);
  EXPECT_EQ(counts->pending, 2u);
  EXPECT_EQ(*jobs().rerun_some("work", Outcome::kDead, 5), 1u);
  EXPECT_EQ(*jobs().rerun_some("work", Outcome::kDead, 5), 0u);
  EXPECT_EQ(jobs().rerun_some("work", Outcome::kSucceeded, 1).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().rerun_some("work", Outcome::kDead, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().rerun_some("nope", Outcome::kDead, 1).status().code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, FailAndSnoozeSetThePriorityAndSnoozesAreCounted) {
  ASSERT_TRUE(jobs().add("work", "p", "{}", {.priority = 3}).ok());
  Job job = accept_soon();
  ASSERT_TRUE(jobs().snooze(job, {.priority = 7}).ok());
  EXPECT_EQ(info("p").priority, 7);
  EXPECT_EQ(info("p").snoozes, 1u);
  job = accept_soon();
  ASSERT_TRUE(jobs().snooze(job).ok());
  EXPECT_EQ(info("p").priority, 7) << "kept";
  EXPECT_EQ(info("p").snoozes, 2u);
  job = accept_soon();
  FailOptions o;
  o.message = "again";
  o.retry_in = 0ms;
  o.priority = 4;
  auto failed = jobs().fail(job, o);
  ASSERT_TRUE(failed.ok());
  EXPECT_FALSE(failed->dead);
  EXPECT_EQ(info("p").priority, 4);
  job = accept_soon();
  EXPECT_EQ(job.priority, 4);
  o.retry = false;
  o.priority = 11;
  ASSERT_TRUE(jobs().fail(job, o)->dead);
  EXPECT_EQ(info("p").priority, 11) << "that of a later rerun";
  ASSERT_TRUE(jobs().rerun("work", "p").ok());
  EXPECT_EQ(info("p").priority, 11);
  EXPECT_EQ(info("p").snoozes, 0u) << "a rerun starts the count over";
}

TEST_P(JobsProtocolSupportTest, EnsureTypeCreatesOnce) {
  jobs::TypeSettings settings;
  settings.timeout = 5s;
  settings.max_running = 3;
  auto created = jobs().ensure_type("tube", settings);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  EXPECT_TRUE(*created);
  settings.timeout = 9s;
  EXPECT_FALSE(*jobs().ensure_type("tube", settings)) << "exists: nothing changes";
  auto got = jobs().get_type("tube");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->timeout, 5s);
  EXPECT_EQ(got->max_running, std::optional<uint32_t>(3));
  settings.timeout = 0ms;
  EXPECT_EQ(jobs().ensure_type("t2", settings).status().code(), Code::kInvalidArgument);
}

TEST_P(JobsProtocolSupportTest, ATypeWhoseJobsHadOwnTimeoutsCanBeDeletedOnceEmpty) {
  ASSERT_TRUE(jobs().set_type_timeout("brief", 60s).ok());
  ASSERT_TRUE(jobs().add("brief", "x", "{}", {.timeout = 1s}).ok());
  ASSERT_TRUE(jobs().remove("brief", "x").ok());
  ASSERT_TRUE(jobs().clear_type_timeout("brief").ok());
  EXPECT_EQ(jobs().get_type("brief").status().code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, ARunTakenBeforeItsJobWasDueIsDueAtOnceWhenLost) {
  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(
      jobs().add("work", "early", "{}", {.scheduled_time_ms = later, .timeout = 300ms}).ok());
  auto taken = jobs().accept_job("work", "early");
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  JobInfo lost = wait_until("early", [](const JobInfo& j) { return j.state != State::kRunning; });
  EXPECT_EQ(lost.state, State::kPending);
  EXPECT_LE(lost.scheduled_time_ms, wall_ms()) << "due at once, as beanstalkd's TTR expiry";
  EXPECT_EQ(accept_soon().id, "early");
}

TEST_P(JobsProtocolSupportTest, KickRerunsDeadJobsFirstThenMakesScheduledOnesDue) {
  FailOptions bury;
  bury.message = "bury";
  bury.retry = false;
  ASSERT_TRUE(
      jobs().add("work", "scheduled", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  for (const char* id : {"a", "b"}) {
    ASSERT_TRUE(jobs().add("work", id, "{}").ok());
    Job job = accept_soon();
    ASSERT_TRUE(jobs().fail(job, bury).ok());
  }
  EXPECT_EQ(*jobs().kick("work", 0), 0u);
  EXPECT_EQ(*jobs().kick("work", 5), 2u) << "the dead ones only";
  EXPECT_EQ(info("a").kicks, 1u);
  EXPECT_EQ(info("scheduled").kicks, 0u);
  EXPECT_EQ(*jobs().kick("work", 5), 1u);
  EXPECT_EQ(info("scheduled").kicks, 1u);
  EXPECT_LE(info("scheduled").scheduled_time_ms, wall_ms());
  EXPECT_EQ(*jobs().kick("work", 5), 0u);
  EXPECT_EQ(jobs().kick("nope", 1).status().code(), Code::kNotFound);
  // Added anew, a job's kicks start over.
  auto rerun = jobs().accept_job("work", "a");
  ASSERT_TRUE(rerun.ok()) << rerun.status().to_string();
  ASSERT_TRUE(jobs().finish(*rerun).ok());
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  EXPECT_EQ(info("a").kicks, 0u);
}

TEST_P(JobsProtocolSupportTest, KickJobTakesADeadOrNotYetDueJobOnly) {
  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = later, .priority = 4}).ok());
  ASSERT_TRUE(jobs().kick_job("work", "later").ok());
  JobInfo kicked = info("later");
  EXPECT_LE(kicked.scheduled_time_ms, wall_ms());
  EXPECT_EQ(kicked.priority, 4);
  EXPECT_EQ(kicked.kicks, 1u);
  EXPECT_EQ(jobs().kick_job("work", "later").code(), Code::kWrongState) << "due already";
  Job job = accept_soon();
  EXPECT_EQ(jobs().kick_job("work", "later").code(), Code::kWrongState) << "running";
  FailOptions bury;
  bury.message = "bury";
  bury.retry = false;
  ASSERT_TRUE(jobs().fail(job, bury).ok());
  ASSERT_TRUE(jobs().kick_job("work", "later").ok());
  kicked = info("later");
  EXPECT_EQ(kicked.state, State::kPending);
  EXPECT_EQ(kicked.kicks, 2u);
  EXPECT_EQ(kicked.errors.size(), 1u) << "why it died is kept, as by rerun";
  auto rerun = jobs().accept_job("work", "later");
  ASSERT_TRUE(rerun.ok()) << rerun.status().to_string();
  ASSERT_TRUE(jobs().finish(*rerun).ok());
  EXPECT_EQ(jobs().kick_job("work", "later").code(), Code::kWrongState) << "succeeded";
  EXPECT_EQ(jobs().kick_job("work", "nope").code(), Code::kNotFound);
}

TEST_P(JobsProtocolSupportTest, AnAddMakesItsTypeWhenMissingIfAsked) {
  jobs::TypeSettings settings;
  settings.timeout = 7s;
  settings.retry.max_attempts = 3;
  AddOptions options{.create_type = settings};
  EXPECT_EQ(jobs().add("made", "a", "{}").status().code(), Code::kNoTimeout);
  ASSERT_TRUE(jobs().add("made", "a", "{}", options).ok());
  auto got = jobs().get_type("made");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->timeout, 7s);
  EXPECT_EQ(got->retry.max_attempts, 3u);
  settings.timeout = 9s;
  options.create_type = settings;
  ASSERT_TRUE(jobs().add("made", "b", "{}", options).ok());
  EXPECT_EQ(jobs().get_type("made")->timeout, 7s) << "an existing type is left as it is";
  EXPECT_EQ(jobs().count("made")->pending, 2u);
  settings.timeout = 0ms;
  options.create_type = settings;
  EXPECT_EQ(jobs().add("other", "a", "{}", options).status().code(), Code::kInvalidArgument);
}

TEST_P(JobsProtocolSupportTest, PendingCountTakesAMaxPriority) {
  for (int64_t priority : {0, 1023, 1024, 5000}) {
    ASSERT_TRUE(jobs().add("work", std::to_string(priority), "{}", {.priority = priority}).ok());
  }
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  ASSERT_TRUE(jobs().add("work", "grouped", "{}", {.priority = 2, .group = "g"}).ok());
  EXPECT_EQ(*jobs().pending_count("work", {.max_priority = 1023}), 3u);
  EXPECT_EQ(*jobs().pending_count("work", {.max_priority = -1}), 0u);
  EXPECT_EQ(*jobs().pending_count("work"), 5u);
  EXPECT_EQ(*jobs().pending_count("work", {.max_priority = 1023, .limit = 2}), 2u);
}

TEST_P(JobsProtocolSupportTest, ATypeNameMayHave200Bytes) {
  const std::string type(jobs::kMaxTypeBytes, 't');
  ASSERT_EQ(type.size(), 200u);
  ASSERT_TRUE(jobs().set_type_timeout(type, 60s).ok());
  const std::string id(jobs::kMaxIdBytes, 'i');
  ASSERT_TRUE(jobs().add(type, id, "{}", {.timeout = 5s, .global_id = true}).ok());
  Job job = accept_soon(type);
  EXPECT_EQ(job.id, id);
  EXPECT_TRUE(jobs().finish(job).ok());
  EXPECT_EQ(jobs().set_type_timeout(type + "t", 60s).code(), Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsProtocolSupportTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
