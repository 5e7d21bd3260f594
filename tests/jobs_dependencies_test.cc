// Dependencies between jobs (kvq/workflows.h): waiting jobs, their release when the last
// dependency succeeds, on_dependency_failure, cycles and missing dependencies refused at add,
// exactly one release under concurrent ends and through an unknown commit result, on every
// backend and through the fault injector.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "kvq/workflows.h"
#include "support/backends.h"
#include "support/jobs_fixture.h"
#include "support/unknown_commit_once.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptOptions;
using jobs::AddOptions;
using jobs::DependencyRef;
using jobs::Job;
using jobs::JobInfo;
using jobs::Jobs;
using jobs::NewJob;
using jobs::OnDependencyFailure;
using jobs::Outcome;
using jobs::State;

AddOptions after(std::vector<std::string> ids,
                 OnDependencyFailure policy = OnDependencyFailure::kCancel,
                 const std::string& type = "work") {
  AddOptions o;
  for (auto& id : ids) o.depends_on.push_back(DependencyRef{type, std::move(id)});
  o.on_dependency_failure = policy;
  return o;
}

class JobsDependenciesTest : public JobsFixture {
 protected:
  void add(const std::string& id, const AddOptions& o = {}, const std::string& type = "work") {
    auto added = jobs().add(type, id, "{}", o);
    ASSERT_TRUE(added.ok()) << id << ": " << added.status().to_string();
  }
  JobInfo info_of(const std::string& id, const std::string& type = "work") {
    auto info = jobs().get(type, id);
    EXPECT_TRUE(info.ok()) << id << ": " << info.status().to_string();
    return info.ok() ? *info : JobInfo{};
  }
  // Takes the due job `id` by name (accept_job), for a test that needs it running.
  Job take(const std::string& id, const std::string& type = "work") {
    auto job = jobs().accept_job(type, id);
    EXPECT_TRUE(job.ok()) << id << ": " << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
  void succeed(const std::string& id, const std::string& result = "1") {
    Job job = take(id);
    ASSERT_TRUE(jobs().finish(job, {.result = result}).ok());
  }
  void kill(const std::string& id) {
    Job job = take(id);
    auto failed = jobs().fail(job, {.message = "boom " + id, .retry = false});
    ASSERT_TRUE(failed.ok()) << failed.status().to_string();
    ASSERT_TRUE(failed->dead);
  }
  // Every due job an accept hands out now, in order, finishing none.
  std::vector<std::string> accept_all(const std::string& type = "work") {
    std::vector<std::string> ids;
    for (;;) {
      auto job = jobs().accept(type);
      if (!job.ok()) {
        EXPECT_EQ(job.status().code(), Code::kDeadlineExceeded) << job.status().to_string();
        return ids;
      }
      ids.push_back(job->id);
    }
  }
};

TEST(JobsDependencyNames, OnDependencyFailureAndWaitingParseTheirNames) {
  EXPECT_EQ(*jobs::parse_on_dependency_failure("cancel"), OnDependencyFailure::kCancel);
  EXPECT_EQ(*jobs::parse_on_dependency_failure("run"), OnDependencyFailure::kRun);
  auto bad = jobs::parse_on_dependency_failure("ignore");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("cancel or run"), std::string::npos);
  EXPECT_EQ(jobs::on_dependency_failure_name(OnDependencyFailure::kRun), "run");
  EXPECT_EQ(*jobs::parse_state("waiting"), State::kWaiting);
  EXPECT_EQ(jobs::state_name(State::kWaiting), "waiting");
}

TEST_P(JobsDependenciesTest,
       AWaitingJobIsNeverAcceptedAndBecomesPendingWhenItsLastDependencySucceeds) {
  add("a");
  add("b");
  add("c", after({"a", "b"}));
  JobInfo c = info_of("c");
  EXPECT_EQ(c.state, State::kWaiting);
  EXPECT_EQ(c.dependencies, 2u);
  EXPECT_EQ(c.waiting_on, 2u);
  EXPECT_TRUE(info_of("a").has_dependents);
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->waiting, 1u);
  EXPECT_EQ(counts->pending, 2u);
  auto page = jobs().list("work", {.state = State::kWaiting});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(page->jobs[0].id, "c");
  EXPECT_EQ(jobs().accept_job("work", "c").status().code(), Code::kWrongState);

  std::vector<std::string> taken = accept_all();
  EXPECT_EQ(taken, (std::vector<std::string>{"a", "b"})) << "a waiting job was accepted";
  EXPECT_EQ(info_of("c").state, State::kWaiting);
}

TEST_P(JobsDependenciesTest, TheLastOfTwoDependenciesToSucceedReleasesTheWaitingJob) {
  add("a");
  add("b");
  add("c", after({"a", "b"}));
  succeed("a", "10");
  EXPECT_EQ(info_of("c").state, State::kWaiting);
  EXPECT_EQ(info_of("c").waiting_on, 1u);
  succeed("b", "20");
  JobInfo c = info_of("c");
  EXPECT_EQ(c.state, State::kPending);
  EXPECT_EQ(c.waiting_on, 0u);
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->waiting, 0u);
  EXPECT_EQ(counts->pending, 1u);
  // The worker of c reads its dependencies' results.
  auto deps = jobs().dependencies("work", "c");
  ASSERT_TRUE(deps.ok()) << deps.status().to_string();
  ASSERT_EQ(deps->size(), 2u);
  EXPECT_EQ((*deps)[0].dependency, (DependencyRef{"work", "a"}));
  EXPECT_EQ((*deps)[0].resolved, Outcome::kSucceeded);
  ASSERT_TRUE((*deps)[0].job);
  EXPECT_EQ((*deps)[0].job->result, "10");
  EXPECT_EQ((*deps)[1].job->result, "20");
  auto job = jobs().accept("work");
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->id, "c");
}

TEST_P(JobsDependenciesTest, AReleasedJobKeepsItsPriorityAndAFutureScheduledTime) {
  const int64_t later = wall_ms() + 3'600'000;
  AddOptions o = after({"a"});
  o.scheduled_time_ms = later;
  o.priority = 7;
  add("a");
  add("c", o);
  succeed("a");
  JobInfo c = info_of("c");
  EXPECT_EQ(c.state, State::kPending);
  EXPECT_EQ(c.scheduled_time_ms, later);
  EXPECT_EQ(c.priority, 7);
}

TEST_P(JobsDependenciesTest, ADeadDependencyCancelsThreeLevelsOfDependentsNamingIt) {
  add("a");
  add("b", after({"a"}));
  add("c", after({"b"}));
  add("d", after({"c"}));
  add("other");
  add("e", after({"other", "d"}));
  kill("a");
  for (const std::string id : {"b", "c", "d", "e"}) {
    JobInfo info = info_of(id);
    EXPECT_EQ(info.state, State::kFinished) << id;
    EXPECT_EQ(info.outcome, Outcome::kCancelled) << id;
    ASSERT_FALSE(info.errors.empty()) << id;
    EXPECT_EQ(info.errors.back().kind, "dependency_failed") << id;
  }
  EXPECT_NE(info_of("b").errors.back().message.find("'a'"), std::string::npos)
      << info_of("b").errors.back().message;
  EXPECT_NE(info_of("b").errors.back().message.find("dead"), std::string::npos);
  EXPECT_NE(info_of("c").errors.back().message.find("'b'"), std::string::npos);
  EXPECT_NE(info_of("d").errors.back().message.find("'c'"), std::string::npos);
  EXPECT_NE(info_of("e").errors.back().message.find("'d'"), std::string::npos);
  EXPECT_EQ(info_of("other").state, State::kPending);
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->waiting, 0u);
  EXPECT_EQ(counts->cancelled, 4u);
  // other's end later finds e already cancelled: nothing to do, nothing breaks.
  succeed("other");
  EXPECT_EQ(info_of("e").outcome, Outcome::kCancelled);
}

TEST_P(JobsDependenciesTest, ACancelledDependencyCancelsItsDependentsAndARemovedOneToo) {
  add("a");
  add("b", after({"a"}));
  ASSERT_TRUE(jobs().cancel("work", "a").ok());
  EXPECT_EQ(info_of("b").outcome, Outcome::kCancelled);
  EXPECT_NE(info_of("b").errors.back().message.find("cancelled"), std::string::npos);
  add("x");
  add("y", after({"x"}));
  ASSERT_TRUE(jobs().remove("work", "x").ok());
  EXPECT_EQ(info_of("y").outcome, Outcome::kCancelled);
}

TEST_P(JobsDependenciesTest, RunPolicyReleasesOnFailureAndARerunThatSucceedsReleasesNothingAgain) {
  add("a");
  add("z");
  add("x", after({"a"}, OnDependencyFailure::kRun));
  add("y", after({"a", "z"}, OnDependencyFailure::kRun));
  kill("a");
  EXPECT_EQ(info_of("x").state, State::kPending);
  EXPECT_EQ(info_of("y").state, State::kWaiting);
  EXPECT_EQ(info_of("y").waiting_on, 1u);
  auto deps = jobs().dependencies("work", "x");
  ASSERT_TRUE(deps.ok());
  ASSERT_EQ(deps->size(), 1u);
  EXPECT_EQ((*deps)[0].resolved, Outcome::kDead);
  succeed("x");
  // a rerun, and succeeding this time: x ran once and stays finished, y still waits on z.
  ASSERT_TRUE(jobs().rerun("work", "a").ok());
  succeed("a");
  EXPECT_EQ(info_of("x").state, State::kFinished);
  EXPECT_EQ(info_of("x").attempts, 1u);
  EXPECT_EQ(info_of("y").state, State::kWaiting);
  EXPECT_EQ(info_of("y").waiting_on, 1u);
  // Added anew and succeeding again: still nothing.
  add("a");
  succeed("a");
  EXPECT_EQ(info_of("y").waiting_on, 1u);
  succeed("z");
  EXPECT_EQ(info_of("y").state, State::kPending);
}

TEST_P(JobsDependenciesTest, DependenciesThatEndedBeforeTheAddResolveAtTheAdd) {
  add("ok");
  succeed("ok");
  add("bad");
  kill("bad");
  add("after_ok", after({"ok"}));
  EXPECT_EQ(info_of("after_ok").state, State::kPending);
  add("after_bad", after({"bad"}));
  EXPECT_EQ(info_of("after_bad").outcome, Outcome::kCancelled);
  EXPECT_NE(info_of("after_bad").errors.back().message.find("'bad'"), std::string::npos);
  add("runs_anyway", after({"bad", "ok"}, OnDependencyFailure::kRun));
  EXPECT_EQ(info_of("runs_anyway").state, State::kPending);
}

TEST_P(JobsDependenciesTest, DependenciesMayBeOfAnotherType) {
  ASSERT_TRUE(jobs().set_type_timeout("fetch", 60s).ok());
  add("f1", {}, "fetch");
  add("report", after({"f1"}, OnDependencyFailure::kCancel, "fetch"));
  EXPECT_EQ(info_of("report").state, State::kWaiting);
  auto job = jobs().accept("fetch");
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(jobs().finish(*job).ok());
  EXPECT_EQ(info_of("report").state, State::kPending);
}

TEST_P(JobsDependenciesTest, AMissingDependencyIsRefusedNamingItUnlessTheSameBatchAddsIt) {
  auto missing = jobs().add("work", "c", "{}", after({"nope"}));
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos)
      << missing.status().to_string();
  EXPECT_EQ(jobs().get("work", "c").status().code(), Code::kNotFound);

  // In one batch, before or after its dependent.
  auto batch = jobs().add_many("work", {{"c", "{}", after({"d", "e"})}, {"d"}, {"e"}});
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  EXPECT_EQ(batch->added, 3u);
  EXPECT_EQ(info_of("c").state, State::kWaiting);
  EXPECT_EQ(info_of("c").waiting_on, 2u);
  EXPECT_EQ(info_of("d").state, State::kPending);
  auto bad = jobs().add_many("work", {{"p"}, {"q", "{}", after({"p", "gone"})}});
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().get("work", "p").status().code(), Code::kNotFound) << "the batch is whole";
}

TEST_P(JobsDependenciesTest, CyclesAndTooManyOrRepeatedDependenciesAreRefused) {
  auto self = jobs().add("work", "s", "{}", after({"s"}));
  EXPECT_EQ(self.status().code(), Code::kInvalidArgument);
  EXPECT_NE(self.status().message().find("cycle"), std::string::npos);
  auto cycle = jobs().add_many(
      "work",
      {{"a", "{}", after({"c"})}, {"b", "{}", after({"a"})}, {"c", "{}", after({"b"})}, {"free"}});
  EXPECT_EQ(cycle.status().code(), Code::kInvalidArgument);
  EXPECT_NE(cycle.status().message().find("cycle"), std::string::npos)
      << cycle.status().to_string();
  EXPECT_EQ(jobs().get("work", "free").status().code(), Code::kNotFound);

  std::vector<std::string> many;
  for (int i = 0; i <= 100; ++i) many.push_back("d" + std::to_string(i));
  auto too_many = jobs().add("work", "m", "{}", after(many));
  EXPECT_EQ(too_many.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("at most 100"), std::string::npos);
  auto twice = jobs().add("work", "t", "{}", after({"x", "x"}));
  EXPECT_EQ(twice.status().code(), Code::kInvalidArgument);

  // An unfinished job cannot take dependencies by a later add.
  add("p");
  add("q");
  EXPECT_EQ(jobs().add("work", "p", "{}", after({"q"})).status().code(), Code::kWrongState);
}

TEST_P(JobsDependenciesTest, OneHundredDependenciesAreAccepted) {
  std::vector<NewJob> batch;
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    ids.push_back("d" + std::to_string(i));
    batch.push_back({ids.back()});
  }
  batch.push_back({"all", "{}", after(ids)});
  auto added = jobs().add_many("work", batch);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(info_of("all").waiting_on, 100u);
}

// Two processes (two Jobs on one store) finish the last two dependencies at the same moment,
// over and over: each release happens once.
TEST_P(JobsDependenciesTest, TheLastTwoDependenciesSucceedingConcurrentlyReleaseTheDependentOnce) {
  if (GetParam().faults) GTEST_SKIP() << "two processes on the raw store";
  auto second = Jobs::open(raw_ptr(), {.key_prefix = "t", .run_scheduler = false});
  ASSERT_TRUE(second.ok());
  constexpr int kRounds = 15;
  for (int r = 0; r < kRounds; ++r) {
    const std::string a = "a" + std::to_string(r), b = "b" + std::to_string(r),
                      c = "c" + std::to_string(r);
    add(a);
    add(b);
    add(c, after({a, b}));
    Job ja = take(a);
    auto jb = (*second)->accept_job("work", b);
    ASSERT_TRUE(jb.ok()) << jb.status().to_string();
    Status sa, sb;
    std::thread t1([&] { sa = jobs().finish(ja); });
    std::thread t2([&] { sb = (*second)->finish(*jb); });
    t1.join();
    t2.join();
    ASSERT_TRUE(sa.ok()) << sa.to_string();
    ASSERT_TRUE(sb.ok()) << sb.to_string();
    JobInfo info = info_of(c);
    EXPECT_EQ(info.state, State::kPending) << c;
    EXPECT_EQ(info.waiting_on, 0u) << c;
  }
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, static_cast<uint64_t>(kRounds));
  EXPECT_EQ(counts->waiting, 0u);
  std::vector<std::string> taken = accept_all();
  EXPECT_EQ(taken.size(), static_cast<size_t>(kRounds)) << "a dependent was queued twice";
}

// The commit of a dependency's finish applies but is reported unknown; the finish is retried.
// Had the retry applied again, c (waiting on a and b) would be released with b unfinished.
TEST_P(JobsDependenciesTest, AFinishRetriedAfterAnUnknownCommitResolvesItsEdgeOnce) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  add("a");
  add("b");
  add("c", after({"a", "b"}));
  add("d", after({"a"}));
  Job ja = take("a");
  UnknownCommitOnce worker(raw_ptr(), 11);
  ASSERT_TRUE(worker.jobs());
  ASSERT_TRUE(worker.jobs()->finish(ja).ok());
  ASSERT_TRUE(worker.happened()) << "no commit was reported unknown after applying";
  EXPECT_EQ(info_of("a").outcome, Outcome::kSucceeded);
  EXPECT_EQ(info_of("c").state, State::kWaiting) << "a's end was applied twice";
  EXPECT_EQ(info_of("c").waiting_on, 1u);
  EXPECT_EQ(info_of("d").state, State::kPending);
  succeed("b");
  EXPECT_EQ(info_of("c").state, State::kPending);
}

// An add with dependencies whose commit is reported unknown, then retried: the job is added once
// and its dependency's row is not marked twice (nothing to see), its edge not doubled.
TEST_P(JobsDependenciesTest, AnAddRetriedAfterAnUnknownCommitWaitsOnItsDependencyOnce) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  add("a");
  UnknownCommitOnce producer(raw_ptr(), 5);
  ASSERT_TRUE(producer.jobs());
  ASSERT_TRUE(producer.jobs()->add("work", "c", "{}", after({"a"})).ok());
  ASSERT_TRUE(producer.happened());
  EXPECT_EQ(info_of("c").waiting_on, 1u);
  succeed("a");
  EXPECT_EQ(info_of("c").state, State::kPending);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsDependenciesTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
