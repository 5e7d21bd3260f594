// Accepts over several types and of a named job (kvq/jobs.h: accept_any, accept_any_async,
// accept_job, finish_and_accept, finish_and_accept_async), on every backend and through the
// fault injector.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "support/jobs_fixture.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::Job;
using jobs::JobInfo;
using jobs::Outcome;
using jobs::State;

class AcceptAnyTest : public JobsFixture {
 protected:
  void SetUp() override {
    JobsFixture::SetUp();
    ASSERT_TRUE(jobs().set_type_timeout("other", 60s).ok());
  }
  JobInfo info(const std::string& type, const std::string& id) {
    auto got = jobs().get(type, id);
    EXPECT_TRUE(got.ok()) << got.status().to_string();
    return got.ok() ? *got : JobInfo{};
  }
  // The (type, id) accept_any takes from `types`, or "" when it fails.
  std::string take(const std::vector<std::string>& types, AcceptOptions options = {}) {
    auto job = jobs().accept_any(types, options);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? job->type + "/" + job->id : "";
  }
  // A job that is dead: accepted and failed without retry.
  void make_dead(const std::string& type, const std::string& id) {
    ASSERT_TRUE(jobs().add(type, id, "{}").ok());
    auto job = jobs().accept_job(type, id);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    jobs::FailOptions fail;
    fail.message = "boom";
    fail.retry = false;
    auto failed = jobs().fail(*job, fail);
    ASSERT_TRUE(failed.ok() && failed->dead);
  }
};

TEST_P(AcceptAnyTest, TheBestPriorityOfAnyTypeComesFirst) {
  ASSERT_TRUE(jobs().add("work", "a", "{}", {.priority = 5}).ok());
  ASSERT_TRUE(jobs().add("other", "b", "{}", {.priority = 1}).ok());
  ASSERT_TRUE(jobs().add("work", "c", "{}", {.priority = -3}).ok());
  EXPECT_EQ(take({"work", "other"}), "work/c");
  EXPECT_EQ(take({"work", "other"}), "other/b");
  EXPECT_EQ(take({"other", "work"}), "work/a");
  EXPECT_EQ(jobs().accept_any({"work", "other"}).status().code(), Code::kDeadlineExceeded);
}

TEST_P(AcceptAnyTest, ATieGoesToTheEarlierScheduledThenToTheFirstTypeGiven) {
  const int64_t t = wall_ms() - 10'000;
  ASSERT_TRUE(jobs().add("work", "late", "{}", {.scheduled_time_ms = t + 2000}).ok());
  ASSERT_TRUE(jobs().add("other", "early", "{}", {.scheduled_time_ms = t + 1000}).ok());
  EXPECT_EQ(take({"work", "other"}), "other/early");
  ASSERT_TRUE(jobs().add("other", "same", "{}", {.scheduled_time_ms = t + 2000}).ok());
  EXPECT_EQ(take({"other", "work"}), "other/same");
  ASSERT_TRUE(jobs().add("other", "same2", "{}", {.scheduled_time_ms = t + 2000}).ok());
  EXPECT_EQ(take({"work", "other"}), "work/late");
  // The Job names its type, and its lock is that type's.
  auto job = jobs().accept_any({"work", "other"}, {.worker = "w"});
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->type, "other");
  EXPECT_EQ(job->id, "same2");
  EXPECT_EQ(job->attempt, 1u);
  EXPECT_TRUE(jobs().finish(*job).ok());
  EXPECT_EQ(info("other", "same2").outcome, Outcome::kSucceeded);
}

TEST_P(AcceptAnyTest, APausedOrFullTypeIsPassedOver) {
  ASSERT_TRUE(jobs().add("other", "urgent", "{}", {.priority = -10}).ok());
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  // Its own priority: a retry after an injected fault spreads its pick within a priority.
  ASSERT_TRUE(jobs().add("work", "b", "{}", {.priority = 1}).ok());
  ASSERT_TRUE(jobs().pause_type("other").ok());
  EXPECT_EQ(take({"other", "work"}), "work/a");
  ASSERT_TRUE(jobs().resume_type("other").ok());
  // At max_running: "other" holds one running job (its first), so its second waits. The second
  // has a priority of its own too: with the same one, a retry after an injected conflict may
  // take it first (CI saw it, 3.5% of runs on lmdb_nosync_faults).
  ASSERT_TRUE(jobs().add("other", "urgent2", "{}", {.priority = -9}).ok());
  ASSERT_TRUE(jobs().set_max_running("other", 1).ok());
  EXPECT_EQ(take({"other", "work"}), "other/urgent");
  EXPECT_EQ(take({"other", "work"}), "work/b");
  EXPECT_EQ(jobs().accept_any({"other", "work"}).status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(info("other", "urgent2").state, State::kPending);
}

TEST_P(AcceptAnyTest, AWaitingAcceptAnyWakesWhenAnyOfItsTypesGetsAJob) {
  for (const std::string type : {"other", "work"}) {
    auto waiting = std::async(std::launch::async, [&] {
      return jobs().accept_any({"work", "other"}, {.timeout = 30s, .worker = "w"});
    });
    EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout);
    ASSERT_TRUE(jobs().add(type, "j-" + type, "{}").ok());
    auto job = waiting.get();
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->type, type);
    EXPECT_EQ(info(type, "j-" + type).worker, "w");
  }
  // And it times out when none comes.
  auto none = jobs().accept_any({"work", "other"}, {.timeout = 200ms});
  EXPECT_EQ(none.status().code(), Code::kDeadlineExceeded);
}

TEST_P(AcceptAnyTest, AWaitingAcceptAnyOfOneFullTypeWakesWhenItsRunEnds) {
  // One type, the form every worker of a single type (and a beanstalkd connection watching one
  // tube) takes: at max_running, only a run's end frees a slot, and it rewrites the type's
  // activity token, not its pending one; the wait must watch that too.
  ASSERT_TRUE(jobs().set_max_running("work", 1).ok());
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  auto running = jobs().accept_any({"work"});
  ASSERT_TRUE(running.ok()) << running.status().to_string();
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());
  auto waiting = std::async(std::launch::async, [&] {
    return jobs().accept_any({"work"}, {.timeout = 30s, .worker = "w"});
  });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout);
  EXPECT_EQ(info("work", "b").state, State::kPending);
  ASSERT_TRUE(jobs().finish(*running).ok());
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  auto job = waiting.get();
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "b");
}

TEST_P(AcceptAnyTest, AnAsyncAcceptAnyWakesAndCanBeCancelled) {
  std::promise<Result<Job>> got;
  const uint64_t ticket = jobs().accept_any_async(
      {"work", "other"}, {.timeout = 30s}, [&](Result<Job> job) { got.set_value(std::move(job)); });
  ASSERT_NE(ticket, 0u);
  auto future = got.get_future();
  EXPECT_EQ(future.wait_for(300ms), std::future_status::timeout);
  ASSERT_TRUE(jobs().add("other", "x", "{}").ok());
  auto job = future.get();
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "x");

  std::promise<Result<Job>> cancelled;
  const uint64_t second =
      jobs().accept_any_async({"work", "other"}, {.timeout = 30s},
                              [&](Result<Job> job) { cancelled.set_value(std::move(job)); });
  ASSERT_NE(second, 0u);
  std::this_thread::sleep_for(200ms);  // let its look end and the wait begin
  EXPECT_TRUE(jobs().cancel_accept(second));
  auto outcome = cancelled.get_future();
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(outcome.get().status().code(), Code::kCancelled);
  EXPECT_FALSE(jobs().cancel_accept(second));
  // A job added after the cancel is left for others.
  ASSERT_TRUE(jobs().add("work", "y", "{}").ok());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(info("work", "y").state, State::kPending);
}

TEST_P(AcceptAnyTest, AMissingTypeIsNotFoundAndNothingIsTaken) {
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  auto missing = jobs().accept_any({"work", "nope", "gone"}, {.timeout = 1s});
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos)
      << missing.status().to_string();
  EXPECT_EQ(info("work", "a").state, State::kPending);
  EXPECT_EQ(jobs().accept_any({}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().accept_any({"work", "work"}).status().code(), Code::kInvalidArgument);
  std::vector<std::string> too_many;
  for (size_t i = 0; i <= jobs::kMaxAcceptTypes; ++i) too_many.push_back("t" + std::to_string(i));
  EXPECT_EQ(jobs().accept_any(too_many).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(info("work", "a").state, State::kPending);
}

TEST_P(AcceptAnyTest, AcceptJobTakesAPendingJobWhateverItsTurn) {
  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().add("work", "first", "{}", {.priority = -5}).ok());
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = later}).ok());
  ASSERT_TRUE(jobs().pause_type("work").ok());
  auto job = jobs().accept_job("work", "later", {.worker = "w", .worker_type = "pool"});
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "later");
  EXPECT_EQ(job->attempt, 1u);
  const JobInfo got = info("work", "later");
  EXPECT_EQ(got.state, State::kRunning);
  EXPECT_EQ(got.worker, "w");
  EXPECT_EQ(got.worker_type, "pool");
  EXPECT_EQ(info("work", "first").state, State::kPending);
  // Running or finished (not dead): kWrongState; absent: kNotFound.
  EXPECT_EQ(jobs().accept_job("work", "later").status().code(), Code::kWrongState);
  ASSERT_TRUE(jobs().finish(*job).ok());
  EXPECT_EQ(jobs().accept_job("work", "later").status().code(), Code::kWrongState);
  EXPECT_EQ(jobs().accept_job("work", "nobody").status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().accept_job("nope", "later").status().code(), Code::kNotFound);
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->running, 0u);
  EXPECT_EQ(counts->pending, 1u);
}

TEST_P(AcceptAnyTest, AcceptJobOfADeadJobRerunsIt) {
  ASSERT_NO_FATAL_FAILURE(make_dead("work", "d"));
  auto job = jobs().accept_job("work", "d", {.worker = "w"});
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->attempt, 1u);  // its attempts start over
  const JobInfo got = info("work", "d");
  EXPECT_EQ(got.state, State::kRunning);
  EXPECT_EQ(got.outcome, Outcome::kNone);
  EXPECT_EQ(got.attempts, 1u);
  ASSERT_EQ(got.errors.size(), 1u);  // why it died is kept
  EXPECT_EQ(got.errors[0].message, "boom");
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->dead, 0u);
  EXPECT_EQ(counts->running, 1u);
  ASSERT_TRUE(jobs().finish(*job).ok());
  EXPECT_EQ(info("work", "d").outcome, Outcome::kSucceeded);
}

TEST_P(AcceptAnyTest, FinishAndAcceptHandsOverTheNextJobWithItsWorkerRecorded) {
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  ASSERT_TRUE(jobs().add("other", "b", "{}", {.priority = -1}).ok());
  ASSERT_TRUE(jobs().add("work", "c", "{}").ok());
  // By name: under injected faults a retried accept may take c instead (its pick spreads).
  auto first = jobs().accept_job("work", "a", {.worker = "w1"});
  ASSERT_TRUE(first.ok());
  const AcceptOptions as_w2{.worker = "w2", .worker_type = "pool"};
  auto next = jobs().finish_and_accept(*first, {.result = R"({"n": 1})"}, {"work", "other"}, as_w2);
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->type, "other");
  EXPECT_EQ((*next)->id, "b");
  EXPECT_EQ((*next)->worker, "w2");
  EXPECT_EQ(info("work", "a").outcome, Outcome::kSucceeded);
  EXPECT_EQ(info("work", "a").result, R"({"n":1})");
  EXPECT_EQ(info("other", "b").worker, "w2");
  EXPECT_EQ(info("other", "b").worker_type, "pool");
  // No types: the job's own type, "other", which has none left ("work" has c).
  auto third = jobs().finish_and_accept(**next, {}, {}, as_w2);
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  EXPECT_FALSE(third->has_value());
  EXPECT_EQ(info("other", "b").outcome, Outcome::kSucceeded);
  EXPECT_EQ(info("work", "c").state, State::kPending);
}

TEST_P(AcceptAnyTest, FinishAndAcceptOfTheOwnTypeGivesNulloptWhenNoneIsDue) {
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());
  auto job = jobs().accept("work");
  ASSERT_TRUE(job.ok());
  auto next = jobs().finish_and_accept(*job, {}, {}, {.worker = "w"});
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status().to_string();
  EXPECT_EQ(info("work", (*next)->id).worker, "w");
  auto none = jobs().finish_and_accept(**next, {}, {}, {});
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(info("work", "a").state, State::kFinished);
  EXPECT_EQ(info("work", "b").state, State::kFinished);
}

// While an accept of the type waits here, a finish with next and no time left leaves what is
// due to the waiters, who came first: it finishes and gives nullopt. Here the waiter only takes
// priority <= 0, so the job due stays pending for a later look (the documented corner). On a
// store that is not nonblocking the finish joins the waiters instead (its round commits it),
// behind them and with options of its own: it takes the job the waiter's options exclude.
TEST_P(AcceptAnyTest, FinishAndAcceptWithNoTimeLeftLeavesTheJobDueToWaitingAccepts) {
  ASSERT_TRUE(jobs().add("work", "held", "{}").ok());
  auto job = jobs().accept("work");
  ASSERT_TRUE(job.ok());
  std::promise<Result<Job>> got;
  const uint64_t ticket = jobs().accept_async("work", {.max_priority = 0, .timeout = 30s},
                                              [&](Result<Job> j) { got.set_value(std::move(j)); });
  ASSERT_NE(ticket, 0u);
  std::this_thread::sleep_for(200ms);  // let its look end and the wait begin
  ASSERT_TRUE(jobs().add("work", "due", "{}", {.priority = 5}).ok());
  auto next = jobs().finish_and_accept(*job, {}, {}, {});
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(info("work", "held").state, State::kFinished);
  if (!store().nonblocking()) {
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ((*next)->id, "due");
    EXPECT_EQ(info("work", "due").state, State::kRunning);
    // The waiter, which only takes priority <= 0, still waits.
    EXPECT_EQ(got.get_future().wait_for(100ms), std::future_status::timeout);
    EXPECT_TRUE(jobs().cancel_accept(ticket));
    return;
  }
  EXPECT_FALSE(next->has_value());
  EXPECT_EQ(info("work", "due").state, State::kPending);
  // With nobody waiting, the same call takes it.
  EXPECT_TRUE(jobs().cancel_accept(ticket));
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  ASSERT_TRUE(jobs().add("work", "again", "{}", {.priority = 9}).ok());
  auto again = jobs().accept("work", {.max_priority = 9});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id, "due");
  // And with nobody looking: on a store that is not nonblocking, a finish with no time left
  // also leaves the job to an accept looking in the process, and the round the cancelled
  // waiter's watch started may still be under way (injected latencies make it long).
  std::this_thread::sleep_for(500ms);
  auto taken = jobs().finish_and_accept(*again, {}, {}, {});
  ASSERT_TRUE(taken.ok() && taken->has_value()) << taken.status().to_string();
  EXPECT_EQ((*taken)->id, "again");
}

TEST_P(AcceptAnyTest, FinishAndAcceptWaitsAfterItsCommitForAnAdd) {
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  auto job = jobs().accept("work");
  ASSERT_TRUE(job.ok());
  auto waiting = std::async(std::launch::async, [&] {
    return jobs().finish_and_accept(*job, {}, {"work", "other"}, {.timeout = 30s, .worker = "w"});
  });
  // Finished at once, before any next job comes.
  const auto deadline = kv::Clock::now() + 10s;
  while (info("work", "a").state != State::kFinished && kv::Clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(info("work", "a").state, State::kFinished);
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout);
  ASSERT_TRUE(jobs().add("other", "b", "{}").ok());
  auto next = waiting.get();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status().to_string();
  EXPECT_EQ((*next)->id, "b");
  EXPECT_EQ(info("other", "b").worker, "w");
  // Timed out: nullopt, the job finished all the same.
  auto nothing = jobs().finish_and_accept(**next, {}, {}, {.timeout = 200ms});
  ASSERT_TRUE(nothing.ok()) << nothing.status().to_string();
  EXPECT_FALSE(nothing->has_value());
  EXPECT_EQ(info("other", "b").state, State::kFinished);
}

TEST_P(AcceptAnyTest, AFencedFinishAndAcceptChangesNothing) {
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());
  auto job = jobs().accept_job("work", "a");
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(jobs().cancel("work", "a").ok());  // its worker is fenced out
  auto stale = jobs().finish_and_accept(*job, {}, {}, {.worker = "w"});
  EXPECT_EQ(stale.status().code(), Code::kFailedPrecondition) << stale.status().to_string();
  EXPECT_EQ(info("work", "b").state, State::kPending);
  EXPECT_EQ(info("work", "a").outcome, Outcome::kCancelled);
  // A missing type: kNotFound, and the job is still running.
  auto fresh = jobs().accept_job("work", "b");
  ASSERT_TRUE(fresh.ok());
  auto missing = jobs().finish_and_accept(*fresh, {}, {"work", "nope"}, {});
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(info("work", "b").state, State::kRunning);
}

TEST_P(AcceptAnyTest, FinishAndAcceptAsyncRunsAChainOnceEach) {
  constexpr int kJobs = 30;
  for (int i = 0; i < kJobs; ++i)
    ASSERT_TRUE(jobs().add(i % 2 ? "work" : "other", "j" + std::to_string(i), "{}").ok());
  auto first = jobs().accept_any({"work", "other"}, {.worker = "w"});
  ASSERT_TRUE(first.ok());
  std::set<std::string> seen{first->type + "/" + first->id};
  Job job = *first;
  for (;;) {
    std::promise<Result<std::optional<Job>>> done;
    jobs().finish_and_accept_async(
        job, {}, {"work", "other"}, {.worker = "w"},
        [&](Result<std::optional<Job>> next) { done.set_value(std::move(next)); });
    auto next = done.get_future().get();
    ASSERT_TRUE(next.ok()) << next.status().to_string();
    if (!next->has_value()) break;
    job = **next;
    EXPECT_EQ(info(job.type, job.id).worker, "w");
    EXPECT_TRUE(seen.insert(job.type + "/" + job.id).second) << job.id << " handed out twice";
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kJobs));
  for (const std::string type : {"work", "other"}) {
    auto counts = jobs().count(type);
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->finished, static_cast<uint64_t>(kJobs / 2)) << type;
    EXPECT_EQ(counts->running + counts->pending, 0u) << type;
  }
}

// A cancelled wait for the next job (the HTTP client of a finish with "next" went away) ends
// the call with the finish committed and no job taken: cancelled at once (on etcd while the
// finish still waits for its round), and cancelled while it waits after the commit. A job added
// afterwards stays pending, accepted for nobody.
TEST_P(AcceptAnyTest, ACancelledFinishAndAcceptAsyncFinishesAndTakesNothing) {
  for (const bool at_once : {true, false}) {
    SCOPED_TRACE(at_once ? "cancelled at once" : "cancelled while waiting");
    const std::string id = at_once ? "a" : "b";
    ASSERT_TRUE(jobs().add("work", id, "{}").ok());
    auto job = jobs().accept_job("work", id);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    std::promise<Result<std::optional<Job>>> done;
    const uint64_t ticket = jobs().finish_and_accept_async(
        *job, {}, {}, {.timeout = 30s, .worker = "w"},
        [&](Result<std::optional<Job>> next) { done.set_value(std::move(next)); });
    ASSERT_NE(ticket, 0u);
    auto ended = done.get_future();
    if (!at_once) {
      EXPECT_EQ(ended.wait_for(300ms), std::future_status::timeout) << "nothing due: it waits";
    }
    EXPECT_TRUE(jobs().cancel_accept(ticket));
    ASSERT_EQ(ended.wait_for(10s), std::future_status::ready) << "the cancel ends the wait";
    auto next = ended.get();
    ASSERT_TRUE(next.ok()) << next.status().to_string();
    EXPECT_FALSE(next->has_value());
    EXPECT_EQ(info("work", id).state, State::kFinished);
  }
  ASSERT_TRUE(jobs().add("work", "later", "{}").ok());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(info("work", "later").state, State::kPending);
  // Without a timeout there is no wait, and no ticket.
  ASSERT_TRUE(jobs().add("work", "c", "{}").ok());
  auto job = jobs().accept_job("work", "c");
  ASSERT_TRUE(job.ok());
  std::promise<Result<std::optional<Job>>> done;
  EXPECT_EQ(jobs().finish_and_accept_async(
                *job, {}, {"other"}, {.timeout = 0ms},
                [&](Result<std::optional<Job>> next) { done.set_value(std::move(next)); }),
            0u);
  auto next = done.get_future().get();
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(info("work", "c").state, State::kFinished);
}

// Every commit is reported unknown until one that applied (then faults stop): the retries of
// finish_and_accept recognise their own commit, whether it took a next job or none, so no job
// is lost or taken twice.
TEST_P(AcceptAnyTest, FinishAndAcceptRetriedAfterAnUnknownCommitLosesAndDoublesNothing) {
  auto faulty = std::make_shared<kv::FaultInjectingStore>(raw_ptr(), kv::FaultOptions{});
  auto worker = jobs::Jobs::open(
      faulty, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(worker.ok());
  for (int64_t i = 0; i < 3; ++i) {
    const std::string id(1, static_cast<char>('a' + i));
    ASSERT_TRUE(jobs().add("work", id, "{}", {.priority = i}).ok());
  }
  auto job = (*worker)->accept_job("work", "a");
  ASSERT_TRUE(job.ok());
  for (const bool takes_next : {true, false}) {
    SCOPED_TRACE(takes_next ? "takes the next" : "takes none");
    const uint64_t applied_before = faulty->counts().unknown_applied;
    faulty->set_options({.unknown_result_rate = 1, .seed = 7});
    std::atomic<bool> stop{false};
    std::thread calm([&] {
      while (!stop && faulty->counts().unknown_applied == applied_before)
        std::this_thread::sleep_for(100us);
      faulty->set_options({});
    });
    auto next = (*worker)->finish_and_accept(
        *job, {.result = "1"},
        takes_next ? std::vector<std::string>{} : std::vector<std::string>{"other"},
        {.worker = "w"});
    stop = true;
    calm.join();
    ASSERT_TRUE(next.ok()) << next.status().to_string();
    EXPECT_GT(faulty->counts().unknown_applied, applied_before);
    EXPECT_EQ(info("work", job->id).outcome, Outcome::kSucceeded);
    if (!takes_next) {
      EXPECT_FALSE(next->has_value());
      break;
    }
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ((*next)->id, "b");
    const JobInfo b = info("work", "b");
    EXPECT_EQ(b.state, State::kRunning);
    EXPECT_EQ(b.worker, "w");
    EXPECT_EQ(b.attempts, 1u);
    job = std::move(**next);
  }
  EXPECT_EQ(info("work", "c").state, State::kPending);
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->finished, 2u);
  EXPECT_EQ(counts->running, 0u);
}

// On a store that is not nonblocking (the fault injector is not, whatever it wraps), a
// finish with next rides the accept waiters' round, which commits the finishes of the workers
// it serves with the jobs it takes for them. Commits are slow here, so the finishes that come
// while the first round commits share the next one. A fenced-out worker's finish fails alone:
// it changes nothing and takes nothing, and the others' go on.
TEST_P(AcceptAnyTest, FinishesWithNextShareTheirRoundsCommitAndAFencedOneFailsAlone) {
  auto slow = std::make_shared<kv::FaultInjectingStore>(
      raw_ptr(), kv::FaultOptions{.commit_latency = std::chrono::milliseconds(100)});
  auto worker = jobs::Jobs::open(
      slow, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(worker.ok());
  constexpr size_t kWorkers = 4;
  for (size_t i = 0; i < 2 * kWorkers + 1; ++i) {
    ASSERT_TRUE(
        jobs().add("work", "j" + std::to_string(i), "{}", {.scheduled_time_ms = int64_t(i)}).ok());
  }
  auto running = jobs().accept_many("work", kWorkers + 1, {});
  ASSERT_TRUE(running.ok()) << running.status().to_string();
  ASSERT_EQ(running->size(), kWorkers + 1);
  const Job fenced = running->back();
  ASSERT_TRUE(jobs().cancel("work", fenced.id).ok());
  const uint64_t commits_before = slow->counts().written_commits;
  std::vector<std::future<Result<std::optional<Job>>>> nexts;
  for (const Job& job : *running) {
    nexts.push_back(std::async(std::launch::async, [&worker, job = Job(job)]() mutable {
      return (*worker)->finish_and_accept(job, {.result = "1"}, {},
                                          {.timeout = 10s, .worker = "w"});
    }));
  }
  std::set<std::string> next_ids;
  for (size_t i = 0; i < nexts.size(); ++i) {
    auto next = nexts[i].get();
    const Job& job = (*running)[i];
    if (job.id == fenced.id) {
      EXPECT_EQ(next.status().code(), Code::kFailedPrecondition) << next.status().to_string();
      continue;
    }
    ASSERT_TRUE(next.ok()) << next.status().to_string();
    ASSERT_TRUE(next->has_value()) << job.id << " got no next job";
    EXPECT_TRUE(next_ids.insert((*next)->id).second) << (*next)->id << " handed out twice";
    EXPECT_EQ(info("work", (*next)->id).worker, "w");
    const JobInfo finished = info("work", job.id);
    EXPECT_EQ(finished.outcome, Outcome::kSucceeded) << job.id;
    EXPECT_EQ(finished.result, "1") << job.id;
  }
  EXPECT_EQ(next_ids.size(), kWorkers);
  EXPECT_EQ(info("work", fenced.id).outcome, Outcome::kCancelled);
  const uint64_t commits = slow->counts().written_commits - commits_before;
  // A finish and an accept of its own each would be at least kWorkers + 1 commits.
  EXPECT_LE(commits, kWorkers) << commits << " commits for " << kWorkers
                               << " finishes with their next jobs";
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->running, kWorkers);
  EXPECT_EQ(counts->pending, 0u);
}

// A round's batch holds at most 64 waiters. A finish waiting behind more than that many
// accepts of its kind still rides the round, which finds nothing due for any of them: its
// finish commits and, with no time left, the call ends.
TEST_P(AcceptAnyTest, AFinishBehindAFullBatchOfWaitingAcceptsStillCommits) {
  auto wrapped = std::make_shared<kv::FaultInjectingStore>(raw_ptr(), kv::FaultOptions{});
  auto worker = jobs::Jobs::open(
      wrapped, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  auto job = jobs().accept("work");
  ASSERT_TRUE(job.ok());
  constexpr int kWaiters = 70;
  std::atomic<int> ended{0};
  std::vector<uint64_t> tickets;
  for (int i = 0; i < kWaiters; ++i) {
    tickets.push_back((*worker)->accept_async("work", {.timeout = 60s},
                                              [&](Result<Job>) { ended.fetch_add(1); }));
  }
  std::this_thread::sleep_for(300ms);  // their looks end and their waits begin
  auto next = std::async(std::launch::async, [&worker, job = *job]() mutable {
    return (*worker)->finish_and_accept(job, {}, {}, {});
  });
  ASSERT_EQ(next.wait_for(20s), std::future_status::ready)
      << "a finish behind " << kWaiters << " waiting accepts was not committed";
  auto got = next.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(info("work", "a").outcome, Outcome::kSucceeded);
  EXPECT_EQ(ended.load(), 0);
  for (uint64_t ticket : tickets) EXPECT_TRUE((*worker)->cancel_accept(ticket));
}

INSTANTIATE_TEST_SUITE_P(Backends, AcceptAnyTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
