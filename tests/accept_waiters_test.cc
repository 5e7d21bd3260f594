// The accept waiters' wake-up protocol (src/jobs/accept/accept_waiters.h), white-box, on real LMDB:
// the cases a black-box race cannot hit on purpose.
#include "jobs/accept/accept_waiters.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jobs/accept/pending_picks.h"
#include "jobs/schema.h"
#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "support/delivered.h"
#include "support/lmdb_jobs_white_box.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AcceptWaiters;
using jobs::Job;

class AcceptWaitersTest : public LmdbJobsWhiteBox {
 protected:
  void SetUp() override {
    LmdbJobsWhiteBox::SetUp();
    if (HasFatalFailure()) return;
    waiters_ = std::make_unique<AcceptWaiters>(*store_, scope_);
  }
  void TearDown() override { waiters_.reset(); }

  // Queues a waiter on "work" whose own look (if any) began when the live watch was `generation`.
  void wait_for_job(std::optional<uint64_t> generation,
                    std::shared_ptr<Delivered<Result<Job>>> into) {
    waiters_->submit("work", {.timeout = 10s}, jobs::new_lock("work"), kv::Clock::now() + 10s,
                     generation, deliver_to(into), AcceptWaiters::Commit::kBlocking);
  }
  // The live watch's generation once there is one (0 if none came within 5 s).
  uint64_t live_watch() {
    for (auto give_up = kv::Clock::now() + 5s; kv::Clock::now() < give_up;
         std::this_thread::sleep_for(1ms)) {
      if (uint64_t g = waiters_->watch_generation("work")) return g;
    }
    return 0;
  }

  std::unique_ptr<AcceptWaiters> waiters_;
};

TEST_F(AcceptWaitersTest, AWaiterWhoseLookPredatesTheLiveWatchIsLookedForAgain) {
  // A first waiter makes a round arm the type's watch: generation g1.
  auto first = std::make_shared<Delivered<Result<Job>>>();
  wait_for_job(std::nullopt, first);
  const uint64_t g1 = live_watch();
  ASSERT_NE(g1, 0u);
  // A second caller reads g1, then looks and finds nothing (the queue is empty): this is its look.
  // Two jobs land together; g1 fires, and the round that serves the first waiter takes one of
  // them and arms a new watch, which has seen both jobs and will not fire for the one left.
  ASSERT_TRUE(kv::run(*store_, [&](kv::Transaction& txn) -> Status {
                KVQ_RETURN_IF_ERROR(jobs_->add(txn, "work", "j1", "{}"));
                return jobs_->add(txn, "work", "j2", "{}").status();
              }).ok());
  ASSERT_TRUE(first->wait_for(1, 5s));
  ASSERT_TRUE(first->values()[0].ok()) << first->values()[0].status().to_string();
  const uint64_t g2 = waiters_->watch_generation("work");
  ASSERT_NE(g2, 0u);
  ASSERT_NE(g2, g1) << "the round that served the first waiter armed a new watch";
  // The second caller queues with the generation it read before its look. A live watch is not
  // enough: this one was armed after that look, so the job left over must be looked for.
  auto second = std::make_shared<Delivered<Result<Job>>>();
  const auto start = kv::Clock::now();
  wait_for_job(g1, second);
  ASSERT_TRUE(second->wait_for(1, 5s)) << "the job left over never reached the waiter";
  ASSERT_TRUE(second->values()[0].ok()) << second->values()[0].status().to_string();
  EXPECT_NE(second->values()[0]->id, first->values()[0]->id);
  EXPECT_LT(kv::Clock::now() - start, 3s);
}

TEST_F(AcceptWaitersTest, AWaiterCoveredByTheStillLiveWatchIsWokenByTheNextAdd) {
  auto first = std::make_shared<Delivered<Result<Job>>>();
  wait_for_job(std::nullopt, first);
  const uint64_t g1 = live_watch();
  ASSERT_NE(g1, 0u);
  // A caller whose look began under g1, with g1 still live: no look for it, and the next add
  // fires g1 and reaches both waiters in turn.
  auto second = std::make_shared<Delivered<Result<Job>>>();
  wait_for_job(g1, second);
  ASSERT_TRUE(jobs_->add("work", "a", "{}").ok());
  ASSERT_TRUE(jobs_->add("work", "b", "{}").ok());
  ASSERT_TRUE(first->wait_for(1, 5s));
  ASSERT_TRUE(second->wait_for(1, 5s));
  EXPECT_TRUE(first->values()[0].ok());
  EXPECT_TRUE(second->values()[0].ok());
}

TEST_F(AcceptWaitersTest, OnAStoreWhoseCallsWaitTheBatchesOfTwoTypesRunSideBySide) {
  // Every commit through this store waits a second, as a distant etcd's might.
  constexpr std::chrono::milliseconds kLatency = 1000ms;
  auto slow = std::make_shared<kv::FaultInjectingStore>(
      store_, kv::FaultOptions{.commit_latency = kLatency});
  ASSERT_FALSE(slow->nonblocking());
  AcceptWaiters acceptor(*slow, scope_);
  ASSERT_TRUE(jobs_->set_type_timeout("other", 60s).ok());
  auto work = std::make_shared<Delivered<Result<Job>>>();
  auto other = std::make_shared<Delivered<Result<Job>>>();
  for (auto& [type, into] : {std::pair{"work", work}, std::pair{"other", other}}) {
    acceptor.submit(type, {.timeout = 30s}, jobs::new_lock(type), kv::Clock::now() + 30s,
                    std::nullopt, deliver_to(into), AcceptWaiters::Commit::kBlocking);
  }
  // Both rounds found nothing and armed their watches.
  for (auto give_up = kv::Clock::now() + 10s;
       kv::Clock::now() < give_up &&
       !(acceptor.watch_generation("work") && acceptor.watch_generation("other"));) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_NE(acceptor.watch_generation("work"), 0u);
  ASSERT_NE(acceptor.watch_generation("other"), 0u);
  // One job for each, added together (through the fast store); each round then takes one
  // commit. One after the other, the second waiter would wait two.
  const auto added = kv::Clock::now();
  ASSERT_TRUE(kv::run(*store_, [&](kv::Transaction& txn) -> Status {
                KVQ_RETURN_IF_ERROR(jobs_->add(txn, "work", "w", "{}"));
                return jobs_->add(txn, "other", "o", "{}").status();
              }).ok());
  ASSERT_TRUE(work->wait_for(1, 10s));
  ASSERT_TRUE(other->wait_for(1, 10s));
  const auto both_served = kv::Clock::now() - added;
  ASSERT_TRUE(work->values()[0].ok()) << work->values()[0].status().to_string();
  ASSERT_TRUE(other->values()[0].ok()) << other->values()[0].status().to_string();
  EXPECT_LT(both_served, kLatency * 18 / 10) << "the two types' rounds ran one after the other";
}

// round_hold.h: after a round that served every waiter of a type, the next waits for as many to
// queue again (for at most half that round's time, 10 ms at most), so workers that come back a
// little apart share one round instead of the first starting one alone.
TEST_F(AcceptWaitersTest, OnAStoreWhoseCallsWaitARoundWaitsForTheWaitersTheLastOneServed) {
  auto slow =
      std::make_shared<kv::FaultInjectingStore>(store_, kv::FaultOptions{.commit_latency = 100ms});
  ASSERT_FALSE(slow->nonblocking());
  AcceptWaiters acceptor(*slow, scope_);
  auto submit = [&](const std::shared_ptr<Delivered<Result<Job>>>& into) {
    acceptor.submit("work", {.timeout = 30s}, jobs::new_lock("work"), kv::Clock::now() + 30s,
                    std::nullopt, deliver_to(into), AcceptWaiters::Commit::kBlocking);
  };
  // Two waiters find nothing due and wait together on the type's watch.
  auto first = std::make_shared<Delivered<Result<Job>>>();
  auto second = std::make_shared<Delivered<Result<Job>>>();
  submit(first);
  submit(second);
  for (auto give_up = kv::Clock::now() + 10s;
       kv::Clock::now() < give_up && !acceptor.watch_generation("work");) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_NE(acceptor.watch_generation("work"), 0u);
  std::this_thread::sleep_for(500ms);  // every round they started has ended
  // Four jobs at once (through the fast store): one round serves both waiters.
  ASSERT_TRUE(kv::run(*store_, [&](kv::Transaction& txn) -> Status {
                for (const char* id : {"j1", "j2", "j3", "j4"})
                  KVQ_RETURN_IF_ERROR(jobs_->add(txn, "work", id, "{}").status());
                return Status::OK();
              }).ok());
  ASSERT_TRUE(first->wait_for(1, 10s));
  ASSERT_TRUE(second->wait_for(1, 10s));
  ASSERT_TRUE(first->values()[0].ok()) << first->values()[0].status().to_string();
  ASSERT_TRUE(second->values()[0].ok()) << second->values()[0].status().to_string();
  // The two come back 2 ms apart. Started by the first, a round would take its job alone and
  // the second would wait for it, then commit a round of its own.
  const uint64_t commits_before = slow->counts().written_commits;
  auto third = std::make_shared<Delivered<Result<Job>>>();
  auto fourth = std::make_shared<Delivered<Result<Job>>>();
  submit(third);
  std::this_thread::sleep_for(2ms);
  submit(fourth);
  ASSERT_TRUE(third->wait_for(1, 10s));
  ASSERT_TRUE(fourth->wait_for(1, 10s));
  ASSERT_TRUE(third->values()[0].ok()) << third->values()[0].status().to_string();
  ASSERT_TRUE(fourth->values()[0].ok()) << fourth->values()[0].status().to_string();
  EXPECT_NE(third->values()[0]->id, fourth->values()[0]->id);
  EXPECT_EQ(slow->counts().written_commits - commits_before, 1u)
      << "the two came back within the hold and were served by one round";
}

// The "Order" guarantee of Jobs::accept, for one process's waiting accepts: served in arrival
// order, one transaction at a time per type, they get the due jobs of a priority in order.
// Through a store that is not nonblocking() (a FaultInjectingStore injecting nothing), where
// accept_async makes its own look on the caller's thread and queues before it returns, so the
// arrival order is the call order.
TEST_F(AcceptWaitersTest, OneProcesssWaitingAcceptsGetJobsAddedOneAtATimeInArrivalOrder) {
  auto direct = std::make_shared<kv::FaultInjectingStore>(store_, kv::FaultOptions{});
  ASSERT_FALSE(direct->nonblocking());
  auto opened = jobs::Jobs::open(direct, options_);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  std::unique_ptr<jobs::Jobs> process = std::move(*opened);
  constexpr int kWaiters = 6;
  std::vector<std::shared_ptr<Delivered<Result<Job>>>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::make_shared<Delivered<Result<Job>>>());
    const uint64_t ticket = process->accept_async(
        "work", {.timeout = 30s, .worker = "w" + std::to_string(i)}, deliver_to(waiters.back()));
    ASSERT_NE(ticket, 0u) << "waiter " << i << " completed at once: nothing was due";
  }
  for (int i = 0; i < kWaiters; ++i) {
    const std::string id = "job-" + std::to_string(i);
    ASSERT_TRUE(jobs_->add("work", id, "{}").ok());
    ASSERT_TRUE(waiters[i]->wait_for(1, 10s)) << id << " never reached waiter " << i;
    const Result<Job> got = waiters[i]->values()[0];
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->id, id) << "waiter " << i;
    EXPECT_EQ(got->worker, "w" + std::to_string(i));
    // The waiters behind it are still waiting: the job went to the first in line alone.
    for (int later = i + 1; later < kWaiters; ++later)
      EXPECT_EQ(waiters[later]->size(), 0u) << id << " reached waiter " << later << " too";
  }
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(waiters[i]->size(), 1u) << "waiter " << i;
}

}  // namespace
}  // namespace kvq::testing
