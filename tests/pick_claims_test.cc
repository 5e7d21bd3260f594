// Accept attempts that overlap in one process (src/jobs/accept/local_accepts.h, PickClaims),
// white-box on real LMDB: each passes over the due jobs another is taking instead of picking the
// same one and failing its commit, and none is told "nothing due" while such a job may still come
// back.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "jobs/accept/pending_picks.h"
#include "jobs/job_store.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "support/lmdb_jobs_white_box.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::Job;
using jobs::PickClaims;

class PickClaimsTest : public LmdbJobsWhiteBox {
 protected:
  void add(const std::string& id) { ASSERT_TRUE(jobs_->add("work", id, "{}").ok()); }

  std::unique_ptr<kv::Transaction> begin() {
    auto txn = store_->begin();
    EXPECT_TRUE(txn.ok());
    // Its first read fixes its snapshot: now, not when it first looks at the queue.
    EXPECT_TRUE((*txn)->get("snapshot").ok());
    return std::move(*txn);
  }

  // One look in order for one taker, in `txn`, as an attempt holding `claims` makes it.
  Result<std::vector<Job>> look(kv::Transaction& txn, PickClaims* claims,
                                std::optional<int64_t>* next_due = nullptr) {
    return jobs::try_accept_many(txn, scope_, "work", {}, {{jobs::new_lock("work"), "", ""}},
                                 next_due, jobs::Pick::kInOrder, nullptr, false, claims);
  }
};

TEST_F(PickClaimsTest, OverlappingLooksTakeDifferentJobsAndBothCommit) {
  add("j1");
  add("j2");
  PickClaims first(local_.claims), second(local_.claims);
  first.new_try();
  second.new_try();
  auto one = begin();
  auto two = begin();  // the same snapshot: both see j1 at the head
  auto took_one = look(*one, &first);
  auto took_two = look(*two, &second);
  ASSERT_TRUE(took_one.ok()) << took_one.status().to_string();
  ASSERT_TRUE(took_two.ok()) << took_two.status().to_string();
  EXPECT_EQ(took_one->front().id, "j1");
  EXPECT_EQ(took_two->front().id, "j2") << "the second look took the job the first is taking";
  EXPECT_TRUE(one->commit().ok());
  EXPECT_TRUE(two->commit().ok());
  EXPECT_TRUE(second.after_nothing_taken("type 'work'").ok());
}

TEST_F(PickClaimsTest, ALookThatFindsEveryDueJobClaimedTakesNoneAndCountsTheTypeDueAgainSoon) {
  add("j1");
  PickClaims first(local_.claims), second(local_.claims);
  first.new_try();
  second.new_try();
  auto one = begin();
  auto two = begin();
  ASSERT_TRUE(look(*one, &first).ok());
  std::optional<int64_t> next_due;
  const int64_t before = jobs::now_ms();
  auto none = look(*two, &second, &next_due);
  EXPECT_EQ(none.status().code(), Code::kNotFound) << "it took the job the first is taking";
  EXPECT_EQ(second.after_nothing_taken("type 'work'").code(), Code::kAborted)
      << "its caller would be told nothing is due while the first may yet fail";
  ASSERT_TRUE(next_due.has_value()) << "nothing would look again if the first fails";
  EXPECT_GE(*next_due, before);
  EXPECT_LE(*next_due, jobs::now_ms() + 1);
  EXPECT_TRUE(one->commit().ok());
}

TEST_F(PickClaimsTest, AClaimLetGoAfterATryBeganStillHoldsForItsOlderSnapshot) {
  add("j1");
  add("j2");
  PickClaims first(local_.claims), second(local_.claims);
  second.new_try();
  auto two = begin();  // its snapshot: j1 and j2 pending
  first.new_try();
  {
    auto one = begin();
    ASSERT_TRUE(look(*one, &first).ok());
    ASSERT_TRUE(one->commit().ok());  // j1 is taken
  }
  first.let_go();
  auto took = look(*two, &second);
  ASSERT_TRUE(took.ok()) << took.status().to_string();
  EXPECT_EQ(took->front().id, "j2") << "it took j1, which its snapshot still shows pending";
  EXPECT_TRUE(two->commit().ok());
}

TEST_F(PickClaimsTest, AClaimLetGoBeforeATryBeganIsNoLongerPassedOver) {
  add("j1");
  PickClaims first(local_.claims), second(local_.claims);
  first.new_try();
  ASSERT_TRUE(first.claim("work", "j1"));
  first.let_go();  // its try failed before taking it: j1 is still pending
  second.new_try();
  auto txn = begin();
  auto took = look(*txn, &second);
  ASSERT_TRUE(took.ok()) << took.status().to_string();
  EXPECT_EQ(took->front().id, "j1");
  EXPECT_TRUE(txn->commit().ok());
}

// An attempt is never told "nothing due" while the only due job is claimed by an attempt that
// may still fail: it tries again, and takes the job once that attempt let go of it without
// taking it. So for one whose caller would not wait, and for one that would (it arms a watch).
TEST_F(PickClaimsTest, AnAttemptRetriesWhileEveryDueJobIsClaimed) {
  for (const bool waits : {false, true}) {
    const std::string id = waits ? "j2" : "j1";
    add(id);
    PickClaims failing(local_.claims);
    failing.new_try();
    ASSERT_TRUE(failing.claim("work", id));
    std::thread let_go([&] {
      std::this_thread::sleep_for(100ms);
      failing.let_go();
    });
    const auto start = kv::Clock::now();
    kv::Watch watch;
    auto jobs =
        jobs::attempt_accept_many(*store_, scope_, "work", {}, {{jobs::new_lock("work"), "", ""}},
                                  nullptr, waits ? &watch : nullptr, jobs::ArmWatch::kAlways);
    let_go.join();
    ASSERT_TRUE(jobs.ok()) << (waits ? "waiting: " : "") << jobs.status().to_string();
    EXPECT_EQ(jobs->front().id, id);
    EXPECT_GE(kv::Clock::now() - start, 90ms) << "it did not wait for the claim";
  }
}

}  // namespace
}  // namespace kvq::testing
