// Batches with a completion callback (kvq/workflows.h): the callback added exactly once when
// the batch is sealed and its last member ends, never before the seal; a one-member batch, an
// empty sealed batch, cancelled, removed and dead members, on "success", a rerun after the
// callback fired, adds refused; exactly once under concurrent ends from two Jobs on one store
// and through unknown commit results, on every backend and through the fault injector.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "kvq/workflows.h"
#include "support/backends.h"
#include "support/jobs_fixture.h"
#include "support/unknown_commit_once.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AddOptions;
using jobs::BatchInfo;
using jobs::BatchOn;
using jobs::BatchSpec;
using jobs::BatchState;
using jobs::Job;
using jobs::JobInfo;
using jobs::Jobs;
using jobs::NewJob;
using jobs::Outcome;
using jobs::State;
using Json = nlohmann::json;

AddOptions in(const std::string& batch) {
  AddOptions o;
  o.batch = batch;
  return o;
}

BatchSpec callback(const std::string& id, BatchOn on = BatchOn::kComplete,
                   const std::string& data = R"({"report":"weekly"})") {
  return BatchSpec{"cb", id, data, on};
}

class JobsBatchesTest : public JobsFixture {
 protected:
  void SetUp() override {
    JobsFixture::SetUp();
    ASSERT_TRUE(jobs().set_type_timeout("cb", 60s).ok());
  }
  void put(const std::string& batch, const BatchSpec& spec) {
    auto b = jobs().put_batch(batch, spec);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
  }
  BatchInfo seal(const std::string& batch) {
    auto b = jobs().seal_batch(batch);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    return b.ok() ? *b : BatchInfo{};
  }
  BatchInfo batch_of(const std::string& batch) {
    auto b = jobs().batch(batch);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    return b.ok() ? *b : BatchInfo{};
  }
  void add(const std::string& id, const AddOptions& o = {}) {
    auto added = jobs().add("work", id, "{}", o);
    ASSERT_TRUE(added.ok()) << id << ": " << added.status().to_string();
  }
  Job take(const std::string& id, const std::string& type = "work") {
    auto job = jobs().accept_job(type, id);
    EXPECT_TRUE(job.ok()) << id << ": " << job.status().to_string();
    return job.ok() ? *job : Job{};
  }
  void succeed(const std::string& id) {
    Job job = take(id);
    ASSERT_TRUE(jobs().finish(job, {.result = "1"}).ok());
  }
  void kill(const std::string& id) {
    Job job = take(id);
    auto failed = jobs().fail(job, {.message = "boom " + id, .retry = false});
    ASSERT_TRUE(failed.ok()) << failed.status().to_string();
    ASSERT_TRUE(failed->dead);
  }
  // The callback job `id` of type "cb", or nullopt if it was never added.
  std::optional<JobInfo> callback_job(const std::string& id) {
    auto info = jobs().get("cb", id);
    if (info.status().code() == Code::kNotFound) return std::nullopt;
    EXPECT_TRUE(info.ok()) << info.status().to_string();
    return info.ok() ? std::optional<JobInfo>(*info) : std::nullopt;
  }
  // The "batch" field of the callback job's data.
  Json callback_counts(const std::string& id) {
    auto job = callback_job(id);
    if (!job) return Json();
    return Json::parse(job->data).value("batch", Json());
  }
  uint64_t fired() {
    auto totals = jobs().batch_totals();
    EXPECT_TRUE(totals.ok()) << totals.status().to_string();
    return totals.ok() ? totals->fired : 0;
  }
};

TEST(JobsBatchNames, OnAndStateParseAndNameThemselves) {
  EXPECT_EQ(*jobs::parse_batch_on("complete"), BatchOn::kComplete);
  EXPECT_EQ(*jobs::parse_batch_on("success"), BatchOn::kSuccess);
  auto bad = jobs::parse_batch_on("always");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("complete or success"), std::string::npos);
  EXPECT_EQ(jobs::batch_state_name(BatchState::kSkipped), "skipped");
  EXPECT_EQ(jobs::batch_on_name(BatchOn::kSuccess), "success");
}

TEST_P(JobsBatchesTest, AOneMemberBatchFiresOnceWithItsCountsInTheCallbacksData) {
  put("b", callback("done"));
  add("a", in("b"));
  EXPECT_EQ(jobs().get("work", "a")->batch, "b");
  BatchInfo sealed = seal("b");
  EXPECT_EQ(sealed.state, BatchState::kSealed);
  EXPECT_EQ(sealed.members, 1u);
  EXPECT_EQ(sealed.unfinished(), 1u);
  EXPECT_FALSE(callback_job("done")) << "fired before its member ended";
  succeed("a");
  BatchInfo b = batch_of("b");
  EXPECT_EQ(b.state, BatchState::kFired);
  EXPECT_EQ(b.succeeded, 1u);
  EXPECT_EQ(b.unfinished(), 0u);
  EXPECT_GT(b.settled_ms, 0);
  auto cb = callback_job("done");
  ASSERT_TRUE(cb);
  EXPECT_EQ(cb->state, State::kPending);
  Json data = Json::parse(cb->data);
  EXPECT_EQ(data["report"], "weekly") << "the callback keeps its own data";
  EXPECT_EQ(data["batch"]["id"], "b");
  EXPECT_EQ(data["batch"]["members"], 1);
  EXPECT_EQ(data["batch"]["succeeded"], 1);
  EXPECT_EQ(data["batch"]["dead"], 0);
  EXPECT_EQ(data["batch"]["dead_jobs"], Json::array());
  EXPECT_EQ(fired(), 1u);
  EXPECT_TRUE(jobs().get("work", "a")->batch.empty()) << "an ended member is in no batch";
}

TEST_P(JobsBatchesTest, AnEmptyBatchFiresAtItsSealAndASecondSealChangesNothing) {
  put("empty", callback("done"));
  EXPECT_FALSE(callback_job("done"));
  BatchInfo b = seal("empty");
  EXPECT_EQ(b.state, BatchState::kFired);
  EXPECT_EQ(b.members, 0u);
  EXPECT_EQ(callback_counts("done")["members"], 0);
  Job cb = take("done", "cb");
  ASSERT_TRUE(jobs().finish(cb).ok());
  EXPECT_EQ(seal("empty").state, BatchState::kFired);
  EXPECT_EQ(callback_job("done")->state, State::kFinished) << "a second seal fired again";
  EXPECT_EQ(fired(), 1u);
}

TEST_P(JobsBatchesTest, AnUnsealedBatchNeverFiresAndItsSealFiresOnceAllHaveEnded) {
  put("b", callback("done"));
  add("a", in("b"));
  add("c", in("b"));
  succeed("a");
  succeed("c");
  BatchInfo open = batch_of("b");
  EXPECT_EQ(open.state, BatchState::kOpen);
  EXPECT_EQ(open.succeeded, 2u);
  EXPECT_FALSE(callback_job("done")) << "an unsealed batch fired";
  EXPECT_EQ(seal("b").state, BatchState::kFired);
  EXPECT_EQ(callback_counts("done")["succeeded"], 2);
}

TEST_P(JobsBatchesTest, CancelledRemovedAndDeadMembersAreCountedAndTheDeadNamed) {
  put("b", callback("done"));
  for (const char* id : {"ok", "gone", "stopped", "dead1", "dead2"}) add(id, in("b"));
  seal("b");
  succeed("ok");
  ASSERT_TRUE(jobs().cancel("work", "stopped").ok());
  ASSERT_TRUE(jobs().remove("work", "gone").ok());
  kill("dead2");
  BatchInfo b = batch_of("b");
  EXPECT_EQ(b.state, BatchState::kSealed);
  EXPECT_EQ(b.unfinished(), 1u);
  EXPECT_EQ(b.cancelled, 2u) << "a member removed before it ended counts cancelled";
  kill("dead1");
  Json counts = callback_counts("done");
  ASSERT_TRUE(counts.is_object()) << "no callback";
  EXPECT_EQ(counts["members"], 5);
  EXPECT_EQ(counts["succeeded"], 1);
  EXPECT_EQ(counts["cancelled"], 2);
  EXPECT_EQ(counts["dead"], 2);
  EXPECT_EQ(counts["dead_jobs"], Json::parse(R"([{"type":"work","id":"dead1"},
                                                  {"type":"work","id":"dead2"}])"));
}

TEST_P(JobsBatchesTest, RetriesAreNotEndsAndOnlyTheLastAttemptCounts) {
  put("b", callback("done"));
  add("a", in("b"));
  seal("b");
  Job job = take("a");
  auto failed = jobs().fail(job, {.message = "again", .retry_in = 0ms});
  ASSERT_TRUE(failed.ok()) << failed.status().to_string();
  ASSERT_FALSE(failed->dead);
  EXPECT_EQ(batch_of("b").unfinished(), 1u);
  EXPECT_FALSE(callback_job("done"));
  succeed("a");
  EXPECT_EQ(callback_counts("done")["succeeded"], 1);
}

TEST_P(JobsBatchesTest, OnSuccessFiresOnlyWhenEveryMemberSucceeded) {
  put("good", callback("good_cb", BatchOn::kSuccess));
  put("bad", callback("bad_cb", BatchOn::kSuccess));
  add("g1", in("good"));
  add("x1", in("bad"));
  add("x2", in("bad"));
  seal("good");
  seal("bad");
  succeed("g1");
  EXPECT_EQ(batch_of("good").state, BatchState::kFired);
  EXPECT_TRUE(callback_job("good_cb"));
  kill("x1");
  EXPECT_EQ(batch_of("bad").state, BatchState::kSealed) << "settled before its last member ended";
  succeed("x2");
  BatchInfo bad = batch_of("bad");
  EXPECT_EQ(bad.state, BatchState::kSkipped);
  EXPECT_FALSE(callback_job("bad_cb")) << "a failed batch fired on success";
  auto totals = jobs().batch_totals();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->fired, 1u);
  EXPECT_EQ(totals->skipped, 1u);
}

TEST_P(JobsBatchesTest, AMemberRerunAfterTheCallbackFiredDoesNotFireItAgain) {
  put("b", callback("done"));
  add("a", in("b"));
  seal("b");
  kill("a");
  Job cb = take("done", "cb");
  ASSERT_TRUE(jobs().finish(cb).ok());
  ASSERT_TRUE(jobs().rerun("work", "a").ok());
  EXPECT_TRUE(jobs().get("work", "a")->batch.empty()) << "a rerun is no member";
  succeed("a");
  EXPECT_EQ(callback_job("done")->state, State::kFinished) << "the rerun fired the callback again";
  BatchInfo b = batch_of("b");
  EXPECT_EQ(b.dead, 1u) << "the batch counts the member's first end";
  EXPECT_EQ(b.succeeded, 0u);
  EXPECT_EQ(fired(), 1u);
  // Added anew naming the sealed batch, it cannot join again.
  EXPECT_EQ(jobs().add("work", "a", "{}", in("b")).status().code(), Code::kWrongState);
}

TEST_P(JobsBatchesTest, AddsToASealedOrMissingBatchAreRefusedNamingIt) {
  put("b", callback("done"));
  add("a", in("b"));
  seal("b");
  auto sealed = jobs().add("work", "late", "{}", in("b"));
  EXPECT_EQ(sealed.status().code(), Code::kWrongState);
  EXPECT_NE(sealed.status().message().find("batch 'b' is sealed"), std::string::npos)
      << sealed.status().to_string();
  EXPECT_EQ(jobs().get("work", "late").status().code(), Code::kNotFound) << "changed something";
  auto missing = jobs().add("work", "x", "{}", in("nope"));
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("batch 'nope'"), std::string::npos);
  auto batched = jobs().add_many("work", {NewJob{"y1", "{}", in("nope")}});
  EXPECT_EQ(batched.status().code(), Code::kNotFound);
  // A pending job joins no batch by a later add; re-adding a member to its own batch is fine.
  put("other", callback("done2"));
  add("p");
  EXPECT_EQ(jobs().add("work", "p", "{}", in("other")).status().code(), Code::kWrongState);
  EXPECT_TRUE(jobs().add("work", "a", R"({"v":2})", in("b")).ok());
  EXPECT_EQ(batch_of("b").members, 1u);
}

TEST_P(JobsBatchesTest, PutBatchChecksItsCallbackAndASealedBatchKeepsIt) {
  EXPECT_EQ(jobs().put_batch("b", BatchSpec{"nosuch", "x"}).status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().put_batch("b", BatchSpec{"cb", "x", "[1]"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().put_batch("", callback("x")).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().batch("b").status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().seal_batch("b").status().code(), Code::kNotFound);
  put("b", callback("one"));
  add("a", in("b"));
  put("b", callback("two"));  // open: the callback changes, the members stay
  EXPECT_EQ(batch_of("b").spec.callback_id, "two");
  EXPECT_EQ(batch_of("b").members, 1u);
  seal("b");
  EXPECT_EQ(jobs().put_batch("b", callback("three")).status().code(), Code::kWrongState);
  EXPECT_TRUE(jobs().put_batch("b", callback("two")).ok()) << "the same spec again is no change";
  succeed("a");
  EXPECT_TRUE(callback_job("two"));
  EXPECT_FALSE(callback_job("one"));
}

TEST_P(JobsBatchesTest, MembersCancelledByADependencyAreCountedAtOnce) {
  put("b", callback("done"));
  add("dep");
  AddOptions waits = in("b");
  waits.depends_on = {{"work", "dep"}};
  add("w", waits);
  EXPECT_EQ(jobs().get("work", "w")->state, State::kWaiting);
  seal("b");
  kill("dep");  // w is cancelled in the same transaction, and so counted
  EXPECT_EQ(jobs().get("work", "w")->outcome, Outcome::kCancelled);
  EXPECT_EQ(callback_counts("done")["cancelled"], 1);
  // A job cancelled at its very add (its dependency is dead already) counts at its add.
  put("c", callback("done_c"));
  AddOptions late = in("c");
  late.depends_on = {{"work", "dep"}};
  add("w2", late);
  BatchInfo c = batch_of("c");
  EXPECT_EQ(c.members, 1u);
  EXPECT_EQ(c.cancelled, 1u);
  EXPECT_EQ(seal("c").state, BatchState::kFired);
}

// Two processes (two Jobs on one store) finish a batch's last two members at the same moment,
// over and over: each batch fires once, counting both.
TEST_P(JobsBatchesTest, TheLastTwoMembersEndingConcurrentlyFireTheCallbackOnce) {
  if (GetParam().faults) GTEST_SKIP() << "two processes on the raw store";
  auto second = Jobs::open(raw_ptr(), {.key_prefix = "t", .run_scheduler = false});
  ASSERT_TRUE(second.ok());
  constexpr int kRounds = 15;
  for (int r = 0; r < kRounds; ++r) {
    const std::string b = "b" + std::to_string(r), x = "x" + std::to_string(r),
                      y = "y" + std::to_string(r), cb = "cb" + std::to_string(r);
    put(b, callback(cb));
    add(x, in(b));
    add(y, in(b));
    seal(b);
    Job jx = take(x);
    auto jy = (*second)->accept_job("work", y);
    ASSERT_TRUE(jy.ok()) << jy.status().to_string();
    Status sx, sy;
    std::thread t1([&] { sx = jobs().finish(jx); });
    std::thread t2([&] { sy = (*second)->finish(*jy); });
    t1.join();
    t2.join();
    ASSERT_TRUE(sx.ok()) << sx.to_string();
    ASSERT_TRUE(sy.ok()) << sy.to_string();
    BatchInfo info = batch_of(b);
    EXPECT_EQ(info.state, BatchState::kFired) << b;
    EXPECT_EQ(info.succeeded, 2u) << b;
    EXPECT_EQ(callback_counts(cb)["succeeded"], 2) << b;
  }
  EXPECT_EQ(fired(), static_cast<uint64_t>(kRounds)) << "a batch fired twice, or never";
  auto pending = jobs().count("cb");
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->pending, static_cast<uint64_t>(kRounds));
}

// The commit of a member's finish applies but is reported unknown; the finish is retried. Had
// the retry counted again, the batch of two would fire with its other member unfinished.
TEST_P(JobsBatchesTest, AFinishRetriedAfterAnUnknownCommitCountsOnce) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  put("b", callback("done"));
  add("a", in("b"));
  add("c", in("b"));
  seal("b");
  Job ja = take("a");
  auto worker = std::make_unique<UnknownCommitOnce>(raw_ptr(), 17);
  ASSERT_TRUE(worker->jobs());
  ASSERT_FALSE(worker->happened()) << "the fault was spent before the call";
  ASSERT_TRUE(worker->jobs()->finish(ja).ok());
  ASSERT_TRUE(worker->happened()) << "no commit was reported unknown after applying";
  BatchInfo b = batch_of("b");
  EXPECT_EQ(b.succeeded, 1u) << "the finish was counted twice";
  EXPECT_EQ(b.state, BatchState::kSealed);
  EXPECT_FALSE(callback_job("done")) << "fired with a member unfinished";
  succeed("c");
  EXPECT_EQ(batch_of("b").state, BatchState::kFired);
  EXPECT_EQ(callback_counts("done")["succeeded"], 2);
  EXPECT_EQ(fired(), 1u);
}

// The last member's finish, which fires the callback, applies but is reported unknown and is
// retried: the callback is added once (the retry finds the member ended and does nothing).
TEST_P(JobsBatchesTest, TheFiringFinishRetriedAfterAnUnknownCommitFiresOnce) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  put("b", callback("done"));
  add("a", in("b"));
  seal("b");
  Job ja = take("a");
  auto worker = std::make_unique<UnknownCommitOnce>(raw_ptr(), 17);
  ASSERT_TRUE(worker->jobs());
  ASSERT_FALSE(worker->happened()) << "the fault was spent before the call";
  ASSERT_TRUE(worker->jobs()->finish(ja).ok());
  ASSERT_TRUE(worker->happened());
  EXPECT_EQ(batch_of("b").succeeded, 1u);
  EXPECT_EQ(fired(), 1u) << "the retry fired again";
  auto cb = callback_job("done");
  ASSERT_TRUE(cb);
  EXPECT_EQ(cb->state, State::kPending);
}

// A seal that fires an empty batch, reported unknown and retried, fires once; an add to the
// batch retried so counts one member.
TEST_P(JobsBatchesTest, ASealAndAnAddRetriedAfterAnUnknownCommitApplyOnce) {
  if (GetParam().faults) GTEST_SKIP() << "places its own faults";
  put("e", callback("done"));
  {
    auto u = std::make_unique<UnknownCommitOnce>(raw_ptr(), 17);
    ASSERT_TRUE(u->jobs());
    ASSERT_FALSE(u->happened()) << "the fault was spent before the call";
    auto sealed = u->jobs()->seal_batch("e");
    ASSERT_TRUE(sealed.ok()) << sealed.status().to_string();
    ASSERT_TRUE(u->happened());
    EXPECT_EQ(sealed->state, BatchState::kFired);
  }
  EXPECT_EQ(fired(), 1u);
  put("b", callback("done_b"));
  {
    auto u = std::make_unique<UnknownCommitOnce>(raw_ptr(), 17);
    ASSERT_TRUE(u->jobs());
    ASSERT_FALSE(u->happened()) << "the fault was spent before the call";
    ASSERT_TRUE(u->jobs()->add("work", "a", "{}", in("b")).ok());
    ASSERT_TRUE(u->happened());
  }
  EXPECT_EQ(batch_of("b").members, 1u) << "the add joined twice";
  seal("b");
  succeed("a");
  EXPECT_EQ(batch_of("b").state, BatchState::kFired);
}

TEST_P(JobsBatchesTest, AManyMemberBatchAddedInOneCallFiresWhenTheLastEnds) {
  put("big", callback("done"));
  std::vector<NewJob> members;
  for (int i = 0; i < 50; ++i) members.push_back({"m" + std::to_string(i), "{}", in("big")});
  ASSERT_TRUE(jobs().add_many("work", members).ok());
  EXPECT_EQ(batch_of("big").members, 50u);
  seal("big");
  for (int i = 0; i < 50; ++i) {
    EXPECT_FALSE(callback_job("done")) << "fired with " << 50 - i << " members left";
    succeed("m" + std::to_string(i));
  }
  EXPECT_EQ(callback_counts("done")["succeeded"], 50);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsBatchesTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
