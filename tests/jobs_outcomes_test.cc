// How jobs end and start over (kvq/jobs.h): if_exists, re-add of a finished job, rerun,
// rerun_all, cancel, the outcome filters of list and the counts, on every backend and through
// the fault injector.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/hooked_store.h"
#include "support/jobs_fixture.h"
#include "support/kv_helpers.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::FinishOptions;
using jobs::IfExists;
using jobs::Job;
using jobs::JobInfo;
using jobs::Jobs;
using jobs::NewJob;
using jobs::Outcome;
using jobs::State;

// The fixture of tests/jobs_test.cc.
class JobsOutcomesTest : public JobsFixture {
 protected:
  Job accept_now(const std::string& type = "work", AcceptOptions o = {}) {
    auto job = jobs_->accept(type, o);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
  JobInfo info_of(const std::string& id, const std::string& type = "work") {
    auto info = jobs_->get(type, id);
    EXPECT_TRUE(info.ok()) << id << ": " << info.status().to_string();
    return info.ok() ? *info : JobInfo{};
  }
  // Adds `id` and takes it (it must be the only due job), for a test that needs it running.
  Job add_and_accept(const std::string& id, const std::string& data = "{}",
                     const std::string& type = "work") {
    EXPECT_TRUE(jobs_->add(type, id, data).ok());
    Job job = accept_now(type);
    EXPECT_EQ(job.id, id);
    return job;
  }
  // A job that ended dead: its one attempt failed with retry false.
  void make_dead(const std::string& id, const std::string& data = "{}") {
    Job job = add_and_accept(id, data);
    auto failed = jobs_->fail(job, {.message = "boom " + id, .retry = false});
    ASSERT_TRUE(failed.ok()) << failed.status().to_string();
    EXPECT_TRUE(failed->dead);
    ASSERT_EQ(info_of(id).outcome, Outcome::kDead);
  }
  void make_succeeded(const std::string& id, const std::string& result = "1") {
    Job job = add_and_accept(id);
    ASSERT_TRUE(jobs_->finish(job, FinishOptions{.result = result}).ok());
  }
  std::vector<std::string> listed(const jobs::ListOptions& options) {
    auto page = jobs_->list("work", options);
    EXPECT_TRUE(page.ok()) << page.status().to_string();
    std::vector<std::string> ids;
    if (page.ok())
      for (const auto& j : page->jobs) ids.push_back(j.id);
    return ids;
  }
};

// ---- Names and limits ----

TEST(JobsNames, OutcomesFiltersAndIfExistsParseTheirNamesAndNameTheAcceptedOnes) {
  for (Outcome o : {Outcome::kSucceeded, Outcome::kDead, Outcome::kCancelled}) {
    auto parsed = jobs::parse_outcome(jobs::outcome_name(o));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, o);
  }
  EXPECT_EQ(jobs::outcome_name(Outcome::kNone), "");
  auto bad = jobs::parse_outcome("failed");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("succeeded, dead or cancelled"), std::string::npos)
      << bad.status().to_string();
  EXPECT_EQ(jobs::parse_outcome("").status().code(), Code::kInvalidArgument);

  auto f = jobs::parse_job_filter("scheduled");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->state, State::kPending);
  EXPECT_EQ(f->due, false);
  EXPECT_FALSE(f->outcome);
  f = jobs::parse_job_filter("due");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->state, State::kPending);
  EXPECT_EQ(f->due, true);
  f = jobs::parse_job_filter("dead");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->state, State::kFinished);
  EXPECT_EQ(f->outcome, Outcome::kDead);
  f = jobs::parse_job_filter("running");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->state, State::kRunning);
  EXPECT_FALSE(f->due);
  EXPECT_FALSE(f->outcome);
  for (const char* name : {"succeeded", "cancelled", "pending", "finished"})
    EXPECT_TRUE(jobs::parse_job_filter(name).ok()) << name;
  auto unknown = jobs::parse_job_filter("failed");
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  EXPECT_NE(
      unknown.status().message().find(
          "pending, running, finished, waiting, scheduled, due, succeeded, dead or cancelled"),
      std::string::npos)
      << unknown.status().to_string();

  EXPECT_EQ(*jobs::parse_if_exists("update"), IfExists::kUpdate);
  EXPECT_EQ(*jobs::parse_if_exists("keep"), IfExists::kKeep);
  auto if_exists = jobs::parse_if_exists("skip");
  EXPECT_EQ(if_exists.status().code(), Code::kInvalidArgument);
  EXPECT_NE(if_exists.status().message().find("update or keep"), std::string::npos);
}

TEST(JobsOpen, RefusesMaxDataBytesAboveTheLimit) {
  TempDir dir;
  auto store = all_backends()[0].open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto too_big = Jobs::open(*store, {.max_data_bytes = jobs::kMaxDataBytesLimit + 1});
  EXPECT_EQ(too_big.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find(std::to_string(jobs::kMaxDataBytesLimit)),
            std::string::npos)
      << too_big.status().to_string();
  EXPECT_TRUE(Jobs::open(*store, {.max_data_bytes = jobs::kMaxDataBytesLimit}).ok());
}

// ---- if_exists ----

TEST_P(JobsOutcomesTest, AddWithKeepLeavesAnExistingJobAloneInEveryState) {
  const jobs::AddOptions keep{.if_exists = IfExists::kKeep};
  auto added = jobs().add("work", "new", R"({"v":1})", keep);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_TRUE(added->added) << "keep adds a job that does not exist";
  auto again =
      jobs().add("work", "new", R"({"v":2})", {.priority = 5, .if_exists = IfExists::kKeep});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->added);
  EXPECT_EQ(info_of("new").data, R"({"v":1})");
  EXPECT_EQ(info_of("new").priority, 0);

  Job running = accept_now();
  ASSERT_EQ(running.id, "new");
  again = jobs().add("work", "new", R"({"v":3})", keep);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->added);
  EXPECT_FALSE(info_of("new").resubmitted) << "keep asked a running job for another run";
  ASSERT_TRUE(jobs().finish(running).ok());

  again = jobs().add("work", "new", R"({"v":4})", keep);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->added);
  EXPECT_EQ(info_of("new").state, State::kFinished) << "keep ran a finished job again";
  EXPECT_EQ(info_of("new").outcome, Outcome::kSucceeded);

  // The default, update, still changes it, and says so.
  auto updated = jobs().add("work", "new", R"({"v":5})");
  ASSERT_TRUE(updated.ok());
  EXPECT_TRUE(updated->added);
  EXPECT_EQ(info_of("new").state, State::kPending);
}

TEST_P(JobsOutcomesTest, AddManyReportsWhatItAddedAndTheKeptIdsInBatchOrder) {
  ASSERT_TRUE(jobs().add("work", "b", R"({"old":1})").ok());
  ASSERT_TRUE(jobs().add("work", "d", R"({"old":1})").ok());
  const jobs::AddOptions keep{.if_exists = IfExists::kKeep};
  const std::vector<NewJob> batch = {
      {"x", R"({"n":1})", keep},  // new: added
      {"d", R"({"n":2})", keep},  // exists: kept
      {"c", R"({"n":3})", {}},    // new: added
      {"b", R"({"n":4})", keep},  // exists: kept
      {"x", R"({"n":5})", keep},  // added by this batch: the later sees the earlier, kept
      {"b", R"({"n":6})", {}},    // exists, update: changed
  };
  auto result = jobs().add_many("work", batch);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->added, 3u);
  EXPECT_EQ(result->kept, (std::vector<std::string>{"d", "b", "x"}));
  EXPECT_EQ(info_of("x").data, R"({"n":1})");
  EXPECT_EQ(info_of("d").data, R"({"old":1})");
  EXPECT_EQ(info_of("b").data, R"({"n":6})");

  std::promise<Result<jobs::AddManyResult>> done;
  jobs().add_many_async("work", {{"c", "{}", keep}, {"e", "{}", keep}},
                        [&](Result<jobs::AddManyResult> r) { done.set_value(std::move(r)); });
  auto async = done.get_future().get();
  ASSERT_TRUE(async.ok()) << async.status().to_string();
  EXPECT_EQ(async->added, 1u);
  EXPECT_EQ(async->kept, (std::vector<std::string>{"c"}));

  std::promise<Result<jobs::AddResult>> one;
  jobs().add_async("work", "e", "{}", keep,
                   [&](Result<jobs::AddResult> r) { one.set_value(std::move(r)); });
  auto kept = one.get_future().get();
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->added);
}

// The commit of an add with keep is reported unknown although it applied; before its retry a
// worker runs the job to the end. The retry must recognise its own add — the job was added, and
// is not run again — not call it kept.
TEST_P(JobsOutcomesTest, AKeepAddRetriedAfterAnUnknownCommitReportsItsAddAndNeverRerunsTheJob) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  for (bool batch : {false, true}) {
    SCOPED_TRACE(batch ? "add_many" : "add");
    const std::string type = batch ? "keep_batch" : "keep_one";
    ASSERT_TRUE(jobs().set_type_timeout(type, 60s).ok());
    auto faulty = std::make_shared<kv::FaultInjectingStore>(
        raw_ptr(), kv::FaultOptions{.unknown_result_rate = 1, .seed = 7});
    std::mutex mu;
    std::optional<std::string> ran;
    auto hooked = std::make_shared<HookedStore>(faulty, [&] {
      std::lock_guard lock(mu);
      if (ran || faulty->counts().unknown_applied == 0) return;
      faulty->set_options({});
      auto job = jobs().accept(type);
      ASSERT_TRUE(job.ok()) << job.status().to_string();
      ASSERT_TRUE(jobs().finish(*job).ok());
      ran = job->id;
    });
    auto producer = Jobs::open(
        hooked, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
    ASSERT_TRUE(producer.ok());
    const jobs::AddOptions keep{.if_exists = IfExists::kKeep};
    if (batch) {
      auto added = (*producer)->add_many(type, {{"k1", "{}", keep}, {"k2", "{}", keep}});
      ASSERT_TRUE(added.ok()) << added.status().to_string();
      EXPECT_EQ(added->added, 2u);
      EXPECT_TRUE(added->kept.empty()) << "the retry called kept what its own commit added";
    } else {
      auto added = (*producer)->add(type, "k1", "{}", keep);
      ASSERT_TRUE(added.ok()) << added.status().to_string();
      EXPECT_TRUE(added->added) << "the retry called kept what its own commit added";
    }
    ASSERT_TRUE(ran.has_value()) << "no commit was reported unknown after applying";
    EXPECT_EQ(info_of(*ran, type).state, State::kFinished) << "the job would run a second time";
    EXPECT_EQ(info_of(*ran, type).attempts, 1u);
  }
}

// Under the fault injector's unknown results (the _faults variant), a producer re-adding with
// keep never makes a finished job run again.
TEST_P(JobsOutcomesTest, KeepAddsNeverRunAFinishedJobTwice) {
  const jobs::AddOptions keep{.if_exists = IfExists::kKeep};
  std::vector<NewJob> batch;
  for (int i = 0; i < 20; ++i) {
    const std::string id = "j" + std::to_string(i);
    if (i % 2 == 0) {
      auto added = jobs().add("work", id, "{}", keep);
      ASSERT_TRUE(added.ok()) << added.status().to_string();
      EXPECT_TRUE(added->added) << id;
    } else {
      batch.push_back({id, "{}", keep});
    }
  }
  auto added = jobs().add_many("work", batch);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(added->added, batch.size());
  std::multiset<std::string> runs;
  for (int round = 0; round < 3; ++round) {
    for (;;) {
      auto job = jobs().accept("work");
      if (job.status().code() == Code::kDeadlineExceeded) break;
      ASSERT_TRUE(job.ok()) << job.status().to_string();
      runs.insert(job->id);
      ASSERT_TRUE(jobs().finish(*job).ok());
    }
    for (int i = 0; i < 20; ++i) {
      auto again = jobs().add("work", "j" + std::to_string(i), R"({"again":1})", keep);
      ASSERT_TRUE(again.ok()) << again.status().to_string();
      EXPECT_FALSE(again->added);
    }
    std::vector<NewJob> all;
    for (int i = 0; i < 20; ++i) all.push_back({"j" + std::to_string(i), "{}", keep});
    auto kept = jobs().add_many("work", all);
    ASSERT_TRUE(kept.ok()) << kept.status().to_string();
    EXPECT_EQ(kept->added, 0u);
    EXPECT_EQ(kept->kept.size(), 20u);
  }
  EXPECT_EQ(runs.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(runs.count("j" + std::to_string(i)), 1u);
}

// ---- Re-add and rerun ----

TEST_P(JobsOutcomesTest, ReAddingAFinishedJobStartsItOver) {
  ASSERT_TRUE(jobs().add("work", "f", R"({"v":1})").ok());
  Job job = accept_now("work", {.worker = "w1"});
  ASSERT_EQ(job.id, "f");
  ASSERT_EQ(*jobs().release_worker("", "w1"), 1u);  // a lost run: an error, and pending again
  job = accept_now();
  ASSERT_EQ(job.id, "f");
  ASSERT_TRUE(jobs().update(job, jobs::UpdateOptions{.progress = R"({"pct":50})"}).ok());
  ASSERT_TRUE(jobs().finish(job, FinishOptions{.result = R"({"ok":true})"}).ok());
  JobInfo done = info_of("f");
  ASSERT_EQ(done.state, State::kFinished);
  EXPECT_EQ(done.outcome, Outcome::kSucceeded);
  EXPECT_EQ(done.attempts, 2u);
  EXPECT_EQ(done.errors.size(), 1u);
  EXPECT_EQ(done.result, R"({"ok":true})");

  auto added = jobs().add("work", "f", R"({"v":2})");
  ASSERT_TRUE(added.ok());
  EXPECT_TRUE(added->added);
  JobInfo again = info_of("f");
  EXPECT_EQ(again.state, State::kPending);
  EXPECT_EQ(again.data, R"({"v":2})");
  EXPECT_EQ(again.attempts, 0u);
  EXPECT_TRUE(again.errors.empty());
  EXPECT_FALSE(again.result);
  EXPECT_FALSE(again.progress);
  EXPECT_EQ(again.outcome, Outcome::kNone);
  job = accept_now();
  EXPECT_EQ(job.attempt, 1u) << "the re-added job's first attempt";
}

TEST_P(JobsOutcomesTest, RerunStartsAFinishedJobOverKeepingItsDataAndErrors) {
  make_dead("d", R"({"in":1})");
  JobInfo dead = info_of("d");
  ASSERT_EQ(dead.outcome, Outcome::kDead);
  ASSERT_EQ(dead.errors.size(), 1u);

  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().rerun("work", "d", {.scheduled_time_ms = later, .priority = 7}).ok());
  JobInfo rerun = info_of("d");
  EXPECT_EQ(rerun.state, State::kPending);
  EXPECT_EQ(rerun.outcome, Outcome::kNone);
  EXPECT_EQ(rerun.attempts, 0u);
  EXPECT_EQ(rerun.data, R"({"in":1})");
  ASSERT_EQ(rerun.errors.size(), 1u) << "a rerun dead job keeps why it died";
  EXPECT_EQ(rerun.errors[0].message, "boom d");
  EXPECT_EQ(rerun.scheduled_time_ms, later);
  EXPECT_EQ(rerun.priority, 7);
  EXPECT_FALSE(rerun.gave_up);

  EXPECT_EQ(jobs().rerun("work", "d").code(), Code::kWrongState) << "a pending job";
  EXPECT_EQ(info_of("d").scheduled_time_ms, later) << "the refused rerun changed nothing";
  EXPECT_EQ(jobs().rerun("work", "nope").code(), Code::kNotFound);
  EXPECT_EQ(jobs().rerun("work", "").code(), Code::kInvalidArgument);

  // A succeeded job reruns too, at once and at its own priority by default; its result goes.
  make_succeeded("s", R"("done")");
  ASSERT_TRUE(jobs().rerun("work", "s").ok());
  JobInfo s = info_of("s");
  EXPECT_EQ(s.state, State::kPending);
  EXPECT_FALSE(s.result);
  EXPECT_EQ(s.priority, 0);
  EXPECT_LE(s.scheduled_time_ms, wall_ms());
  Job job = accept_now();
  EXPECT_EQ(job.id, "s");
  EXPECT_EQ(job.attempt, 1u);
  EXPECT_EQ(jobs().rerun("work", "s").code(), Code::kWrongState) << "a running job";
}

TEST_P(JobsOutcomesTest, RerunAllRerunsEveryDeadJobInBatchesAndNothingElse) {
  // More than two batches of 256. Through the fault injector fewer: it fails each row read of
  // a batch on its own (2%), where a real store's get_many is one read.
  const size_t kDead = GetParam().faults ? 30 : 600;
  for (size_t from = 0; from < kDead; from += 30) {
    std::vector<NewJob> batch;
    for (size_t i = from; i < from + 30; ++i) batch.push_back({"d" + std::to_string(i), "{}", {}});
    auto added = jobs().add_many("work", batch);
    ASSERT_TRUE(added.ok()) << added.status().to_string();
  }
  ASSERT_TRUE(jobs().set_max_lost_runs("work", 1).ok());
  size_t died = 0;
  while (died < kDead) {
    auto taken = jobs().accept_many("work", 256, {.worker = "w"});
    ASSERT_TRUE(taken.ok()) << taken.status().to_string();
    auto released = jobs().release_worker("", "w");
    ASSERT_TRUE(released.ok()) << released.status().to_string();
    died += taken->size();
  }
  make_succeeded("ok");
  ASSERT_TRUE(jobs().add("work", "gone", "{}").ok());
  ASSERT_TRUE(jobs().cancel("work", "gone").ok());
  ASSERT_TRUE(
      jobs().add("work", "waiting", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  auto before = jobs().count("work");
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->dead, uint64_t{kDead});

  EXPECT_EQ(jobs().rerun_all("work", Outcome::kSucceeded).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().rerun_all("work", Outcome::kNone).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().rerun_all("nosuch").status().code(), Code::kNotFound);

  auto rerun = jobs().rerun_all("work");
  ASSERT_TRUE(rerun.ok()) << rerun.status().to_string();
  // After an unknown commit result a batch may go uncounted (as for remove_all_jobs).
  if (!GetParam().faults) {
    EXPECT_EQ(*rerun, uint64_t{kDead});
  }
  auto after = jobs().count("work");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->dead, 0u);
  EXPECT_EQ(after->cancelled, 1u);
  EXPECT_EQ(after->pending, uint64_t{kDead} + 1);
  EXPECT_EQ(after->finished, 2u);
  EXPECT_EQ(info_of("ok").outcome, Outcome::kSucceeded);
  EXPECT_EQ(info_of("gone").outcome, Outcome::kCancelled);
  JobInfo d = info_of("d" + std::to_string(kDead - 1));
  EXPECT_EQ(d.state, State::kPending);
  EXPECT_EQ(d.attempts, 0u);
  EXPECT_EQ(d.errors.size(), 1u);
  EXPECT_EQ(*jobs().rerun_all("work"), 0u) << "nothing dead is left";

  auto cancelled = jobs().rerun_all("work", Outcome::kCancelled);
  ASSERT_TRUE(cancelled.ok());
  if (!GetParam().faults) {
    EXPECT_EQ(*cancelled, 1u);
  }
  EXPECT_EQ(info_of("gone").state, State::kPending);
}

// ---- Cancel ----

TEST_P(JobsOutcomesTest, CancelEndsAPendingJob) {
  ASSERT_TRUE(jobs().add("work", "p", R"({"v":1})").ok());
  ASSERT_TRUE(jobs().cancel("work", "p").ok());
  JobInfo p = info_of("p");
  EXPECT_EQ(p.state, State::kFinished);
  EXPECT_EQ(p.outcome, Outcome::kCancelled);
  EXPECT_EQ(p.data, R"({"v":1})");
  EXPECT_FALSE(p.gave_up);
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded)
      << "a cancelled job was handed out";
  EXPECT_EQ(jobs().cancel("work", "p").code(), Code::kWrongState);
  EXPECT_EQ(jobs().cancel("work", "nope").code(), Code::kNotFound);
  EXPECT_EQ(jobs().type_stats()["work"].cancelled, 1u);
}

TEST_P(JobsOutcomesTest, CancelEndsARunningJobAndHaltsItsWorker) {
  Job job = add_and_accept("r");
  ASSERT_TRUE(jobs().add("work", "r", "{}").ok());  // resubmitted: the cancel drops that too
  ASSERT_TRUE(jobs().cancel("work", "r").ok());
  JobInfo r = info_of("r");
  EXPECT_EQ(r.state, State::kFinished);
  EXPECT_EQ(r.outcome, Outcome::kCancelled);
  EXPECT_FALSE(r.resubmitted);
  EXPECT_EQ(r.worker, "");
  EXPECT_EQ(r.lost_runs, 0u) << "a cancelled run is not lost";
  EXPECT_TRUE(r.errors.empty()) << "a cancelled run is not failed";

  EXPECT_EQ(jobs().update(job).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().fail(job, {.message = "late"}).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs().snooze(job).code(), Code::kFailedPrecondition);
  const Status finish = jobs().finish(job);
  EXPECT_EQ(finish.code(), Code::kFailedPrecondition);
  EXPECT_EQ(finish.message(), "job 'r' of type 'work' was cancelled") << "names what ended it";
  r = info_of("r");
  EXPECT_EQ(r.outcome, Outcome::kCancelled) << "the halted worker's calls changed it";
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(jobs().cancel("work", "r").code(), Code::kWrongState);
  auto stats = jobs().type_stats()["work"];
  EXPECT_EQ(stats.cancelled, 1u);
  EXPECT_EQ(stats.lost, 0u);
  EXPECT_EQ(stats.failed, 0u);
}

// The commits of a rerun and of a cancel are reported unknown although they applied. The rerun
// job is run to the end before the retry: the retry recognises its own rerun (no kWrongState,
// and the job is not rerun again); the cancel's retry finds the job cancelled by itself and
// succeeds instead of answering kWrongState.
TEST_P(JobsOutcomesTest, RerunAndCancelRetriedAfterAnUnknownCommitRecogniseTheirOwnCommit) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  make_succeeded("s");
  ASSERT_TRUE(jobs().add("work", "c", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());
  auto faulty = std::make_shared<kv::FaultInjectingStore>(
      raw_ptr(), kv::FaultOptions{.unknown_result_rate = 1, .seed = 7});
  std::mutex mu;
  bool run_it = false;
  bool hidden = false;
  uint64_t hidden_before = 0;  // commits hidden by the earlier part of the test
  auto hooked = std::make_shared<HookedStore>(faulty, [&] {
    std::lock_guard lock(mu);
    if (hidden || faulty->counts().unknown_applied == hidden_before) return;
    hidden = true;
    faulty->set_options({});
    if (!run_it) return;
    auto job = jobs().accept("work");
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ASSERT_EQ(job->id, "s");
    ASSERT_TRUE(jobs().finish(*job).ok());
  });
  auto producer = Jobs::open(
      hooked, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(producer.ok());

  run_it = true;
  Status rerun = (*producer)->rerun("work", "s");
  EXPECT_TRUE(rerun.ok()) << rerun.to_string();
  ASSERT_TRUE(hidden) << "no commit was reported unknown after applying";
  JobInfo s = info_of("s");
  EXPECT_EQ(s.state, State::kFinished) << "the retry reran the job again";
  EXPECT_EQ(s.attempts, 1u);

  {
    std::lock_guard lock(mu);
    hidden = false;
    run_it = false;
    hidden_before = faulty->counts().unknown_applied;
  }
  faulty->set_options({.unknown_result_rate = 1, .seed = 8});
  Status cancelled = (*producer)->cancel("work", "c");
  EXPECT_TRUE(cancelled.ok()) << cancelled.to_string();
  ASSERT_TRUE(hidden) << "no commit was reported unknown after applying";
  EXPECT_EQ(info_of("c").outcome, Outcome::kCancelled);
  EXPECT_EQ((*producer)->type_stats()["work"].cancelled, 1u) << "counted once";
}

// ---- list filters and counts ----

TEST_P(JobsOutcomesTest, ListFiltersByOutcomeAndDueAndCountFillsTheNewFields) {
  make_succeeded("s");
  make_dead("d");
  ASSERT_TRUE(jobs().add("work", "c", "{}").ok());
  ASSERT_TRUE(jobs().cancel("work", "c").ok());
  Job running = add_and_accept("r");
  ASSERT_TRUE(jobs().add("work", "due", "{}").ok());
  ASSERT_TRUE(jobs().add("work", "later", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000}).ok());

  auto by = [&](std::string_view name) {
    auto f = jobs::parse_job_filter(name);
    EXPECT_TRUE(f.ok());
    return listed({.state = f->state, .outcome = f->outcome, .due = f->due});
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(by("pending"), (V{"due", "later"}));
  EXPECT_EQ(by("scheduled"), (V{"later"}));
  EXPECT_EQ(by("due"), (V{"due"}));
  EXPECT_EQ(by("running"), (V{"r"}));
  EXPECT_EQ(by("finished"), (V{"c", "d", "s"}));
  EXPECT_EQ(by("succeeded"), (V{"s"}));
  EXPECT_EQ(by("dead"), (V{"d"}));
  EXPECT_EQ(by("cancelled"), (V{"c"}));
  // Each filter alone, without the state it implies.
  EXPECT_EQ(listed({.outcome = Outcome::kDead}), (V{"d"}));
  EXPECT_EQ(listed({.due = false}), (V{"later"}));
  EXPECT_EQ(listed({.due = true}), (V{"due"}));
  EXPECT_TRUE(listed({.state = State::kRunning, .outcome = Outcome::kDead}).empty());
  EXPECT_EQ(jobs().list("work", {.outcome = Outcome::kNone}).status().code(),
            Code::kInvalidArgument);

  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok()) << counts.status().to_string();
  EXPECT_EQ(counts->pending, 2u);
  EXPECT_EQ(counts->scheduled, 1u);
  EXPECT_EQ(counts->running, 1u);
  EXPECT_EQ(counts->finished, 3u);
  EXPECT_EQ(counts->dead, 1u);
  EXPECT_EQ(counts->cancelled, 1u);
  EXPECT_EQ(*jobs().pending_count("work"), 1u) << "pending_count counts the due one";

  // Scheduled jobs at several priorities, and a limit.
  ASSERT_TRUE(
      jobs()
          .add("work", "later2", "{}", {.scheduled_time_ms = wall_ms() + 3'600'000, .priority = -3})
          .ok());
  ASSERT_TRUE(jobs().add("work", "due2", "{}", {.priority = 4}).ok());
  counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, 4u);
  EXPECT_EQ(counts->scheduled, 2u);
  EXPECT_EQ(jobs().count("work", 1)->scheduled, 1u);
  ASSERT_TRUE(jobs().finish(running).ok());
}

// ---- Watchers ----

TEST_P(JobsOutcomesTest, AWaiterForFinishedWakesWhenTheJobDiesOrIsCancelled) {
  for (bool cancel : {false, true}) {
    SCOPED_TRACE(cancel ? "cancelled" : "dead");
    const std::string id = cancel ? "c" : "d";
    Job job = add_and_accept(id);
    auto sub = jobs().subscribe("work", id);
    ASSERT_TRUE(sub.ok()) << sub.status().to_string();
    auto waited = std::async(
        std::launch::async, [&] { return (*sub)->wait(State::kFinished, kv::Clock::now() + 20s); });
    ASSERT_EQ(waited.wait_for(200ms), std::future_status::timeout) << "woke while running";
    if (cancel) {
      ASSERT_TRUE(jobs().cancel("work", id).ok());
    } else {
      ASSERT_TRUE(jobs().fail(job, {.message = "no", .retry = false}).ok());
    }
    auto event = waited.get();
    ASSERT_TRUE(event.ok()) << event.status().to_string();
    EXPECT_TRUE(event->found);
    EXPECT_EQ(event->state, State::kFinished);
    EXPECT_EQ(event->outcome, cancel ? Outcome::kCancelled : Outcome::kDead);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsOutcomesTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
