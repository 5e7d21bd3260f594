// DurabilityTracker's bookkeeping, with a counted (and, where a test needs it, held) fdatasync in
// place of the real one; lmdb_store_test checks it on a real LMDB environment.
#include "kv/lmdb/durability.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace kvq::kv::lmdb {
namespace {

using namespace std::chrono_literals;

// An fdatasync that counts its calls and can be held until released.
struct FakeSync {
  std::atomic<int> calls{0};
  std::atomic<int> result{0};
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;

  int operator()() {
    ++calls;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !held; });
    return result.load();
  }
  void hold() {
    std::lock_guard lock(mu);
    held = true;
  }
  void release() {
    {
      std::lock_guard lock(mu);
      held = false;
    }
    cv.notify_all();
  }
};

void commit(DurabilityTracker& tracker, uint64_t version) { tracker.commit_done(version); }

// Waits (spinning, as the sync is held or instant) until `sync` has been called `n` times; false
// after `timeout`, so that a missing sync fails the test instead of hanging it.
bool wait_for_calls(const FakeSync& sync, int n, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (sync.calls < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// What an on_durable callback was given, on which thread, how often, and how many syncs had
// begun by then. Held by shared_ptr so that a callback that comes after a failed test returned
// finds it still there.
class Settlement : public std::enable_shared_from_this<Settlement> {
 public:
  explicit Settlement(const FakeSync& sync) : sync_(sync) {}

  std::function<void(Status)> callback() {
    return [self = shared_from_this()](Status status) { self->record(status); };
  }

  // True once settled, waiting up to `timeout` for it.
  bool wait(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return status_.has_value(); });
  }
  bool settled() {
    std::lock_guard lock(mu_);
    return status_.has_value();
  }
  Status status() {
    std::lock_guard lock(mu_);
    return status_.value_or(Internal("never settled"));
  }
  std::thread::id thread() {
    std::lock_guard lock(mu_);
    return thread_;
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  int syncs_begun() {
    std::lock_guard lock(mu_);
    return syncs_begun_;
  }

 private:
  void record(const Status& status) {
    {
      std::lock_guard lock(mu_);
      if (!status_) status_ = status;
      thread_ = std::this_thread::get_id();
      syncs_begun_ = sync_.calls.load();
      ++calls_;
    }
    cv_.notify_all();
  }

  const FakeSync& sync_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Status> status_;
  std::thread::id thread_;
  int calls_ = 0;
  int syncs_begun_ = -1;
};

std::shared_ptr<Settlement> settlement(const FakeSync& sync) {
  return std::make_shared<Settlement>(sync);
}

// Each test's fdatasync and the tracker that uses it.
class DurabilityTrackerTest : public ::testing::Test {
 protected:
  FakeSync sync;
  DurabilityTracker tracker{[this] { return sync(); }};
};

TEST_F(DurabilityTrackerTest, ALoneCommitSyncsForItself) {
  commit(tracker, 1);
  EXPECT_EQ(tracker.durable(), 0u) << "a commit's meta page is not on disk when it returns";
  ASSERT_TRUE(tracker.wait(1).ok());
  EXPECT_EQ(sync.calls, 1);
  EXPECT_EQ(tracker.durable(), 1u);
  ASSERT_TRUE(tracker.wait(1).ok());
  EXPECT_EQ(sync.calls, 1) << "a durable commit needs no second sync";
}

TEST_F(DurabilityTrackerTest, TheNextCommitsFdatasyncMakesTheLastOneDurable) {
  commit(tracker, 1);
  commit(tracker, 2);
  EXPECT_EQ(tracker.durable(), 1u);
  ASSERT_TRUE(tracker.wait(1).ok());
  EXPECT_EQ(sync.calls, 0);
  ASSERT_TRUE(tracker.wait(2).ok());
  EXPECT_EQ(sync.calls, 1);
}

TEST_F(DurabilityTrackerTest, ASyncThatBeganBeforeACommitWasWrittenDoesNotCoverIt) {
  commit(tracker, 1);
  sync.hold();
  auto first = std::async(std::launch::async, [&] { return tracker.wait(1); });
  while (sync.calls < 1) std::this_thread::yield();
  // Commit 2's meta page is written while the sync for commit 1 is already running.
  tracker.commit_done(2);
  auto second = std::async(std::launch::async, [&] { return tracker.wait(2); });
  EXPECT_EQ(second.wait_for(50ms), std::future_status::timeout)
      << "commit 2 was called durable too early";
  sync.release();
  ASSERT_TRUE(first.get().ok());
  ASSERT_TRUE(second.get().ok());
  EXPECT_EQ(sync.calls, 2);
  EXPECT_EQ(tracker.durable(), 2u);
}

TEST_F(DurabilityTrackerTest, GroupsWaitingTogetherShareOneSync) {
  for (uint64_t v = 1; v <= 8; ++v) commit(tracker, v);
  sync.hold();
  std::vector<std::future<Status>> waits;
  waits.push_back(std::async(std::launch::async, [&] { return tracker.wait(8); }));
  while (sync.calls < 1) std::this_thread::yield();
  for (int i = 0; i < 7; ++i)
    waits.push_back(std::async(std::launch::async, [&] { return tracker.wait(8); }));
  std::this_thread::sleep_for(20ms);
  sync.release();
  for (auto& w : waits) ASSERT_TRUE(w.get().ok());
  EXPECT_EQ(sync.calls, 1);
}

TEST_F(DurabilityTrackerTest, AFailedSyncFailsItsCommitAndEveryLaterOne) {
  sync.result = EIO;
  commit(tracker, 1);
  Status first = tracker.wait(1);
  EXPECT_EQ(first.code(), Code::kUnknownResult) << first.to_string();
  EXPECT_FALSE(tracker.failed().ok());
  sync.result = 0;  // the kernel may report success next time even though pages were lost
  commit(tracker, 2);
  commit(tracker, 3);
  EXPECT_FALSE(tracker.wait(2).ok());
  EXPECT_FALSE(tracker.wait(3).ok());
  EXPECT_EQ(tracker.durable(), 0u);
}

// ---- on_durable: wait's outcome without blocking -------------------------------------------

TEST_F(DurabilityTrackerTest, OnDurableSettlesAtOnceOnTheCallersThreadWhenAlreadyDurable) {
  commit(tracker, 1);
  commit(tracker, 2);  // its own fdatasync made commit 1 durable
  ASSERT_EQ(tracker.durable(), 1u);
  auto settled = settlement(sync);
  tracker.on_durable(1, settled->callback());
  ASSERT_TRUE(settled->settled())
      << "a commit already on disk is settled before on_durable returns";
  EXPECT_TRUE(settled->status().ok()) << settled->status().to_string();
  EXPECT_EQ(settled->thread(), std::this_thread::get_id());
  EXPECT_EQ(sync.calls, 0) << "a durable commit needs no sync";
}

TEST_F(DurabilityTrackerTest, OnDurableSettlesFromTheSyncerThreadAfterOneSync) {
  commit(tracker, 1);
  auto settled = settlement(sync);
  std::atomic<uint64_t> durable_when_settled{0};
  auto record = settled->callback();
  // Reading durable() from the callback also shows it is not called with the tracker's lock held.
  tracker.on_durable(1, [&, record](Status status) {
    durable_when_settled = tracker.durable();
    record(status);
  });
  ASSERT_TRUE(settled->wait()) << "on_durable was never settled";
  EXPECT_TRUE(settled->status().ok()) << settled->status().to_string();
  EXPECT_NE(settled->thread(), std::this_thread::get_id());
  EXPECT_EQ(settled->syncs_begun(), 1);
  EXPECT_GE(durable_when_settled.load(), 1u) << "settled before the commit was on disk";
  EXPECT_EQ(sync.calls, 1);
  EXPECT_EQ(tracker.durable(), 1u);
  EXPECT_EQ(settled->calls(), 1);
}

TEST_F(DurabilityTrackerTest, PendingOnDurablesShareOneSync) {
  for (uint64_t v = 1; v <= 3; ++v) commit(tracker, v);
  sync.hold();
  std::vector<std::shared_ptr<Settlement>> settled;
  settled.push_back(settlement(sync));
  tracker.on_durable(3, settled.back()->callback());
  ASSERT_TRUE(wait_for_calls(sync, 1));
  for (int i = 0; i < 4; ++i) {
    settled.push_back(settlement(sync));
    tracker.on_durable(3, settled.back()->callback());
  }
  for (auto& s : settled) EXPECT_FALSE(s->settled()) << "settled while its sync was still running";
  sync.release();
  for (auto& s : settled) {
    ASSERT_TRUE(s->wait());
    EXPECT_TRUE(s->status().ok()) << s->status().to_string();
    EXPECT_EQ(s->calls(), 1);
  }
  EXPECT_EQ(sync.calls, 1);
  EXPECT_EQ(tracker.durable(), 3u);
}

TEST_F(DurabilityTrackerTest, OnDurableIsCoveredByABlockingWaitsRunningSyncWithoutOneOfItsOwn) {
  commit(tracker, 1);
  sync.hold();
  auto blocking = std::async(std::launch::async, [&] { return tracker.wait(1); });
  ASSERT_TRUE(wait_for_calls(sync, 1));
  auto settled = settlement(sync);
  tracker.on_durable(1, settled->callback());
  // Time for a syncer that does not wait for the running sync to start its own, or to settle.
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(settled->settled()) << "settled before the sync covering it finished";
  EXPECT_EQ(sync.calls, 1) << "the syncer synced while another sync was running";
  sync.release();
  ASSERT_TRUE(blocking.get().ok());
  ASSERT_TRUE(settled->wait());
  EXPECT_TRUE(settled->status().ok()) << settled->status().to_string();
  EXPECT_EQ(sync.calls, 1) << "the running sync covered it";
}

TEST_F(DurabilityTrackerTest, OnDurableForACommitWrittenAfterARunningSyncBeganWaitsForTheNextSync) {
  commit(tracker, 1);
  sync.hold();
  auto blocking = std::async(std::launch::async, [&] { return tracker.wait(1); });
  ASSERT_TRUE(wait_for_calls(sync, 1));
  // Commit 2's meta page is written while the sync for commit 1 is already running.
  commit(tracker, 2);
  auto settled = settlement(sync);
  tracker.on_durable(2, settled->callback());
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(settled->settled());
  sync.release();
  ASSERT_TRUE(blocking.get().ok());
  ASSERT_TRUE(settled->wait());
  EXPECT_TRUE(settled->status().ok()) << settled->status().to_string();
  EXPECT_EQ(settled->syncs_begun(), 2)
      << "commit 2 was called durable after a sync that began before it";
  EXPECT_EQ(sync.calls, 2);
  EXPECT_EQ(tracker.durable(), 2u);
}

TEST_F(DurabilityTrackerTest,
       AFailedSyncGivesTheOnDurablesItCoveredUnknownResultAndLaterOnesFailAtOnce) {
  sync.result = EIO;
  commit(tracker, 1);
  sync.hold();
  auto first = settlement(sync), second = settlement(sync);
  tracker.on_durable(1, first->callback());
  ASSERT_TRUE(wait_for_calls(sync, 1));
  tracker.on_durable(1, second->callback());
  sync.release();
  for (auto& s : {first, second}) {
    ASSERT_TRUE(s->wait());
    EXPECT_EQ(s->status().code(), Code::kUnknownResult) << s->status().to_string();
    EXPECT_EQ(s->calls(), 1);
  }
  ASSERT_FALSE(tracker.failed().ok());

  sync.result = 0;  // a later sync that succeeds proves nothing about the pages lost before it
  commit(tracker, 2);
  for (uint64_t version : {uint64_t{1}, uint64_t{2}}) {
    auto later = settlement(sync);
    tracker.on_durable(version, later->callback());
    ASSERT_TRUE(later->settled()) << "version " << version
                                  << ": the failure is known, so it is settled at once";
    EXPECT_FALSE(later->status().ok());
    EXPECT_EQ(later->status().code(), tracker.failed().code()) << later->status().to_string();
    EXPECT_EQ(later->thread(), std::this_thread::get_id());
  }
  EXPECT_EQ(sync.calls, 1) << "nothing is synced for a commit after a failed sync";
  EXPECT_EQ(tracker.durable(), 0u);
}

TEST_F(DurabilityTrackerTest, AFailedSyncGivesAPendingOnDurableItDidNotCoverTheStickyFailure) {
  sync.result = EIO;
  commit(tracker, 1);
  sync.hold();
  auto blocking = std::async(std::launch::async, [&] { return tracker.wait(1); });
  ASSERT_TRUE(wait_for_calls(sync, 1));
  commit(tracker, 2);  // written after the failing sync began: not covered by it
  auto settled = settlement(sync);
  tracker.on_durable(2, settled->callback());
  sync.release();
  EXPECT_EQ(blocking.get().code(), Code::kUnknownResult);
  ASSERT_TRUE(settled->wait());
  EXPECT_FALSE(settled->status().ok());
  EXPECT_EQ(settled->status().code(), tracker.failed().code()) << settled->status().to_string();
  EXPECT_EQ(sync.calls, 1) << "nothing is synced for a commit after a failed sync";
}

TEST_F(DurabilityTrackerTest, DestroyingTheTrackerSettlesAPendingOnDurableBeforeItReturns) {
  sync.hold();
  auto owned = std::make_unique<DurabilityTracker>([&] { return sync(); });
  commit(*owned, 1);
  auto settled = settlement(sync);
  owned->on_durable(1, settled->callback());
  ASSERT_TRUE(wait_for_calls(sync, 1));
  // Released only once the destructor is (very likely) already waiting; correct either way.
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    sync.release();
  });
  owned.reset();
  EXPECT_TRUE(settled->settled()) << "the destructor returned with an on_durable pending";
  EXPECT_TRUE(settled->status().ok()) << settled->status().to_string();
  releaser.join();
}

TEST_F(DurabilityTrackerTest, ACallbackMayDestroyTheTrackerOnItsSyncerThread) {
  auto owned = std::make_unique<DurabilityTracker>([&] { return sync(); });
  commit(*owned, 1);
  auto outcome = std::make_shared<std::promise<Status>>();
  auto future = outcome->get_future();
  owned->on_durable(1, [&owned, outcome](Status status) {
    owned.reset();  // the last store reference can go in a commit's callback
    outcome->set_value(status);
  });
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready) << "on_durable was never settled";
  EXPECT_TRUE(future.get().ok());
  EXPECT_EQ(owned, nullptr);
}

}  // namespace
}  // namespace kvq::kv::lmdb
