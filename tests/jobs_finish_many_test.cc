// Jobs::finish_many (kvq/jobs.h): a worker's finishes of several jobs in one transaction. Each
// job ends as finish() would end it; one that its worker no longer holds fails alone; bad input
// changes nothing; a retry after an unknown commit result applies each finish once. On every
// backend and through the fault injector.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/jobs_fixture.h"
#include "support/unknown_commit_once.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::FinishOptions;
using jobs::Job;
using jobs::Jobs;
using jobs::Outcome;
using jobs::State;

class JobsFinishManyTest : public JobsFixture {
 protected:
  // Adds `n` jobs j0.. and takes them all.
  std::vector<Job> held(int n) {
    for (int i = 0; i < n; ++i) {
      auto added = jobs().add("work", "j" + std::to_string(i), "{}");
      EXPECT_TRUE(added.ok()) << added.status().to_string();
    }
    auto taken = jobs().accept_many("work", static_cast<size_t>(n), {.timeout = 5s});
    EXPECT_TRUE(taken.ok()) << taken.status().to_string();
    if (!taken.ok()) return {};
    EXPECT_EQ(taken->size(), static_cast<size_t>(n));
    return *taken;
  }
  jobs::JobInfo info_of(const std::string& id) {
    auto info = jobs().get("work", id);
    EXPECT_TRUE(info.ok()) << id << ": " << info.status().to_string();
    return info.ok() ? *info : jobs::JobInfo{};
  }
};

TEST_P(JobsFinishManyTest, FinishesEveryJobWithItsOwnResult) {
  std::vector<Job> taken = held(4);
  ASSERT_EQ(taken.size(), 4u);
  std::vector<FinishOptions> options;
  for (const Job& job : taken) options.push_back({.result = R"({"id":")" + job.id + R"("})"});
  auto done = jobs().finish_many(taken, options);
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 4u);
  for (size_t i = 0; i < taken.size(); ++i) {
    EXPECT_TRUE((*done)[i].ok()) << taken[i].id << ": " << (*done)[i].to_string();
    jobs::JobInfo info = info_of(taken[i].id);
    EXPECT_EQ(info.state, State::kFinished) << taken[i].id;
    EXPECT_EQ(info.outcome, Outcome::kSucceeded) << taken[i].id;
    EXPECT_EQ(info.result, R"({"id":")" + taken[i].id + R"("})") << "results went to other jobs";
  }
  // Without options, each finishes without a result.
  std::vector<Job> more = held(2);
  auto plain = jobs().finish_many(more);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  for (const Job& job : more) {
    EXPECT_EQ(info_of(job.id).outcome, Outcome::kSucceeded) << job.id;
    EXPECT_FALSE(info_of(job.id).result.has_value()) << job.id;
  }
}

// One job cancelled and one removed since they were taken: their finishes fail alone, as
// finish() of each would, and the other jobs commit.
TEST_P(JobsFinishManyTest, AJobItsWorkerNoLongerHoldsFailsAloneAndTheOthersFinish) {
  std::vector<Job> taken = held(4);
  ASSERT_EQ(taken.size(), 4u);
  ASSERT_TRUE(jobs().cancel("work", taken[1].id).ok());
  ASSERT_TRUE(jobs().remove("work", taken[2].id).ok());
  auto done = jobs().finish_many(taken);
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 4u);
  EXPECT_TRUE((*done)[0].ok()) << (*done)[0].to_string();
  EXPECT_EQ((*done)[1].code(), Code::kFailedPrecondition) << (*done)[1].to_string();
  EXPECT_NE((*done)[2].code(), Code::kOk) << "the finish of a removed job passed";
  EXPECT_TRUE((*done)[3].ok()) << (*done)[3].to_string();
  EXPECT_EQ(info_of(taken[0].id).outcome, Outcome::kSucceeded);
  EXPECT_EQ(info_of(taken[1].id).outcome, Outcome::kCancelled) << "a fenced finish changed it";
  EXPECT_EQ(jobs().get("work", taken[2].id).status().code(), Code::kNotFound);
  EXPECT_EQ(info_of(taken[3].id).outcome, Outcome::kSucceeded);
}

TEST_P(JobsFinishManyTest, BadInputFailsTheCallAndFinishesNothing) {
  std::vector<Job> taken = held(2);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(jobs().finish_many({}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().finish_many({taken[0], taken[0]}).status().code(), Code::kInvalidArgument)
      << "a job given twice";
  EXPECT_EQ(jobs().finish_many(taken, {FinishOptions{}}).status().code(), Code::kInvalidArgument)
      << "options for one of two jobs";
  auto bad_result = jobs().finish_many(taken, {{.result = "1"}, {.result = "{not json"}});
  EXPECT_EQ(bad_result.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad_result.status().message().find(taken[1].id), std::string::npos)
      << "the error does not name the job: " << bad_result.status().to_string();
  std::vector<Job> too_many(jobs::kMaxFinishMany + 1, taken[0]);
  EXPECT_EQ(jobs().finish_many(too_many).status().code(), Code::kInvalidArgument);
  for (const Job& job : taken) EXPECT_EQ(info_of(job.id).state, State::kRunning) << job.id;
  auto done = jobs().finish_many(taken);
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  for (const Status& s : *done) EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST_P(JobsFinishManyTest, TheAsyncFormFinishesAsTheBlockingOneDoes) {
  std::vector<Job> taken = held(3);
  ASSERT_EQ(taken.size(), 3u);
  ASSERT_TRUE(jobs().cancel("work", taken[0].id).ok());
  std::promise<Result<std::vector<Status>>> promise;
  jobs().finish_many_async(taken, {},
                           [&](Result<std::vector<Status>> r) { promise.set_value(std::move(r)); });
  auto done = promise.get_future().get();
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  ASSERT_EQ(done->size(), 3u);
  EXPECT_EQ((*done)[0].code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*done)[1].ok() && (*done)[2].ok());
  EXPECT_EQ(info_of(taken[2].id).outcome, Outcome::kSucceeded);
  std::promise<Result<std::vector<Status>>> bad;
  jobs().finish_many_async({}, {}, [&](Result<std::vector<Status>> r) { bad.set_value(r); });
  EXPECT_EQ(bad.get_future().get().status().code(), Code::kInvalidArgument);
}

// The batch's commit applies but is reported unknown; its retry finds every finish it made and
// answers OK for each, as finish() does (were they not recognised, each would be "halt").
TEST_P(JobsFinishManyTest, ARetryAfterAnUnknownCommitFindsEveryFinishApplied) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  std::vector<Job> taken = held(3);
  ASSERT_EQ(taken.size(), 3u);
  UnknownCommitOnce worker(raw_ptr(), 3);
  ASSERT_TRUE(worker.jobs());
  auto done =
      worker.jobs()->finish_many(taken, {{.result = "1"}, {.result = "2"}, {.result = "3"}});
  ASSERT_TRUE(worker.happened()) << "no commit was reported unknown after applying";
  ASSERT_TRUE(done.ok()) << done.status().to_string();
  for (size_t i = 0; i < taken.size(); ++i) {
    EXPECT_TRUE((*done)[i].ok()) << taken[i].id << ": " << (*done)[i].to_string();
    EXPECT_EQ(info_of(taken[i].id).result, std::to_string(i + 1));
  }
  EXPECT_EQ(worker.jobs()->type_stats()["work"].succeeded, 3u)
      << "a finish was counted twice, or not at all";
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsFinishManyTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
