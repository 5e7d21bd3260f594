// The jobs conformance suite (kvq/jobs.h), on every backend and through the fault injector.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "kvq/tuple.h"
#include "support/backends.h"
#include "support/delivered.h"
#include "support/hooked_store.h"
#include "support/jobs_fixture.h"
#include "support/kv_helpers.h"
#include "support/read_stalls.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::Job;
using jobs::Jobs;
using jobs::State;

class JobsTest : public JobsFixture {
 protected:
  Job accept_now(const std::string& type = "work", AcceptOptions o = {}) {
    auto job = jobs_->accept(type, o);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
  State state_of(const std::string& id, const std::string& type = "work") {
    auto info = jobs_->get(type, id);
    EXPECT_TRUE(info.ok()) << info.status().to_string();
    return info.ok() ? info->state : State::kPending;
  }
  // A second Jobs on the same store (and the same faults), as another process would open.
  std::unique_ptr<Jobs> open_another() {
    std::shared_ptr<kv::Store> store = raw_;
    if (faulty_) store = faulty_;
    auto j = Jobs::open(store, {.key_prefix = "t"});
    EXPECT_TRUE(j.ok()) << j.status().to_string();
    return j.ok() ? std::move(*j) : nullptr;
  }
  // Waits (through a subscription) until the job reaches `state`; its event then.
  Result<jobs::JobEvent> wait_for_state(const std::string& type, const std::string& id,
                                        State state) {
    KVQ_ASSIGN_OR_RETURN(auto sub, jobs_->subscribe(type, id));
    return sub->wait(state, kv::Clock::now() + 10s);
  }
  uint64_t store_version() {
    auto v = kv::run(raw(), [](kv::Transaction& t) { return t.read_version(); });
    EXPECT_TRUE(v.ok());
    return v.ok() ? *v : 0;
  }
  // Every key and value of this test's store (its own prefix): "changed nothing" on every
  // backend, where the version cannot tell on etcd (the cluster's revision, which the other
  // tests sharing the run's etcd move at any time).
  std::vector<std::pair<std::string, std::string>> store_contents() {
    auto rows = kv::run(raw(), [](kv::Transaction& t) {
      return t.get_range(std::string(1, '\x00'), std::string(8, '\xff'));
    });
    EXPECT_TRUE(rows.ok()) << rows.status().to_string();
    std::vector<std::pair<std::string, std::string>> out;
    if (rows.ok()) {
      for (auto& kv : *rows) out.emplace_back(std::move(kv.key), std::move(kv.value));
    }
    return out;
  }
};

// ---- Type timeouts ----

TEST_P(JobsTest, AddRequiresATypeTimeout) {
  EXPECT_EQ(jobs().add("untimed", "a", "{}").code(), Code::kNoTimeout);
  EXPECT_EQ(jobs().get("untimed", "a").status().code(), Code::kNotFound);
}

TEST_P(JobsTest, TypeTimeoutsCanBeSetReadListedAndCleared) {
  ASSERT_TRUE(jobs().set_type_timeout("other", 1500ms).ok());
  EXPECT_EQ(*jobs().get_type_timeout("other"), 1500ms);
  EXPECT_EQ(*jobs().types(), (std::vector<std::string>{"other", "work"}));
  ASSERT_TRUE(jobs().clear_type_timeout("other").ok());
  EXPECT_EQ(jobs().get_type_timeout("other").status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().clear_type_timeout("other").code(), Code::kNotFound);
  EXPECT_EQ(jobs().set_type_timeout("x", 0ms).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_type_timeout("x", -5ms).code(), Code::kInvalidArgument);
}

// A misspelt type is reported, not served as an empty queue: a worker on it would idle for ever.
TEST_P(JobsTest, CallsNamingATypeThatDoesNotExistAreNotFound) {
  auto expect_missing = [](const Status& s, const char* call) {
    EXPECT_EQ(s.code(), Code::kNotFound) << call << ": " << s.to_string();
    EXPECT_NE(s.message().find("'emial' does not exist"), std::string::npos)
        << call << ": " << s.to_string();
  };
  expect_missing(jobs().list("emial").status(), "list");
  expect_missing(jobs().pending_count("emial").status(), "pending_count");
  expect_missing(jobs().count("emial").status(), "count");
  expect_missing(jobs().accept("emial").status(), "accept, not waiting");
  const auto before_wait = kv::Clock::now();
  expect_missing(jobs().accept("emial", {.timeout = 5s}).status(), "accept, waiting");
  expect_missing(jobs().accept_many("emial", 3, {.timeout = 5s}).status(), "accept_many");
  EXPECT_LT(kv::Clock::now() - before_wait, 4s) << "the accepts did not wait for their timeouts";
  auto accepted = std::make_shared<Delivered<Result<Job>>>();
  jobs().accept_async("emial", {.timeout = 5s}, deliver_to(accepted));
  ASSERT_TRUE(accepted->wait_for(1, 4s)) << "accept_async waited for its timeout";
  expect_missing(accepted->values()[0].status(), "accept_async");
  auto due = std::make_shared<Delivered<Result<std::vector<Job>>>>();
  jobs().accept_due_async("emial", 2, {}, deliver_to(due));
  ASSERT_TRUE(due->wait_for(1));
  expect_missing(due->values()[0].status(), "accept_due_async");
  auto in_txn = kv::run(raw(), [&](kv::Transaction& txn) { return jobs().accept(txn, "emial"); });
  expect_missing(in_txn.status(), "accept in a transaction");

  // A type that exists but has nothing due answers as before.
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  ASSERT_TRUE(jobs().list("work").ok());
  EXPECT_TRUE(jobs().list("work")->jobs.empty());
  EXPECT_EQ(*jobs().pending_count("work"), 0u);
  auto in_work = kv::run(raw(), [&](kv::Transaction& txn) { return jobs().accept(txn, "work"); });
  EXPECT_EQ(in_work.status().code(), Code::kNotFound);
  EXPECT_NE(in_work.status().message().find("is due"), std::string::npos)
      << in_work.status().to_string();
}

TEST_P(JobsTest, DeletingATypeThatHasJobsIsRefusedAndChangesNothing) {
  ASSERT_TRUE(jobs().set_type_timeout("busy", 60s).ok());
  ASSERT_TRUE(jobs().add("busy", "p1", "{}").ok());
  ASSERT_TRUE(jobs().add("busy", "p2", "{}").ok());
  ASSERT_TRUE(jobs().add("busy", "r1", "{}", {.priority = -1}).ok());
  Job running = accept_now("busy");
  ASSERT_EQ(running.id, "r1");
  Status refused = jobs().clear_type_timeout("busy");
  EXPECT_EQ(refused.code(), Code::kTypeHasJobs) << refused.to_string();
  EXPECT_NE(refused.message().find("2 pending, 1 running, 0 finished"), std::string::npos)
      << refused.to_string();
  EXPECT_NE(refused.message().find("remove_all_jobs"), std::string::npos) << refused.to_string();
  EXPECT_EQ(*jobs().get_type_timeout("busy"), 60s) << "the type is still there";
  EXPECT_TRUE(jobs().update(running).ok()) << "its running job still runs";
  EXPECT_EQ(jobs().list("busy")->jobs.size(), 3u);
}

// More jobs than one batch, in every state, one running and one watched: all go as remove()
// removes one, and the type can then be deleted and made again empty.
TEST_P(JobsTest, RemoveAllJobsRemovesEveryJobOfTheTypeInBatches) {
  ASSERT_TRUE(jobs().set_type_timeout("bulk", 60s).ok());
  ASSERT_TRUE(jobs().add("work", "other", "{}").ok());
  constexpr int kJobs = 1200;
  for (int start = 0; start < kJobs; start += 200) {
    Status added = kv::run(raw(), [&](kv::Transaction& txn) -> Status {
      for (int i = start; i < start + 200; ++i) {
        char id[16];
        std::snprintf(id, sizeof id, "j%04d", i);
        // Every third in an hour, so not every pending job is due.
        std::optional<int64_t> at;
        if (i % 3 == 0) at = wall_ms() + 3'600'000;
        KVQ_RETURN_IF_ERROR(jobs().add(txn, "bulk", id, "{}", {.scheduled_time_ms = at}));
      }
      return Status::OK();
    });
    ASSERT_TRUE(added.ok()) << added.to_string();
  }
  Job finished = accept_now("bulk");
  ASSERT_TRUE(jobs().finish(finished).ok());
  Job running = accept_now("bulk", {.worker = "w1"});
  auto watched = jobs().subscribe("bulk", "j1000");
  ASSERT_TRUE(watched.ok()) << watched.status().to_string();

  auto removed = jobs().remove_all_jobs("bulk");
  ASSERT_TRUE(removed.ok()) << removed.status().to_string();
  if (a_commit_result_was_hidden()) {
    EXPECT_LE(*removed, uint64_t{kJobs})
        << "a batch whose commit result was unknown may go uncounted";
  } else {
    EXPECT_EQ(*removed, uint64_t{kJobs});
  }
  EXPECT_TRUE(jobs().list("bulk")->jobs.empty());
  auto counts = jobs().count("bulk");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending + counts->running + counts->finished, 0u) << "no index entry is left";
  EXPECT_EQ(*jobs().pending_count("bulk", {.max_scheduled_time_ms = INT64_MAX}), 0u);
  EXPECT_EQ(jobs().update(running).status().code(), Code::kFailedPrecondition)
      << "the running worker is halted";
  EXPECT_EQ(jobs().finish(running).code(), Code::kFailedPrecondition);
  EXPECT_EQ(*jobs().release_worker("", "w1"), 0u) << "the worker index no longer lists the job";
  const auto deadline = kv::Clock::now() + 10s;
  auto gone = (*watched)->next(deadline);
  while (gone.ok() && gone->found) gone = (*watched)->next(deadline);
  ASSERT_TRUE(gone.ok()) << gone.status().to_string();
  EXPECT_FALSE(gone->found) << "the subscriber hears the job is gone";
  EXPECT_EQ(state_of("other"), State::kPending) << "other types keep their jobs";

  ASSERT_TRUE(jobs().clear_type_timeout("bulk").ok());
  ASSERT_TRUE(jobs().set_type_timeout("bulk", 60s).ok());
  EXPECT_TRUE(jobs().list("bulk")->jobs.empty()) << "no old job comes back with the type";
  EXPECT_EQ(jobs().get("bulk", "j0001").status().code(), Code::kNotFound);
  EXPECT_EQ(*jobs().remove_all_jobs("bulk"), 0u);
  EXPECT_EQ(*jobs().remove_all_jobs("nosuchtype"), 0u) << "works on a type that does not exist";
}

TEST_P(JobsTest, AFinishedRetentionIsKeptWhenTheTimeoutChangesAndCanBeCleared) {
  EXPECT_EQ(jobs().set_finished_retention("untimed", 1h).code(), Code::kNotFound);
  EXPECT_EQ(jobs().set_finished_retention("work", 0ms).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_finished_retention("work", -1ms).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().get_type("work")->finished_retention, std::nullopt);

  ASSERT_TRUE(jobs().set_finished_retention("work", 1h).ok());
  ASSERT_TRUE(jobs().set_type_timeout("work", 30s).ok());
  auto settings = jobs().get_type("work");
  ASSERT_TRUE(settings.ok()) << settings.status().to_string();
  EXPECT_EQ(settings->timeout, 30s);
  EXPECT_EQ(settings->finished_retention, std::optional<jobs::Millis>(1h));
  EXPECT_EQ(*jobs().get_type_timeout("work"), 30s);

  ASSERT_TRUE(jobs().set_finished_retention("work", std::nullopt).ok());
  EXPECT_EQ(jobs().get_type("work")->finished_retention, std::nullopt);
  EXPECT_EQ(jobs().get_type("untimed").status().code(), Code::kNotFound);
}

TEST_P(JobsTest, MaxLostRunsIsKeptWithTheOtherSettingsAndCanBeCleared) {
  EXPECT_EQ(jobs().set_max_lost_runs("untimed", 3).code(), Code::kNotFound);
  EXPECT_EQ(jobs().set_max_lost_runs("work", 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_max_lost_runs("work", jobs::kMaxLostRunsLimit + 1).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().get_type("work")->max_lost_runs, std::nullopt);

  ASSERT_TRUE(jobs().set_max_lost_runs("work", 3).ok());
  ASSERT_TRUE(jobs().set_type_timeout("work", 30s).ok());
  ASSERT_TRUE(jobs().set_finished_retention("work", 1h).ok());
  auto settings = jobs().get_type("work");
  ASSERT_TRUE(settings.ok()) << settings.status().to_string();
  EXPECT_EQ(settings->timeout, 30s);
  EXPECT_EQ(settings->finished_retention, std::optional<jobs::Millis>(1h));
  EXPECT_EQ(settings->max_lost_runs, std::optional<uint32_t>(3));

  ASSERT_TRUE(jobs().set_finished_retention("work", std::nullopt).ok());
  EXPECT_EQ(jobs().get_type("work")->max_lost_runs, std::optional<uint32_t>(3));
  ASSERT_TRUE(jobs().set_max_lost_runs("work", std::nullopt).ok());
  EXPECT_EQ(jobs().get_type("work")->max_lost_runs, std::nullopt);
  EXPECT_EQ(jobs().get_type("work")->timeout, 30s);
}

// ---- Producers ----

TEST_P(JobsTest, AddedJobIsPendingWithItsData) {
  ASSERT_TRUE(jobs().add("work", "j1", R"({"n": 1})", {.priority = 2}).ok());
  auto info = jobs().get("work", "j1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_EQ(info->data, R"({"n":1})");
  EXPECT_EQ(info->priority, 2);
  EXPECT_NEAR(static_cast<double>(info->scheduled_time_ms), static_cast<double>(wall_ms()), 5000);
}

TEST_P(JobsTest, AddToPendingJobReplacesDataTimeAndPriority) {
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":1})").ok());
  ASSERT_TRUE(jobs().add("work", "j", R"({"v":2})", {.scheduled_time_ms = 5, .priority = -1}).ok());
  auto info = jobs().get("work", "j");
  EXPECT_EQ(info->data, R"({"v":2})");
  EXPECT_EQ(info->scheduled_time_ms, 5);
  EXPECT_EQ(info->priority, -1);
  EXPECT_EQ(*jobs().pending_count("work"), 1u) << "still exactly one pending entry";
}

TEST_P(JobsTest, ReAddingAnUnchangedJobWritesNothing) {
  ASSERT_TRUE(jobs().add("work", "same", R"({"a": 1, "b": 2})").ok());
  const uint64_t before = store_version();
  const auto first = jobs().get("work", "same");
  ASSERT_TRUE(first.ok());
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(jobs().add("work", "same", "{\"a\":1,\n \"b\":\t2}").ok());
  const auto after = jobs().get("work", "same");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->updated_at_ms, first->updated_at_ms);
  EXPECT_EQ(after->data, first->data);
  // etcd's version is the cluster's revision, which the other tests sharing the run's etcd move
  // at any time; on LMDB the version belongs to this test's store alone.
  if (GetParam().backend.name.rfind("lmdb", 0) == 0) {
    EXPECT_EQ(store_version(), before) << "an add that changes nothing must not commit writes";
  }
}

TEST_P(JobsTest, AddWhileRunningMarksResubmittedAndKeepsData) {
  ASSERT_TRUE(jobs().add("work", "r", R"({"v":1})").ok());
  Job job = accept_now();
  ASSERT_TRUE(jobs().add("work", "r", R"({"v":2})").ok());
  auto info = jobs().get("work", "r");
  EXPECT_EQ(info->state, State::kRunning);
  EXPECT_TRUE(info->resubmitted);
  EXPECT_EQ(info->data, R"({"v":1})");
  auto upd = jobs().update(job);
  ASSERT_TRUE(upd.ok());
  EXPECT_TRUE(upd->resubmitted);
  ASSERT_TRUE(jobs().finish(job, R"({"done":1})").ok());
  info = jobs().get("work", "r");
  EXPECT_EQ(info->state, State::kPending) << "a resubmitted job runs again";
  EXPECT_FALSE(info->resubmitted);
  EXPECT_EQ(info->data, R"({"done":1})");
}

TEST_P(JobsTest, AddToFinishedJobMakesItPendingWithTheNewData) {
  ASSERT_TRUE(jobs().add("work", "f", R"({"v":1})").ok());
  Job job = accept_now();
  ASSERT_TRUE(jobs().finish(job, R"({"result":1})").ok());
  EXPECT_EQ(state_of("f"), State::kFinished);
  ASSERT_TRUE(jobs().add("work", "f", R"({"v":3})").ok());
  auto info = jobs().get("work", "f");
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_EQ(info->data, R"({"v":3})");
}

TEST_P(JobsTest, ABatchAddRetriedAfterAnUnknownCommitDoesNotRunAJobAcceptedMeanwhileTwice) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "add_many_async" : "add_many");
    const std::string type = async ? "batch_async" : "batch";
    ASSERT_TRUE(jobs().set_type_timeout(type, 60s).ok());
    // Every commit is reported unknown until one that applied; before the retry that follows it
    // (the next transaction begun), another process accepts one of the batch's jobs.
    auto faulty = std::make_shared<kv::FaultInjectingStore>(
        raw_ptr(), kv::FaultOptions{.unknown_result_rate = 1, .seed = 7});
    std::mutex mu;
    std::optional<Job> taken;
    auto hooked = std::make_shared<HookedStore>(faulty, [&] {
      std::lock_guard lock(mu);
      if (taken || faulty->counts().unknown_applied == 0) return;
      faulty->set_options({});
      auto job = jobs().accept(type);
      ASSERT_TRUE(job.ok()) << job.status().to_string();
      taken = *job;
    });
    auto producer = Jobs::open(
        hooked, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
    ASSERT_TRUE(producer.ok());
    const std::vector<jobs::NewJob> batch = {{"b1", R"({"n":1})", {}}, {"b2", R"({"n":2})", {}}};
    Status added;
    if (async) {
      std::promise<Status> done;
      (*producer)->add_many_async(type, batch, [&](Result<jobs::AddManyResult> s) {
        done.set_value(s.ok() ? Status::OK() : s.status());
      });
      added = done.get_future().get();
    } else {
      added = (*producer)->add_many(type, batch).status();
    }
    ASSERT_TRUE(added.ok()) << added.to_string();
    ASSERT_TRUE(taken.has_value()) << "no commit was reported unknown after applying";
    auto info = jobs().get(type, taken->id);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->state, State::kRunning);
    EXPECT_FALSE(info->resubmitted) << "the retry re-added a job its own commit had added";
    ASSERT_TRUE(jobs().finish(*taken).ok());
    EXPECT_EQ(state_of(taken->id, type), State::kFinished) << "the job would run a second time";
    EXPECT_EQ(*jobs().pending_count(type), 1u) << "the other job of the batch is pending once";
  }
}

TEST_P(JobsTest, AddManyAddsAllOrNothingAndNamesBadInput) {
  EXPECT_EQ(jobs().add_many("work", {}).code(), Code::kInvalidArgument);
  Status bad = jobs().add_many("work", {{"ok", "{}", {}}, {"", "{}", {}}}).status();
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().get("work", "ok").status().code(), Code::kNotFound)
      << "nothing of a rejected batch is added";
  EXPECT_EQ(jobs().add_many("untimed", {{"a", "{}", {}}}).code(), Code::kNoTimeout);
  ASSERT_TRUE(
      jobs().add_many("work", {{"m1", R"({"v":1})", {.priority = 3}}, {"m2", "{}", {}}}).ok());
  EXPECT_EQ(jobs().get("work", "m1")->priority, 3);
  EXPECT_EQ(*jobs().pending_count("work"), 2u);
}

TEST_P(JobsTest, RemoveDeletesAJobInAnyStateAndHaltsItsWorker) {
  ASSERT_TRUE(jobs().add("work", "p", "{}").ok());
  ASSERT_TRUE(jobs().remove("work", "p").ok());
  EXPECT_EQ(jobs().get("work", "p").status().code(), Code::kNotFound);
  EXPECT_EQ(*jobs().pending_count("work"), 0u);

  ASSERT_TRUE(jobs().add("work", "r", "{}").ok());
  Job job = accept_now();
  ASSERT_TRUE(jobs().remove("work", "r").ok());
  EXPECT_EQ(jobs().update(job).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().finish(job).code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().remove("work", "r").code(), Code::kNotFound);
}

TEST_P(JobsTest, ListPagesThroughJobsAndFiltersByStateAndWorker) {
  for (int i = 0; i < 25; ++i)
    ASSERT_TRUE(jobs().add("work", "j" + std::to_string(100 + i), "{}").ok());
  Job a = accept_now("work", {.worker = "w-a"});
  std::set<std::string> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto page = jobs().list("work", {.limit = 10, .cursor = cursor});
    ASSERT_TRUE(page.ok()) << page.status().to_string();
    for (auto& j : page->jobs) EXPECT_TRUE(seen.insert(j.id).second) << "listed twice: " << j.id;
    cursor = page->next_cursor;
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(seen.size(), 25u);
  auto running = jobs().list("work", {.state = State::kRunning});
  ASSERT_EQ(running->jobs.size(), 1u);
  EXPECT_EQ(running->jobs[0].id, a.id);
  EXPECT_EQ(running->jobs[0].worker, "w-a");
  EXPECT_EQ(jobs().list("work", {.worker = std::string("w-a")})->jobs.size(), 1u);
  EXPECT_EQ(jobs().list("work", {.state = State::kPending})->jobs.size(), 24u);
}

TEST_P(JobsTest, PendingCountCountsDueJobsUpToItsLimit) {
  const int64_t later = wall_ms() + 3'600'000;
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(jobs().add("work", "now" + std::to_string(i), "{}", {.priority = i % 2}).ok());
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = later}).ok());
  EXPECT_EQ(*jobs().pending_count("work"), 5u);
  EXPECT_EQ(*jobs().pending_count("work", {.max_scheduled_time_ms = later}), 6u);
  EXPECT_EQ(*jobs().pending_count("work", {.limit = 3}), 3u);
}

TEST_P(JobsTest, CountReportsEveryStateFromTheIndexes) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(jobs().add("work", "n" + std::to_string(i), "{}").ok());
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  Job a = accept_now();
  Job b = accept_now();
  ASSERT_TRUE(jobs().finish(b).ok());
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok()) << counts.status().to_string();
  EXPECT_EQ(counts->pending, 3u) << "two due and one scheduled later";
  EXPECT_EQ(counts->running, 1u);
  EXPECT_EQ(counts->finished, 1u);
  EXPECT_EQ(jobs().count("work", 2)->pending, 2u) << "counted up to the limit";
  ASSERT_TRUE(jobs().add("work", b.id, "{}").ok());
  EXPECT_EQ(jobs().count("work")->finished, 0u) << "added again, so pending";
  EXPECT_EQ(jobs().count("work")->pending, 4u);
}

// ---- Accept ----

TEST_P(JobsTest, AcceptHandsOutADueJobWithAFreshLock) {
  ASSERT_TRUE(jobs().add("work", "a", R"({"x":1})").ok());
  Job job = accept_now("work", {.worker = "me"});
  EXPECT_EQ(job.id, "a");
  EXPECT_EQ(job.data, R"({"x":1})");
  EXPECT_FALSE(job.lock.empty());
  auto info = jobs().get("work", "a");
  EXPECT_EQ(info->state, State::kRunning);
  EXPECT_EQ(info->worker, "me");
  EXPECT_EQ(info->attempts, 1u);
}

TEST_P(JobsTest, AcceptSkipsJobsScheduledInTheFuture) {
  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = later}).ok());
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  auto job = jobs().accept("work", {.max_scheduled_time_ms = later});
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->id, "later");
}

TEST_P(JobsTest, AcceptTakesHighestPriorityFirstThenEarliestScheduled) {
  ASSERT_TRUE(jobs().add("work", "low-early", "{}", {.scheduled_time_ms = 1, .priority = 5}).ok());
  ASSERT_TRUE(jobs().add("work", "high-late", "{}", {.scheduled_time_ms = 30, .priority = 0}).ok());
  ASSERT_TRUE(
      jobs().add("work", "high-early", "{}", {.scheduled_time_ms = 20, .priority = 0}).ok());
  ASSERT_TRUE(jobs().add("work", "urgent", "{}", {.scheduled_time_ms = 99, .priority = -1}).ok());
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) order.push_back(accept_now().id);
  // accept_spread picks at random among the first due jobs *of one priority*; with one job per
  // (priority, time) here the order is exact except within priority 0.
  EXPECT_EQ(order[0], "urgent");
  EXPECT_EQ(std::set<std::string>(order.begin() + 1, order.begin() + 3),
            (std::set<std::string>{"high-early", "high-late"}));
  EXPECT_EQ(order[3], "low-early");
}

TEST_P(JobsTest, AcceptHonoursMaxPriority) {
  ASSERT_TRUE(jobs().add("work", "low", "{}", {.priority = 9}).ok());
  EXPECT_EQ(jobs().accept("work", {.max_priority = 5}).status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(accept_now("work", {.max_priority = 9}).id, "low");
}

TEST_P(JobsTest, AcceptWithTimeoutZeroNeverBlocks) {
  const auto start = kv::Clock::now();
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  EXPECT_LT(kv::Clock::now() - start, 1s);
}

TEST_P(JobsTest, AcceptTimeoutIsADeadlineNotRestartedByWakeUps) {
  // Adds of future jobs wake the waiter without giving it anything.
  std::atomic<bool> stop{false};
  std::thread noise([&] {
    for (int i = 0; !stop && i < 200; ++i) {
      jobs()
          .add("work", "future" + std::to_string(i), "{}",
               {.scheduled_time_ms = wall_ms() + 3'600'000})
          .ignore();
      std::this_thread::sleep_for(20ms);
    }
  });
  const auto start = kv::Clock::now();
  auto job = jobs().accept("work", {.timeout = 400ms});
  const auto waited = kv::Clock::now() - start;
  stop = true;
  noise.join();
  EXPECT_EQ(job.status().code(), Code::kDeadlineExceeded);
  EXPECT_GE(waited, 390ms);
  EXPECT_LT(waited, 2s);
}

TEST_P(JobsTest, BlockingAcceptIsWokenByAnAdd) {
  std::thread producer([&] {
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(jobs().add("work", "wake", "{}").ok());
  });
  const auto start = kv::Clock::now();
  auto job = jobs().accept("work", {.timeout = 10s});
  producer.join();
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "wake");
  EXPECT_LT(kv::Clock::now() - start, 5s);
}

TEST_P(JobsTest, BlockingAcceptWakesWhenADelayedJobBecomesDue) {
  ASSERT_TRUE(jobs().add("work", "soon", "{}", {.scheduled_time_ms = wall_ms() + 300}).ok());
  const auto start = kv::Clock::now();
  auto job = jobs().accept("work", {.timeout = 10s});
  const auto waited = kv::Clock::now() - start;
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s) << "woken by the due time, not by the accept deadline";
}

TEST_P(JobsTest, AnAddRacingAnAcceptsOwnLookStillWakesIt) {
  // The add lands before, during or after the accept's own look, or after it queued to wait: in
  // every case it must reach the accept well before the accept's deadline.
  std::mt19937 random(42);
  for (int i = 0; i < 60; ++i) {
    const std::string id = "race" + std::to_string(i);
    const auto delay = std::chrono::microseconds(random() % 400);
    std::thread adder([&] {
      std::this_thread::sleep_for(delay);
      EXPECT_TRUE(jobs().add("work", id, "{}").ok());
    });
    const auto start = kv::Clock::now();
    auto job = jobs().accept("work", {.timeout = 10s});
    const auto waited = kv::Clock::now() - start;
    adder.join();
    ASSERT_TRUE(job.ok()) << id << ": " << job.status().to_string();
    EXPECT_EQ(job->id, id);
    EXPECT_LT(waited, 3s) << id << " was not woken by its add";
    ASSERT_TRUE(jobs().finish(*job).ok());
  }
}

TEST_P(JobsTest, ConcurrentAcceptorsNeverGetTheSameJob) {
  constexpr int kJobs = 200, kThreads = 8;
  for (int i = 0; i < kJobs; ++i)
    ASSERT_TRUE(jobs().add("work", "c" + std::to_string(i), "{}").ok());
  std::mutex mu;
  std::map<std::string, int> taken;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (;;) {
        auto job = jobs().accept("work", {.timeout = 0ms});
        if (!job.ok()) {
          EXPECT_EQ(job.status().code(), Code::kDeadlineExceeded) << job.status().to_string();
          return;
        }
        std::lock_guard lock(mu);
        ++taken[job->id];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(taken.size(), static_cast<size_t>(kJobs));
  for (auto& [id, n] : taken) EXPECT_EQ(n, 1) << id << " was accepted " << n << " times";
}

// Waiting accepts that overlap (on etcd the later ones leave their look to the accept waiters'
// round: jobs_impl.h, joins_round) still fail at once for a type that does not exist, and each
// gets a job of its own when jobs come.
TEST_P(JobsTest, OverlappingWaitingAcceptsFailAtOnceForAMissingTypeAndEachGetsAJob) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<Status> missing(kThreads);
  const auto start = kv::Clock::now();
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back(
        [&, t] { missing[t] = jobs().accept("emial", {.timeout = 10s}).status(); });
  for (auto& th : threads) th.join();
  EXPECT_LT(kv::Clock::now() - start, 8s) << "an accept waited for its timeout";
  for (const Status& s : missing) EXPECT_EQ(s.code(), Code::kNotFound) << s.to_string();

  threads.clear();
  std::vector<std::optional<Result<Job>>> got(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { got[t] = jobs().accept("work", {.timeout = 20s}); });
  std::this_thread::sleep_for(200ms);  // most of them wait by now
  for (int i = 0; i < kThreads; ++i)
    ASSERT_TRUE(jobs().add("work", "o" + std::to_string(i), "{}").ok());
  for (auto& th : threads) th.join();
  std::set<std::string> ids;
  for (const auto& job : got) {
    ASSERT_TRUE(job && job->ok()) << (job ? job->status().to_string() : "no answer");
    ids.insert((*job)->id);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads)) << "a job went to two accepts";
}

TEST_P(JobsTest, AcceptManyTakesEveryDueJobInOneCommit) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(jobs().add("work", "m" + std::to_string(i), "{}").ok());
  ASSERT_TRUE(
      jobs().add("work", "future", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  const uint64_t before = store_version();
  auto got = jobs().accept_many("work", 10, {.worker = "batcher"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  // etcd's version is the cluster's revision, which other tests sharing the run's etcd move.
  const bool own_version = GetParam().backend.name.rfind("lmdb", 0) == 0;
  if (own_version) {
    EXPECT_EQ(store_version(), before + 1) << "one transaction for the whole batch";
  }
  std::set<std::string> ids, locks;
  for (auto& job : *got) {
    ids.insert(job.id);
    locks.insert(job.lock);
    EXPECT_EQ(job.worker, "batcher");
    auto info = jobs().get("work", job.id);
    EXPECT_EQ(info->state, State::kRunning);
    EXPECT_EQ(info->worker, "batcher");
    EXPECT_TRUE(jobs().update(job).ok()) << "each lock is live: " << job.id;
  }
  EXPECT_EQ(ids, (std::set<std::string>{"m0", "m1", "m2", "m3", "m4"}));
  EXPECT_EQ(locks.size(), 5u);
  EXPECT_EQ(state_of("future"), State::kPending);
}

TEST_P(JobsTest, AcceptManyStopsAtMaxCountAndTakesPrioritiesInOrder) {
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(jobs().add("work", "hi" + std::to_string(i), "{}", {.priority = 0}).ok());
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(jobs().add("work", "lo" + std::to_string(i), "{}", {.priority = 5}).ok());
  auto got = jobs().accept_many("work", 4);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), 4u);
  int high = 0;
  for (const auto& job : *got) high += job.id.rfind("hi", 0) == 0;
  EXPECT_EQ(high, 3) << "every priority-0 job before any priority-5 one";
  EXPECT_EQ(jobs().pending_count("work").value_or(0), 2u);
  auto capped = jobs().accept_many("work", 10, {.max_priority = 4});
  EXPECT_EQ(capped.status().code(), Code::kDeadlineExceeded) << "only priority 5 is left";
}

TEST_P(JobsTest, AcceptManyRejectsBadCountsAndNeverBlocksWithoutTimeout) {
  ASSERT_TRUE(jobs().add("work", "x", "{}").ok());
  EXPECT_EQ(jobs().accept_many("work", 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().accept_many("work", 1001).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(state_of("x"), State::kPending) << "a rejected call takes nothing";
  ASSERT_TRUE(jobs().accept_many("work", 1).ok());
  const auto start = kv::Clock::now();
  EXPECT_EQ(jobs().accept_many("work", 3).status().code(), Code::kDeadlineExceeded);
  EXPECT_LT(kv::Clock::now() - start, 1s);
}

TEST_P(JobsTest, AcceptManyWaitsForTheFirstThenTakesTheRestOfTheBurst) {
  std::thread producer([&] {
    std::this_thread::sleep_for(150ms);
    Status s = kv::run(raw(), [&](kv::Transaction& txn) -> Status {
      for (int i = 0; i < 3; ++i)
        KVQ_RETURN_IF_ERROR(jobs().add(txn, "work", "b" + std::to_string(i), "{}"));
      return Status::OK();
    });
    EXPECT_TRUE(s.ok()) << s.to_string();
  });
  auto got = jobs().accept_many("work", 10, {.timeout = 10s});
  producer.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  std::set<std::string> ids;
  for (const auto& job : *got) ids.insert(job.id);
  EXPECT_EQ(ids, (std::set<std::string>{"b0", "b1", "b2"})) << "the three were added together";
}

TEST_P(JobsTest, WaitingAcceptsAreServedTogetherWithTheirOwnWorkerNames) {
  constexpr int kWaiters = 6;
  std::vector<std::thread> threads;
  std::vector<Result<Job>> got(kWaiters, Cancelled("not run"));
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      got[i] = jobs().accept("work", {.timeout = 20s, .worker = "w" + std::to_string(i)});
    });
  }
  std::this_thread::sleep_for(500ms);  // all of them waiting
  const uint64_t before = store_version();
  Status s = kv::run(raw(), [&](kv::Transaction& txn) -> Status {
    for (int i = 0; i < kWaiters; ++i)
      KVQ_RETURN_IF_ERROR(jobs().add(txn, "work", "burst" + std::to_string(i), "{}"));
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (auto& th : threads) th.join();
  std::set<std::string> ids;
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status().to_string();
    ids.insert(got[i]->id);
    EXPECT_EQ(got[i]->worker, "w" + std::to_string(i));
    EXPECT_EQ(jobs().get("work", got[i]->id)->worker, "w" + std::to_string(i))
        << "the row names its own taker";
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kWaiters));
  // One commit for the add; the waiters' jobs in one more (two if a waiter was slow to queue),
  // where serving them one by one took six. (etcd's revision is shared with other tests.)
  if (GetParam().backend.name.rfind("lmdb", 0) == 0) {
    EXPECT_LE(store_version() - before, 3u);
  }
}

// ---- Workers ----

// ---- Finished retention ----

// Keys of the finished index (docs/design/data-model.md, subspace 9), read raw.
size_t finished_index_entries(kv::Store& store, const std::string& type) {
  auto [begin, end] = Subspace("t").sub(Tuple{int64_t{9}}).range(Tuple{type});
  auto rows =
      kv::run(store, [&b = begin, &e = end](kv::Transaction& txn) { return txn.get_range(b, e); });
  EXPECT_TRUE(rows.ok()) << rows.status().to_string();
  return rows.ok() ? rows->size() : 0;
}

TEST_P(JobsTest, FinishedJobsAreRemovedOnceTheirRetentionHasPassed) {
  ASSERT_TRUE(jobs().set_type_timeout("brief", 60s).ok());
  // Four sweep periods (250 ms), so that a sweep ignoring the retention would show.
  ASSERT_TRUE(jobs().set_finished_retention("brief", 1s).ok());
  ASSERT_TRUE(jobs().add("brief", "done", "{}").ok());
  ASSERT_TRUE(
      jobs().add("brief", "waiting", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  ASSERT_TRUE(jobs().add("work", "kept", "{}").ok());
  Job kept = accept_now("work");
  ASSERT_TRUE(jobs().finish(kept).ok());

  Job job = accept_now("brief");
  ASSERT_EQ(job.id, "done");
  ASSERT_TRUE(jobs().finish(job, R"({"r":1})").ok());
  const auto finished = kv::Clock::now();
  EXPECT_EQ(finished_index_entries(raw(), "brief"), 1u);

  // Subscriptions end at finished, so this polls.
  const auto removed_by = kv::Clock::now() + 10s;
  while (jobs().get("brief", "done").ok() && kv::Clock::now() < removed_by)
    std::this_thread::sleep_for(5ms);
  const auto kept_for = kv::Clock::now() - finished;
  EXPECT_GE(kept_for, 1s - 50ms) << "removed before its retention passed";
  EXPECT_LT(kept_for, 5s) << "took far longer than the documented sweep period";
  EXPECT_EQ(jobs().get("brief", "done").status().code(), Code::kNotFound);
  EXPECT_EQ(finished_index_entries(raw(), "brief"), 0u);

  EXPECT_EQ(state_of("waiting", "brief"), State::kPending) << "retention touched a pending job";
  EXPECT_EQ(state_of("kept"), State::kFinished) << "a type without retention lost a finished job";
  // The counter counts removals whose commit the monitor saw succeed. Under the fault
  // injector a removal can commit and be reported unknown; its retry then finds nothing to do,
  // and the removal goes uncounted (seen once in 11 runs), so only an exact store promises 1.
  const auto counted_by = kv::Clock::now() + 5s;
  while (jobs().stats().removed_by_retention == 0 && kv::Clock::now() < counted_by)
    std::this_thread::sleep_for(5ms);
  EXPECT_LE(jobs().stats().removed_by_retention, 1u) << "counted more removals than there were";
  if (!a_commit_result_was_hidden()) {
    EXPECT_EQ(jobs().stats().removed_by_retention, 1u);
  }
}

TEST_P(JobsTest, AFinishedJobAddedAgainIsKeptAndExpiresFromItsNextFinish) {
  ASSERT_TRUE(jobs().set_type_timeout("brief", 60s).ok());
  ASSERT_TRUE(jobs().add("brief", "again", R"({"run":1})").ok());
  Job first = accept_now("brief");
  ASSERT_TRUE(jobs().finish(first).ok());
  ASSERT_TRUE(jobs().add("brief", "again", R"({"run":2})").ok());
  EXPECT_EQ(finished_index_entries(raw(), "brief"), 0u) << "a pending job kept its finished entry";
  // Set after the first finish, so that finish's entry would already be expired.
  std::this_thread::sleep_for(400ms);
  ASSERT_TRUE(jobs().set_finished_retention("brief", 300ms).ok());
  std::this_thread::sleep_for(1500ms);
  auto info = jobs().get("brief", "again");
  ASSERT_TRUE(info.ok()) << "a job that was pending again was removed";
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_EQ(info->data, R"({"run":2})");

  Job second = accept_now("brief");
  ASSERT_TRUE(jobs().finish(second).ok());
  const auto removed_by = kv::Clock::now() + 10s;
  while (jobs().get("brief", "again").ok() && kv::Clock::now() < removed_by)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(jobs().get("brief", "again").status().code(), Code::kNotFound);
}

TEST_P(JobsTest, ManyExpiredJobsAreAllRemovedInGrowingBatches) {
  constexpr int kJobs = 100;
  ASSERT_TRUE(jobs().set_type_timeout("bulk", 60s).ok());
  Status added = kv::run(raw(), [&](kv::Transaction& txn) -> Status {
    for (int i = 0; i < kJobs; ++i)
      KVQ_RETURN_IF_ERROR(jobs().add(txn, "bulk", "b" + std::to_string(i), "{}"));
    return Status::OK();
  });
  ASSERT_TRUE(added.ok()) << added.to_string();
  auto taken = jobs().accept_many("bulk", kJobs);
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  ASSERT_EQ(taken->size(), static_cast<size_t>(kJobs));
  for (Job& job : *taken) ASSERT_TRUE(jobs().finish(job).ok());
  EXPECT_EQ(finished_index_entries(raw(), "bulk"), static_cast<size_t>(kJobs));

  ASSERT_TRUE(jobs().set_finished_retention("bulk", 250ms).ok());
  const auto removed_by = kv::Clock::now() + 20s;
  size_t left = kJobs;
  while (left > 0 && kv::Clock::now() < removed_by) {
    std::this_thread::sleep_for(50ms);
    left = jobs().list("bulk", {.limit = 1000})->jobs.size();
  }
  EXPECT_EQ(left, 0u);
  EXPECT_EQ(finished_index_entries(raw(), "bulk"), 0u);
}

TEST_P(JobsTest, UpdateReplacesDataWhileRunning) {
  ASSERT_TRUE(jobs().add("work", "u", R"({"p":0})").ok());
  Job job = accept_now();
  auto r = jobs().update(job, R"({"p":50})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->resubmitted);
  EXPECT_EQ(jobs().get("work", "u")->data, R"({"p":50})");
  EXPECT_TRUE(jobs().update(job).ok()) << "a plain heartbeat";
  EXPECT_EQ(jobs().get("work", "u")->data, R"({"p":50})");
}

TEST_P(JobsTest, FinishStoresTheResultAndHaltsLaterCalls) {
  ASSERT_TRUE(jobs().add("work", "f", R"({"in":1})").ok());
  Job job = accept_now();
  ASSERT_TRUE(jobs().finish(job, R"({"out":2})").ok());
  auto info = jobs().get("work", "f");
  EXPECT_EQ(info->state, State::kFinished);
  EXPECT_EQ(info->data, R"({"out":2})");
  EXPECT_EQ(jobs().update(job).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().resubmit(job).code(), Code::kFailedPrecondition);
}

TEST_P(JobsTest, ResubmitThenFinishInOneTransactionMakesARecurringJob) {
  ASSERT_TRUE(jobs().add("work", "cron", R"({"run":1})").ok());
  Job job = accept_now();
  const int64_t next = wall_ms() + 3'600'000;
  Status s = kv::run(raw(), [&](kv::Transaction& txn) -> Status {
    KVQ_RETURN_IF_ERROR(
        jobs().resubmit(txn, job, {.scheduled_time_ms = next, .data = R"({"run":2})"}));
    return jobs().finish(txn, job);
  });
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto info = jobs().get("work", "cron");
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_EQ(info->scheduled_time_ms, next);
  EXPECT_EQ(info->data, R"({"run":2})");
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded)
      << "not due until `next`";
}

TEST_P(JobsTest, ResubmitMatrixAcrossStates) {
  // pending x add: replaced (above). running x add / resubmit: runs again. finished x add: pending.
  ASSERT_TRUE(jobs().add("work", "m", "{}").ok());
  Job job = accept_now();
  ASSERT_TRUE(jobs().resubmit(job).ok());
  EXPECT_TRUE(jobs().get("work", "m")->resubmitted);
  ASSERT_TRUE(jobs().finish(job).ok());
  EXPECT_EQ(state_of("m"), State::kPending);
  Job again = accept_now();
  EXPECT_EQ(again.id, "m");
  EXPECT_NE(again.lock, job.lock);
  EXPECT_EQ(jobs().finish(job).code(), Code::kFailedPrecondition) << "the old run is fenced";
  ASSERT_TRUE(jobs().finish(again).ok());
  EXPECT_EQ(state_of("m"), State::kFinished);
  EXPECT_EQ(jobs().get("work", "m")->attempts, 1u) << "the resubmitted run starts over";
}

TEST_P(JobsTest, StalledWorkerIsReenqueuedWithinTheWindowAndHalted) {
  ASSERT_TRUE(jobs().set_type_timeout("slow", 400ms).ok());
  ASSERT_TRUE(jobs().add("slow", "s", "{}").ok());
  Job job = accept_now("slow");
  auto sub = jobs().subscribe("slow", "s");
  ASSERT_TRUE(sub.ok());
  const auto accepted = kv::Clock::now();
  auto back = (*sub)->wait(State::kPending, kv::Clock::now() + 10s);
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "; the job is now "
                         << jobs::state_name(state_of("s", "slow")) << ", monitor re-enqueued "
                         << jobs().stats().reenqueued_by_monitor << " after "
                         << jobs().stats().monitor_checks << " checks";
  const auto idle = kv::Clock::now() - accepted;
  EXPECT_GE(idle, 400ms) << "re-enqueued before one timeout";
  EXPECT_LT(idle, 2400ms) << "took far longer than the documented window";
  EXPECT_EQ(jobs().update(job).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().finish(job).code(), Code::kFailedPrecondition);
  // The monitor counts its re-enqueue once its commit returns, which can be after the
  // subscriber has already seen that commit: wait for the count, but not forever.
  const auto counted_by = kv::Clock::now() + 5s;
  while (jobs().stats().reenqueued_by_monitor == 0 && kv::Clock::now() < counted_by)
    std::this_thread::sleep_for(5ms);
  EXPECT_GE(jobs().stats().reenqueued_by_monitor, 1u);
  Job next = accept_now("slow");
  EXPECT_EQ(next.id, "s");
}

TEST_P(JobsTest, AWorkerThatKeepsUpdatingIsNeverReenqueued) {
  ASSERT_TRUE(jobs().set_type_timeout("busy", 300ms).ok());
  ASSERT_TRUE(jobs().add("busy", "b", "{}").ok());
  Job job = accept_now("busy");
  const auto until = kv::Clock::now() + 1500ms;
  while (kv::Clock::now() < until) {
    ASSERT_TRUE(jobs().update(job).ok());
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(jobs().finish(job).ok());
}

// Issue 17: a monitor whose read of the store's version stalls for longer than the timeout
// (a paused etcd member) must not take the activity committed during the stall for a timeout
// old. The worker runs on a store that answers at once; only the monitor's store stalls.
TEST_P(JobsTest, AMonitorWhoseReadsStallNeverReenqueuesAWorkerThatReportsOnTime) {
  if (GetParam().faults) GTEST_SKIP() << "the stalls are injected on a store of their own";
  constexpr std::chrono::milliseconds kTimeout = 1s, kBeat = 200ms, kStall = 1500ms;
  constexpr int kStalls = 2;
  auto stalling = std::make_shared<kv::FaultInjectingStore>(raw_ptr(), kv::FaultOptions{});
  // Another key prefix, so the fixture's own (unstalled) monitor does not watch these jobs.
  auto worker_side = Jobs::open(raw_ptr(), {.key_prefix = "s", .run_activity_monitor = false});
  ASSERT_TRUE(worker_side.ok());
  ASSERT_TRUE((*worker_side)->set_type_timeout("stall", kTimeout).ok());
  auto monitor_side = Jobs::open(stalling, {.key_prefix = "s", .monitor_checks_per_timeout = 4});
  ASSERT_TRUE(monitor_side.ok());
  Jobs& worker = **worker_side;
  ASSERT_TRUE(worker.add("stall", "beating", "{}").ok());
  ASSERT_TRUE(worker.add("stall", "quiet", "{}").ok());
  auto first = worker.accept("stall"), second = worker.accept("stall");
  ASSERT_TRUE(first.ok() && second.ok());
  const auto accepted = kv::Clock::now();
  Job beating = first->id == "beating" ? *first : *second;
  auto quiet = worker.subscribe("stall", "quiet");
  ASSERT_TRUE(quiet.ok());

  std::atomic<bool> stop{false};
  Status halted = Status::OK();
  std::thread heartbeats([&] {
    while (!stop.load()) {
      auto s = worker.update(beating);
      if (!s.ok()) {
        halted = s.status();
        return;
      }
      std::this_thread::sleep_for(kBeat);
    }
  });
  auto checks = [&] { return (*monitor_side)->stats().monitor_checks; };
  for (int i = 0; i < kStalls; ++i) {
    EXPECT_TRUE(stall_one_read(*stalling, kStall, checks, 2, 10s))
        << "the monitor never read through stall " << i;
  }
  // The quiet job is still lost: once the store answers promptly again, within 1 + 2.4/4
  // timeouts of watched time (the monitor does not count the stalls, nor the part of any gap
  // between two checks past 1.5 periods), plus slack for a loaded machine, whose late checks
  // are not counted in full either. (Measured from accept, 5.6 s was once too little under a
  // parallel CI build: 5 checks in 6.2 s.)
  auto lost = (*quiet)->wait(State::kPending, kv::Clock::now() + 1600ms + 2s);
  const auto idle = kv::Clock::now() - accepted;
  stop = true;
  heartbeats.join();
  EXPECT_TRUE(halted.ok()) << "re-enqueued while its worker reported every " << kBeat.count()
                           << " ms: " << halted.to_string();
  EXPECT_TRUE(lost.ok()) << "a job whose worker stopped was not re-enqueued: "
                         << lost.status().to_string() << " ("
                         << std::chrono::duration_cast<std::chrono::milliseconds>(idle).count()
                         << " ms after accept, " << (*monitor_side)->stats().monitor_checks
                         << " checks)";
  EXPECT_GE(idle, kTimeout);
  EXPECT_TRUE(worker.finish(beating).ok());
  EXPECT_GE((*monitor_side)->stats().reenqueued_by_monitor, 1u);
}

TEST_P(JobsTest, WorkerWritesInAFencedTransactionNeverCommit) {
  ASSERT_TRUE(jobs().add("work", "w", "{}").ok());
  Job job = accept_now();
  auto txn = begin(raw());
  ASSERT_TRUE(jobs().update(*txn, job, R"({"progress":1})").ok());
  txn->set("app/result", "written with the job's update");
  ASSERT_TRUE(jobs().remove("work", "w").ok());  // fenced while the transaction is open
  EXPECT_EQ(txn->commit().code(), Code::kAborted);
  EXPECT_EQ(read(raw(), "app/result"), std::nullopt);
  auto retry = begin(raw());
  EXPECT_EQ(jobs().update(*retry, job).status().code(), Code::kFailedPrecondition);
}

TEST_P(JobsTest, AJobWhoseRunsAreLostMaxLostRunsTimesInARowIsFinishedAsGivenUp) {
  ASSERT_TRUE(jobs().set_type_timeout("poison", 300ms).ok());
  ASSERT_TRUE(jobs().set_max_lost_runs("poison", 2).ok());
  ASSERT_TRUE(jobs().add("poison", "p", R"({"n":1})").ok());

  Job first = accept_now("poison", {.worker = "w1"});
  ASSERT_EQ(first.id, "p");
  auto back = wait_for_state("poison", "p", State::kPending);  // the first lost run: re-enqueued
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_FALSE(back->gave_up);
  auto info = jobs().get("poison", "p");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->lost_runs, 1u);
  EXPECT_FALSE(info->gave_up);

  Job second = accept_now("poison", {.worker = "w2"});
  ASSERT_EQ(second.id, "p");
  ASSERT_TRUE(jobs().update(second, R"({"n":1,"progress":5})").ok());
  auto gone = wait_for_state("poison", "p", State::kFinished);  // the second: given up
  ASSERT_TRUE(gone.ok()) << gone.status().to_string();
  EXPECT_TRUE(gone->gave_up);
  EXPECT_EQ(gone->data, R"({"n":1,"progress":5})") << "its data as its last run left it";
  info = jobs().get("poison", "p");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::kFinished);
  EXPECT_TRUE(info->gave_up);
  EXPECT_EQ(info->lost_runs, 2u);
  EXPECT_EQ(info->attempts, 2u);
  EXPECT_EQ(info->worker, "");
  EXPECT_EQ(jobs().finish(second).code(), Code::kFailedPrecondition)
      << "the lost run's worker is halted";
  EXPECT_EQ(jobs().finish(first).code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().count("poison")->finished, 1u);
  EXPECT_EQ(jobs().accept("poison").status().code(), Code::kDeadlineExceeded)
      << "nothing left to run";
  const auto counted_by = kv::Clock::now() + 5s;
  while (jobs().stats().gave_up_by_monitor == 0 && kv::Clock::now() < counted_by)
    std::this_thread::sleep_for(5ms);
  EXPECT_LE(jobs().stats().gave_up_by_monitor, 1u);
  if (!a_commit_result_was_hidden()) {
    EXPECT_EQ(jobs().stats().gave_up_by_monitor, 1u);
  }

  // Added again, it starts over.
  ASSERT_TRUE(jobs().add("poison", "p", R"({"n":2})").ok());
  info = jobs().get("poison", "p");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_FALSE(info->gave_up);
  EXPECT_EQ(info->lost_runs, 0u);
}

TEST_P(JobsTest, AFinishedRunResetsTheLostRunCount) {
  ASSERT_TRUE(jobs().set_type_timeout("flaky", 300ms).ok());
  ASSERT_TRUE(jobs().set_max_lost_runs("flaky", 2).ok());
  ASSERT_TRUE(jobs().add("flaky", "f", "{}").ok());
  accept_now("flaky");
  ASSERT_TRUE(wait_for_state("flaky", "f", State::kPending).ok());
  // A recurring job: this run finishes and asks for another.
  Job ok_run = accept_now("flaky");
  auto txn = begin(raw());
  ASSERT_TRUE(jobs().resubmit(*txn, ok_run).ok());
  ASSERT_TRUE(jobs().finish(*txn, ok_run).ok());
  ASSERT_TRUE(txn->commit().ok());
  auto info = jobs().get("flaky", "f");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_EQ(info->lost_runs, 0u) << "a finished run resets the count";

  accept_now("flaky");
  ASSERT_TRUE(wait_for_state("flaky", "f", State::kPending).ok());
  info = jobs().get("flaky", "f");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->lost_runs, 1u) << "one lost run since the last finish: not given up";
  EXPECT_FALSE(info->gave_up);
}

TEST_P(JobsTest, ReleasingAWorkerCountsALostRunAndGivesUpAtTheLimit) {
  ASSERT_TRUE(jobs().set_type_timeout("once", 60s).ok());
  ASSERT_TRUE(jobs().set_max_lost_runs("once", 1).ok());
  ASSERT_TRUE(jobs().add("once", "a", R"({"k":"a"})").ok());
  ASSERT_TRUE(jobs().add("work", "b", "{}").ok());
  Job a = accept_now("once", {.worker = "w"});
  Job b = accept_now("work", {.worker = "w"});
  auto released = jobs().release_worker("", "w");
  ASSERT_TRUE(released.ok()) << released.status().to_string();
  EXPECT_EQ(*released, 2u);
  auto gave_up = jobs().get("once", "a");
  ASSERT_TRUE(gave_up.ok());
  EXPECT_EQ(gave_up->state, State::kFinished);
  EXPECT_TRUE(gave_up->gave_up);
  EXPECT_EQ(gave_up->data, R"({"k":"a"})");
  auto requeued = jobs().get("work", "b");
  ASSERT_TRUE(requeued.ok());
  EXPECT_EQ(requeued->state, State::kPending)
      << "a type without max_lost_runs re-enqueues for ever";
  EXPECT_EQ(requeued->lost_runs, 1u);
  EXPECT_EQ(jobs().finish(a).code(), Code::kFailedPrecondition);
}

TEST_P(JobsTest, ReleasingAWorkerReenqueuesExactlyTheJobsItHolds) {
  for (auto id : {"a", "b", "c", "d"}) ASSERT_TRUE(jobs().add("work", id, "{}").ok());
  Job a = accept_now("work", {.worker = "w1"});
  Job b = accept_now("work", {.worker = "w1"});
  Job c = accept_now("work", {.worker = "w2"});
  Job d = accept_now("work");
  auto released = jobs().release_worker("", "w1");
  ASSERT_TRUE(released.ok()) << released.status().to_string();
  EXPECT_EQ(*released, 2u);
  EXPECT_EQ(state_of(a.id), State::kPending);
  EXPECT_EQ(state_of(b.id), State::kPending);
  EXPECT_EQ(state_of(c.id), State::kRunning);
  EXPECT_EQ(state_of(d.id), State::kRunning);
  EXPECT_EQ(jobs().update(a).status().code(), Code::kFailedPrecondition)
      << "the departed worker is halted";
  EXPECT_TRUE(jobs().update(c).ok());
  EXPECT_EQ(*jobs().release_worker("", "w1"), 0u) << "nothing left to release";
  ASSERT_TRUE(jobs().finish(c).ok());
  EXPECT_EQ(*jobs().release_worker("", "w2"), 0u) << "a finished job is no longer held";
  EXPECT_EQ(jobs().release_worker("", "").status().code(), Code::kInvalidArgument);
}

TEST_P(JobsTest, OneConsumerGetsTheDueJobsByPriorityThenInScheduledOrder) {
  // An injected conflict retries the accept, and a retry spreads its pick (jobs.h: Order).
  if (GetParam().faults) GTEST_SKIP() << "FIFO is promised for tries that do not conflict";
  const int64_t t0 = wall_ms() - 60'000;
  // Added out of order, a second apart; the urgent one is the latest but has the best priority.
  for (int i : {3, 7, 0, 9, 5, 1, 8, 2, 6, 4}) {
    ASSERT_TRUE(
        jobs()
            .add("work", "f" + std::to_string(i), "{}", {.scheduled_time_ms = t0 + i * 1000})
            .ok());
  }
  ASSERT_TRUE(
      jobs().add("work", "later", "{}", {.scheduled_time_ms = t0 - 5000, .priority = 1}).ok());
  ASSERT_TRUE(
      jobs().add("work", "urgent", "{}", {.scheduled_time_ms = t0 + 20'000, .priority = -1}).ok());
  std::vector<std::string> order;
  for (int i = 0; i < 12; ++i) order.push_back(accept_now().id);
  EXPECT_EQ(order, (std::vector<std::string>{"urgent", "f0", "f1", "f2", "f3", "f4", "f5", "f6",
                                             "f7", "f8", "f9", "later"}));
  for (int i : {4, 1, 3, 0, 2}) {
    ASSERT_TRUE(
        jobs()
            .add("work", "m" + std::to_string(i), "{}", {.scheduled_time_ms = t0 + i * 1000})
            .ok());
  }
  auto many = jobs().accept_many("work", 5);
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  std::vector<std::string> batch;
  for (const auto& job : *many) batch.push_back(job.id);
  EXPECT_EQ(batch, (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"}))
      << "accept_many takes them in order too";
}

// An accept first reads the pending index only up to a little past the head the last accept
// found (index_levels.h: on etcd 3.4 a read costs in proportion to its whole range). Jobs before
// that head, just after it and far after it are all found, in order.
TEST_P(JobsTest, AcceptsFindJobsBeforeNearAndFarAfterTheHeadTheLastOneFound) {
  if (GetParam().faults) GTEST_SKIP() << "FIFO is promised for tries that do not conflict";
  const int64_t t0 = wall_ms() - 600'000;
  ASSERT_TRUE(jobs().add("work", "head", "{}", {.scheduled_time_ms = t0}).ok());
  EXPECT_EQ(accept_now().id, "head");  // the head found: t0
  ASSERT_TRUE(jobs().add("work", "far", "{}", {.scheduled_time_ms = t0 + 120'000}).ok());
  ASSERT_TRUE(jobs().add("work", "near", "{}", {.scheduled_time_ms = t0 + 100}).ok());
  ASSERT_TRUE(jobs().add("work", "before", "{}", {.scheduled_time_ms = t0 - 60'000}).ok());
  ASSERT_TRUE(jobs().add("work", "worse", "{}", {.scheduled_time_ms = t0 - 1, .priority = 2}).ok());
  EXPECT_EQ(accept_now().id, "before");
  EXPECT_EQ(accept_now().id, "near");
  EXPECT_EQ(accept_now().id, "far") << "beyond the window, found by the read after it";
  EXPECT_EQ(accept_now().id, "worse") << "a worse priority level, after the head's";
  ASSERT_TRUE(
      jobs().add("work", "better", "{}", {.scheduled_time_ms = t0 + 500'000, .priority = 1}).ok());
  EXPECT_EQ(accept_now().id, "better") << "a better level than the last head's, much later";
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
}

TEST_P(JobsTest, AWorkerTypeNeedsAWorkerNameAndAValidTypeName) {
  ASSERT_TRUE(jobs().add("work", "j", "{}").ok());
  EXPECT_EQ(jobs().accept("work", {.worker_type = "wt"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().accept("work", {.worker = "w", .worker_type = "no spaces"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().release_worker("no spaces", "w").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(state_of("j"), State::kPending) << "bad input changes nothing";
  Job typed = accept_now("work", {.worker = "w", .worker_type = "wt"});
  EXPECT_EQ(*jobs().release_worker("", "w"), 0u)
      << "a bare-name release leaves a typed worker's job";
  EXPECT_EQ(*jobs().release_worker("other", "w"), 0u);
  EXPECT_EQ(*jobs().release_worker("wt", "w"), 1u);
  EXPECT_EQ(jobs().update(typed).status().code(), Code::kFailedPrecondition);
}

// ---- Subscriptions ----

TEST_P(JobsTest, SubscribingToAnAbsentJobIsNotFound) {
  EXPECT_EQ(jobs().subscribe("work", "nope").status().code(), Code::kNotFound);
}

TEST_P(JobsTest, SubscriptionSeesEachTransitionInOrder) {
  ASSERT_TRUE(jobs().add("work", "s", R"({"step":0})").ok());
  auto sub = jobs().subscribe("work", "s");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ((*sub)->initial().state, State::kPending);
  const auto deadline = [] { return kv::Clock::now() + 5s; };

  Job job = accept_now();
  auto e = (*sub)->next(deadline());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->state, State::kRunning);

  ASSERT_TRUE(jobs().update(job, R"({"step":1})").ok());
  e = (*sub)->next(deadline());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->state, State::kRunning);
  EXPECT_EQ(e->data, R"({"step":1})");

  ASSERT_TRUE(jobs().finish(job, R"({"step":2})").ok());
  e = (*sub)->next(deadline());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->state, State::kFinished);
  EXPECT_EQ(e->data, R"({"step":2})");
  EXPECT_EQ((*sub)->next(deadline()).status().code(), Code::kNotFound) << "ends after finished";
  EXPECT_TRUE((*sub)->ended());
}

TEST_P(JobsTest, SubscriptionEventsNeverGoBackwardsAndAlwaysEndWithTheFinalState) {
  ASSERT_TRUE(jobs().add("work", "burst", "{}").ok());
  auto sub = jobs().subscribe("work", "burst");
  ASSERT_TRUE(sub.ok());
  Job job = accept_now();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(jobs().update(job, "{\"i\":" + std::to_string(i) + "}").ok());
  ASSERT_TRUE(jobs().finish(job).ok());
  uint64_t last = (*sub)->initial().seq;
  for (;;) {
    auto e = (*sub)->next(kv::Clock::now() + 5s);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_GT(e->seq, last);
    last = e->seq;
    if (e->state == State::kFinished) break;
  }
}

TEST_P(JobsTest, SubscriptionHearsNotFoundWhenTheJobIsRemoved) {
  ASSERT_TRUE(jobs().add("work", "gone", "{}").ok());
  auto sub = jobs().subscribe("work", "gone");
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(jobs().remove("work", "gone").ok());
  auto e = (*sub)->wait(State::kFinished, kv::Clock::now() + 5s);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->found);
}

TEST_P(JobsTest, AFollowingWaitOnAFinishedJobSeesItAddedAgainAndRemoved) {
  ASSERT_TRUE(jobs().add("work", "again", "{}").ok());
  Job first = accept_now();
  ASSERT_TRUE(jobs().finish(first).ok());
  ASSERT_EQ(state_of("again"), State::kFinished);
  auto running = jobs().subscribe("work", "again", {.follow = true});
  ASSERT_TRUE(running.ok());
  std::vector<jobs::JobEvent> fed;
  std::mutex fed_mu;
  std::condition_variable fed_cv;
  auto feed = jobs().subscribe("work", "again", {.follow = true});
  ASSERT_TRUE(feed.ok());
  (*feed)->on_event([&](const jobs::JobEvent& e) {
    std::lock_guard lock(fed_mu);
    fed.push_back(e);
    fed_cv.notify_all();
  });
  std::promise<Result<jobs::JobEvent>> woke;
  (*running)->wait_async(State::kRunning,
                         [&](Result<jobs::JobEvent> e) { woke.set_value(std::move(e)); });
  auto woken = woke.get_future();

  ASSERT_TRUE(jobs().add("work", "again", R"({"run":2})").ok());
  Job second = accept_now();
  ASSERT_EQ(woken.wait_for(10s), std::future_status::ready)
      << "the wait never saw the job run again";
  auto e = woken.get();
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_TRUE(e->found);
  EXPECT_EQ(e->state, State::kRunning);

  ASSERT_TRUE(jobs().finish(second).ok());
  auto gone = jobs().subscribe("work", "again", {.follow = true});
  ASSERT_TRUE(gone.ok());
  ASSERT_TRUE(jobs().remove("work", "again").ok());
  auto removed = (*gone)->wait(State::kRunning, kv::Clock::now() + 10s);
  ASSERT_TRUE(removed.ok()) << removed.status().to_string();
  EXPECT_FALSE(removed->found) << "the wait never saw the job go";

  // The feed followed the job through its second run (seen in the notifier's read that woke
  // the wait) to its removal.
  std::unique_lock lock(fed_mu);
  ASSERT_TRUE(fed_cv.wait_for(lock, 10s, [&] { return !fed.empty() && !fed.back().found; }))
      << "the feed never saw the job go";
  EXPECT_TRUE((*feed)->ended());
  EXPECT_TRUE(std::any_of(fed.begin(), fed.end(),
                          [](const auto& e) { return e.found && e.state == State::kRunning; }));
  EXPECT_NE(fed.front().state, State::kFinished)
      << "the feed starts after the state at subscribe time";
}

TEST_P(JobsTest, AWaitOnASubscriptionThatDoesNotFollowEndsWhenTheJobHasFinished) {
  ASSERT_TRUE(jobs().add("work", "done", "{}").ok());
  Job job = accept_now();
  ASSERT_TRUE(jobs().finish(job).ok());
  auto sub = jobs().subscribe("work", "done");
  ASSERT_TRUE(sub.ok());
  std::optional<Result<jobs::JobEvent>> got;
  (*sub)->wait_async(State::kRunning, [&](Result<jobs::JobEvent> e) { got = std::move(e); });
  ASSERT_TRUE(got.has_value()) << "answered at once";
  EXPECT_EQ(got->status().code(), Code::kNotFound);
  EXPECT_TRUE((*sub)->ended());
}

TEST_P(JobsTest, WaitReturnsAtOnceWhenTheJobIsAlreadyInTheState) {
  ASSERT_TRUE(jobs().add("work", "w", "{}").ok());
  auto sub = jobs().subscribe("work", "w");
  ASSERT_TRUE(sub.ok());
  auto e = (*sub)->wait(State::kPending, kv::Clock::now());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->state, State::kPending);
  EXPECT_EQ((*sub)->wait(State::kFinished, kv::Clock::now() + 50ms).status().code(),
            Code::kDeadlineExceeded);
}

TEST_P(JobsTest, WaitAnyReturnsTheFirstSubscriptionToReachTheState) {
  ASSERT_TRUE(jobs().add("work", "a", "{}").ok());
  ASSERT_TRUE(jobs().add("work", "b", "{}", {.priority = 1}).ok());
  auto a = jobs().subscribe("work", "a");
  auto b = jobs().subscribe("work", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  Job first = accept_now();  // "a": higher priority
  ASSERT_EQ(first.id, "a");
  ASSERT_TRUE(jobs().finish(first).ok());
  auto hit = Jobs::wait_any({a->get(), b->get()}, State::kFinished, kv::Clock::now() + 5s);
  ASSERT_TRUE(hit.ok()) << hit.status().to_string();
  EXPECT_EQ(hit->first, 0u);
  EXPECT_EQ(hit->second.id, "a");
}

TEST_P(JobsTest, DroppingASubscriptionUnsubscribes) {
  ASSERT_TRUE(jobs().add("work", "d", "{}").ok());
  {
    auto sub = jobs().subscribe("work", "d");
    ASSERT_TRUE(sub.ok());
    Job job = accept_now();
    ASSERT_TRUE(jobs().finish(job).ok());
  }
  ASSERT_TRUE(jobs().add("work", "d", "{}").ok());  // nothing left to deliver to; must not crash
}

// ---- Invalid input ----

TEST_P(JobsTest, InvalidInputIsRejectedByNameAndChangesNothing) {
  const auto before = store_contents();
  ASSERT_FALSE(before.empty()) << "the fixture's type 'work' is stored";
  EXPECT_EQ(jobs().add("", "a", "{}").code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().add("work", "", "{}").code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().add("work", std::string(jobs::kMaxIdBytes + 1, 'i'), "{}").code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().add("work", "a", "[1,2]").code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().add("work", "a", "{not json").code(), Code::kInvalidArgument);
  const std::string huge = "{\"x\":\"" + std::string(jobs().options().max_data_bytes, 'x') + "\"}";
  EXPECT_EQ(jobs().add("work", "a", huge).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().accept("work", {.timeout = -1ms}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().list("work", {.limit = 0}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_contents(), before);
  EXPECT_EQ(jobs().get("work", "a").status().code(), Code::kNotFound);
}

TEST_P(JobsTest, AHandleUsedWithAnotherTypeIsInvalid) {
  ASSERT_TRUE(jobs().set_type_timeout("other", 60s).ok());
  ASSERT_TRUE(jobs().add("work", "h", "{}").ok());
  Job job = accept_now();
  Job wrong = job;
  wrong.type = "other";
  EXPECT_EQ(jobs().update(wrong).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().finish(wrong).code(), Code::kInvalidArgument);
  Job forged = job;
  forged.lock = "";
  EXPECT_EQ(jobs().finish(forged).code(), Code::kInvalidArgument);
  EXPECT_TRUE(jobs().finish(job).ok());
}

// ---- Whole lifecycle under concurrency (and, in the faults variant, injected faults) ----

TEST_P(JobsTest, EveryJobIsFinishedExactlyOnceByConcurrentWorkers) {
  constexpr int kJobs = 150, kWorkers = 4;
  std::atomic<int> finished{0};
  std::mutex mu;
  std::map<std::string, int> finishes;
  std::thread producer([&] {
    for (int i = 0; i < kJobs; ++i) {
      Status s = jobs()
                     .add("work", "life" + std::to_string(i), "{\"i\":" + std::to_string(i) + "}")
                     .status();
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (finished.load() < kJobs) {
        auto job = jobs().accept("work", {.timeout = 200ms});
        if (!job.ok()) continue;
        if (!jobs().update(*job).ok()) continue;
        Status s = jobs().finish(*job, R"({"ok":true})");
        if (!s.ok()) continue;
        std::lock_guard lock(mu);
        ++finishes[job->id];
        ++finished;
      }
    });
  }
  producer.join();
  for (auto& t : workers) t.join();
  EXPECT_EQ(finishes.size(), static_cast<size_t>(kJobs));
  for (auto& [id, n] : finishes) EXPECT_EQ(n, 1) << id;
  auto done = jobs().list("work", {.state = State::kFinished, .limit = 1000});
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->jobs.size(), static_cast<size_t>(kJobs));
}

// ---- Without a blocked thread (add_async, update_async, finish_async, accept_async) ----

// The first `n` outcomes delivered, each missing one an error, failing the test if they do not
// all arrive in time.
template <typename T>
std::vector<T> first_delivered(Delivered<T>& delivered, size_t n) {
  EXPECT_TRUE(delivered.wait_for(n))
      << "only " << delivered.size() << " of " << n << " outcomes arrived";
  std::vector<T> values = delivered.values();
  while (values.size() < n) values.push_back(T(Internal("never delivered")));
  return values;
}

TEST_P(JobsTest, AsyncAddUpdateAndFinishTakeAJobThroughItsLifeAndAreJudgedLikeTheirBlockingTwins) {
  auto added = std::make_shared<Delivered<Result<jobs::AddResult>>>();
  jobs().add_async("work", "a1", R"({"in": 1})", {.priority = 3}, deliver_to(added));
  ASSERT_TRUE(first_delivered(*added, 1)[0].ok())
      << first_delivered(*added, 1)[0].status().to_string();
  auto info = jobs().get("work", "a1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::kPending);
  EXPECT_EQ(info->data, R"({"in":1})") << "the data is normalized as add does";
  EXPECT_EQ(info->priority, 3);

  Job job = accept_now();
  ASSERT_EQ(job.id, "a1");
  auto updated = std::make_shared<Delivered<Result<jobs::UpdateResult>>>();
  jobs().update_async(job, {.data = R"({"progress": 50})"}, deliver_to(updated));
  auto heartbeat = first_delivered(*updated, 1)[0];
  ASSERT_TRUE(heartbeat.ok()) << heartbeat.status().to_string();
  EXPECT_FALSE(heartbeat->resubmitted);
  EXPECT_EQ(jobs().get("work", "a1")->data, R"({"progress":50})");
  auto finished = std::make_shared<Delivered<Status>>();
  jobs().finish_async(job, {.data = R"({"out": 2})"}, deliver_to(finished));
  ASSERT_TRUE(first_delivered(*finished, 1)[0].ok())
      << first_delivered(*finished, 1)[0].to_string();
  info = jobs().get("work", "a1");
  EXPECT_EQ(info->state, State::kFinished);
  EXPECT_EQ(info->data, R"({"out":2})");

  ASSERT_TRUE(jobs().add("work", "a2", "{}").ok());
  Job removed = accept_now();
  ASSERT_TRUE(jobs().remove("work", "a2").ok());
  jobs().finish_async(removed, {}, deliver_to(finished));
  EXPECT_EQ(first_delivered(*finished, 2)[1].code(), Code::kFailedPrecondition)
      << "the finish of a removed job is halted";
  jobs().add_async("untimed", "b", "{}", {}, deliver_to(added));
  EXPECT_EQ(first_delivered(*added, 2)[1].code(), Code::kNoTimeout) << "a type without a timeout";
  jobs().add_async("work", "", "{}", {}, deliver_to(added));
  EXPECT_EQ(first_delivered(*added, 3)[2].code(), Code::kInvalidArgument) << "an empty id";
  jobs().add_async("work", "c", "{not json", {}, deliver_to(added));
  EXPECT_EQ(first_delivered(*added, 4)[3].code(), Code::kInvalidArgument)
      << "data that is not JSON";
  EXPECT_EQ(jobs().get("work", "c").status().code(), Code::kNotFound)
      << "a rejected add writes nothing";
}

TEST_P(JobsTest, AsyncResubmitSetsUpTheNextRunAndIsJudgedLikeResubmit) {
  ASSERT_TRUE(jobs().add("work", "r", R"({"n": 1})").ok());
  Job job = accept_now();
  auto resubmitted = std::make_shared<Delivered<Status>>();
  const int64_t later = wall_ms() + 60'000;
  jobs().resubmit_async(job, {.scheduled_time_ms = later, .data = R"({"n": 2})"},
                        deliver_to(resubmitted));
  const Status first = first_delivered(*resubmitted, 1)[0];
  ASSERT_TRUE(first.ok()) << first.to_string();
  auto info = jobs().get("work", "r");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->resubmitted);
  EXPECT_EQ(info->data, R"({"n":2})") << "the data is normalized as resubmit does";
  ASSERT_TRUE(jobs().finish(job).ok());
  info = jobs().get("work", "r");
  EXPECT_EQ(info->state, State::kPending) << "the finish started the next run";
  EXPECT_EQ(info->scheduled_time_ms, later);

  Job stale = job;
  jobs().resubmit_async(stale, {}, deliver_to(resubmitted));
  EXPECT_EQ(first_delivered(*resubmitted, 2)[1].code(), Code::kFailedPrecondition)
      << "a finished run is fenced";
  stale.lock = "not-a-lock";
  jobs().resubmit_async(stale, {}, deliver_to(resubmitted));
  EXPECT_EQ(first_delivered(*resubmitted, 3)[2].code(), Code::kInvalidArgument);
  stale.lock = job.lock;
  jobs().resubmit_async(stale, {.data = "{not json"}, deliver_to(resubmitted));
  EXPECT_EQ(first_delivered(*resubmitted, 4)[3].code(), Code::kInvalidArgument)
      << "data that is not JSON";
}

TEST_P(JobsTest, AcceptDueAsyncTakesWhatIsDueNowWithoutWaiting) {
  auto taken = std::make_shared<Delivered<Result<std::vector<Job>>>>();
  jobs().accept_due_async("work", 3, {.timeout = 10s}, deliver_to(taken));
  const auto start = kv::Clock::now();
  auto none = first_delivered(*taken, 1)[0];
  EXPECT_EQ(none.status().code(), Code::kDeadlineExceeded) << "nothing due, and it does not wait";
  EXPECT_LT(kv::Clock::now() - start, 5s);

  for (int i = 0; i < 5; ++i) ASSERT_TRUE(jobs().add("work", "d" + std::to_string(i), "{}").ok());
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = wall_ms() + 60'000}).ok());
  jobs().accept_due_async("work", 3, {.worker = "w"}, deliver_to(taken));
  jobs().accept_due_async("work", 10, {}, deliver_to(taken));
  auto outcomes = first_delivered(*taken, 3);
  ASSERT_TRUE(outcomes[1].ok()) << outcomes[1].status().to_string();
  ASSERT_TRUE(outcomes[2].ok()) << outcomes[2].status().to_string();
  std::set<std::string> ids;
  for (size_t k = 1; k < 3; ++k) {
    for (const auto& job : *outcomes[k])
      EXPECT_TRUE(ids.insert(job.id).second) << job.id << " was handed out twice";
  }
  EXPECT_EQ(ids.size(), 5u) << "every due job, and not the one scheduled later";
  EXPECT_FALSE(ids.count("later"));
  for (const auto& job : *outcomes[1]) EXPECT_EQ(job.worker, "w");
  EXPECT_EQ(state_of("later"), State::kPending);

  jobs().accept_due_async("work", 0, {}, deliver_to(taken));
  EXPECT_EQ(first_delivered(*taken, 4)[3].status().code(), Code::kInvalidArgument);
  jobs().accept_due_async("", 1, {}, deliver_to(taken));
  EXPECT_EQ(first_delivered(*taken, 5)[4].status().code(), Code::kInvalidArgument);
}

TEST_P(JobsTest, AcceptBatchAsyncTakesWhatIsDueOrWaitsForTheFirstThenTakesTheRest) {
  auto taken = std::make_shared<Delivered<Result<std::vector<Job>>>>();
  EXPECT_EQ(jobs().accept_batch_async("work", 5, {}, deliver_to(taken)), 0u)
      << "timeout 0 never waits";
  EXPECT_EQ(first_delivered(*taken, 1)[0].status().code(), Code::kDeadlineExceeded);

  for (int i = 0; i < 3; ++i) ASSERT_TRUE(jobs().add("work", "now" + std::to_string(i), "{}").ok());
  jobs().accept_batch_async("work", 5, {.timeout = 10s, .worker = "w"}, deliver_to(taken));
  auto due = first_delivered(*taken, 2)[1];
  ASSERT_TRUE(due.ok()) << due.status().to_string();
  EXPECT_EQ(due->size(), 3u) << "what is due now, without waiting for more";
  for (const auto& job : *due) EXPECT_EQ(job.worker, "w");

  // Nothing due: it waits for the first, then takes the rest of what is due with it.
  const uint64_t ticket = jobs().accept_batch_async("work", 5, {.timeout = 10s}, deliver_to(taken));
  EXPECT_NE(ticket, 0u);
  ASSERT_TRUE(jobs().add_many("work", {{"w0", "{}", {}}, {"w1", "{}", {}}, {"w2", "{}", {}}}).ok());
  auto waited = first_delivered(*taken, 3)[2];
  ASSERT_TRUE(waited.ok()) << waited.status().to_string();
  EXPECT_EQ(waited->size(), 3u) << "the first and the rest of the batch added with it";

  const uint64_t cancelled =
      jobs().accept_batch_async("work", 2, {.timeout = 30s}, deliver_to(taken));
  ASSERT_NE(cancelled, 0u);
  EXPECT_TRUE(jobs().cancel_accept(cancelled));
  EXPECT_EQ(first_delivered(*taken, 4)[3].status().code(), Code::kCancelled);

  const auto start = kv::Clock::now();
  jobs().accept_batch_async("work", 2, {.timeout = 200ms}, deliver_to(taken));
  EXPECT_EQ(first_delivered(*taken, 5)[4].status().code(), Code::kDeadlineExceeded);
  EXPECT_GE(kv::Clock::now() - start, 150ms);

  EXPECT_EQ(jobs().accept_batch_async("work", 0, {.timeout = 1s}, deliver_to(taken)), 0u);
  EXPECT_EQ(first_delivered(*taken, 6)[5].status().code(), Code::kInvalidArgument);
  EXPECT_EQ(taken->size(), 6u) << "each call answered exactly once";
}

TEST_P(JobsTest, AsyncAddsFromManyThreadsAllLandOnce) {
  constexpr int kThreads = 4, kEach = 40;
  auto added = std::make_shared<Delivered<Result<jobs::AddResult>>>();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        jobs().add_async("work", "m" + std::to_string(t) + "-" + std::to_string(i), "{}", {},
                         deliver_to(added));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : first_delivered(*added, kThreads * kEach))
    EXPECT_TRUE(s.ok()) << s.status().to_string();
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, static_cast<uint64_t>(kThreads * kEach));
}

TEST_P(JobsTest, AsyncAcceptTakesADueJobOrWaitsForTheNextAdd) {
  ASSERT_TRUE(jobs().add("work", "due", "{}").ok());
  auto accepted = std::make_shared<Delivered<Result<Job>>>();
  jobs().accept_async("work", {.timeout = 5s, .worker = "w1"}, deliver_to(accepted));
  auto first = first_delivered(*accepted, 1)[0];
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->id, "due");
  EXPECT_EQ(first->worker, "w1");
  EXPECT_EQ(state_of("due"), State::kRunning);

  jobs().accept_async("work", {.timeout = 5s}, deliver_to(accepted));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(accepted->size(), 1u) << "nothing is due, so the second accept waits";
  ASSERT_TRUE(jobs().add("work", "later", "{}").ok());
  auto second = first_delivered(*accepted, 2)[1];
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(second->id, "later");
  EXPECT_TRUE(jobs().finish(*second).ok()) << "the lock it was handed is the job's";
}

TEST_P(JobsTest, AsyncAcceptWakesWhenADelayedJobBecomesDue) {
  ASSERT_TRUE(jobs().add("work", "soon", "{}", {.scheduled_time_ms = wall_ms() + 300}).ok());
  const auto start = kv::Clock::now();
  auto accepted = std::make_shared<Delivered<Result<Job>>>();
  jobs().accept_async("work", {.timeout = 10s}, deliver_to(accepted));
  auto job = first_delivered(*accepted, 1)[0];
  const auto waited = kv::Clock::now() - start;
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "soon");
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s) << "woken by the due time, not by the accept deadline";
}

TEST_P(JobsTest, AsyncAcceptsWaitingOnManyTypesAreEachServedFromTheirOwnType) {
  constexpr int kTypes = 8, kWaitersPerType = 3;
  std::vector<std::string> types;
  for (int t = 0; t < kTypes; ++t) {
    types.push_back("multi" + std::to_string(t));
    ASSERT_TRUE(jobs().set_type_timeout(types.back(), 60s).ok());
  }
  auto accepted = std::make_shared<Delivered<Result<Job>>>();
  for (const auto& type : types) {
    for (int w = 0; w < kWaitersPerType; ++w)
      jobs().accept_async(type, {.timeout = 10s}, deliver_to(accepted));
  }
  for (const auto& type : types) {
    for (int w = 0; w < kWaitersPerType; ++w) {
      ASSERT_TRUE(jobs().add(type, type + "-" + std::to_string(w), "{}").ok());
    }
  }
  std::map<std::string, int> per_type;
  std::set<std::string> ids;
  for (const auto& job : first_delivered(*accepted, kTypes * kWaitersPerType)) {
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->id.substr(0, job->type.size()), job->type)
        << job->id << " came from another type";
    EXPECT_TRUE(ids.insert(job->id).second) << job->id << " was handed out twice";
    ++per_type[job->type];
  }
  for (const auto& type : types) EXPECT_EQ(per_type[type], kWaitersPerType) << type;
}

TEST_P(JobsTest, AnAddThroughAnotherJobsOnTheSameStoreWakesAWaiter) {
  auto other = open_another();
  ASSERT_NE(other, nullptr);
  auto accepted = std::make_shared<Delivered<Result<Job>>>();
  jobs().accept_async("work", {.timeout = 10s}, deliver_to(accepted));
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(accepted->size(), 0u) << "nothing was due";
  const auto start = kv::Clock::now();
  ASSERT_TRUE(other->add("work", "elsewhere", "{}").ok());
  auto job = first_delivered(*accepted, 1)[0];
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "elsewhere");
  EXPECT_LT(kv::Clock::now() - start, 3s);
}

TEST_P(JobsTest, CancellingAWaitingAsyncAcceptEndsItWithCancelled) {
  auto accepted = std::make_shared<Delivered<Result<Job>>>();
  const uint64_t ticket = jobs().accept_async("work", {.timeout = 30s}, deliver_to(accepted));
  ASSERT_NE(ticket, 0u) << "nothing is due, so it waits and can be cancelled";
  EXPECT_TRUE(jobs().cancel_accept(ticket));
  EXPECT_EQ(first_delivered(*accepted, 1)[0].status().code(), Code::kCancelled);
  EXPECT_FALSE(jobs().cancel_accept(ticket)) << "it has completed";
  ASSERT_TRUE(jobs().add("work", "kept", "{}").ok());
  // A look under way when cancel came may still take the job (under the fault injector a retried
  // try sees the add); the job then goes straight back, this attempt uncounted.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (state_of("kept") != State::kPending && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(accepted->size(), 1u) << "the cancelled accept is answered once";
  auto kept = jobs().get("work", "kept");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->state, State::kPending) << "a cancelled accept keeps no job";
  EXPECT_EQ(kept->attempts, 0u) << "and the job it may have taken counts no attempt";
  EXPECT_TRUE(kept->errors.empty());
}

TEST_P(JobsTest, ManyAsyncAcceptsNeverGetTheSameJob) {
  constexpr int kJobs = 30;
  auto accepted = std::make_shared<Delivered<Result<Job>>>();
  for (int i = 0; i < kJobs; ++i)
    jobs().accept_async("work", {.timeout = 10s}, deliver_to(accepted));
  for (int i = 0; i < kJobs; ++i)
    ASSERT_TRUE(jobs().add("work", "s" + std::to_string(i), "{}").ok());
  std::set<std::string> ids;
  for (const auto& job : first_delivered(*accepted, kJobs)) {
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_TRUE(ids.insert(job->id).second) << job->id << " was handed out twice";
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kJobs));
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsTest, ::testing::ValuesIn(jobs_params()), jobs_param_name);

}  // namespace
}  // namespace kvq::testing
