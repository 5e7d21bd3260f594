// DurabilityTracker's bookkeeping, with a counted (and, where a test needs it, held) fdatasync in
// place of the real one; lmdb_store_test checks it on a real LMDB environment.
#include "kv/lmdb/durability.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <mutex>
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

TEST(DurabilityTrackerTest, ALoneCommitSyncsForItself) {
  FakeSync sync;
  DurabilityTracker tracker([&] { return sync(); });
  commit(tracker, 1);
  EXPECT_EQ(tracker.durable(), 0u) << "a commit's meta page is not on disk when it returns";
  ASSERT_TRUE(tracker.wait(1).ok());
  EXPECT_EQ(sync.calls, 1);
  EXPECT_EQ(tracker.durable(), 1u);
  ASSERT_TRUE(tracker.wait(1).ok());
  EXPECT_EQ(sync.calls, 1) << "a durable commit needs no second sync";
}

TEST(DurabilityTrackerTest, TheNextCommitsFdatasyncMakesTheLastOneDurable) {
  FakeSync sync;
  DurabilityTracker tracker([&] { return sync(); });
  commit(tracker, 1);
  commit(tracker, 2);
  EXPECT_EQ(tracker.durable(), 1u);
  ASSERT_TRUE(tracker.wait(1).ok());
  EXPECT_EQ(sync.calls, 0);
  ASSERT_TRUE(tracker.wait(2).ok());
  EXPECT_EQ(sync.calls, 1);
}

TEST(DurabilityTrackerTest, ASyncThatBeganBeforeACommitWasWrittenDoesNotCoverIt) {
  FakeSync sync;
  DurabilityTracker tracker([&] { return sync(); });
  commit(tracker, 1);
  sync.hold();
  auto first = std::async(std::launch::async, [&] { return tracker.wait(1); });
  while (sync.calls < 1) std::this_thread::yield();
  // Commit 2's meta page is written while the sync for commit 1 is already running.
  tracker.commit_done(2);
  auto second = std::async(std::launch::async, [&] { return tracker.wait(2); });
  EXPECT_EQ(second.wait_for(50ms), std::future_status::timeout) << "commit 2 was called durable too early";
  sync.release();
  ASSERT_TRUE(first.get().ok());
  ASSERT_TRUE(second.get().ok());
  EXPECT_EQ(sync.calls, 2);
  EXPECT_EQ(tracker.durable(), 2u);
}

TEST(DurabilityTrackerTest, GroupsWaitingTogetherShareOneSync) {
  FakeSync sync;
  DurabilityTracker tracker([&] { return sync(); });
  for (uint64_t v = 1; v <= 8; ++v) commit(tracker, v);
  sync.hold();
  std::vector<std::future<Status>> waits;
  waits.push_back(std::async(std::launch::async, [&] { return tracker.wait(8); }));
  while (sync.calls < 1) std::this_thread::yield();
  for (int i = 0; i < 7; ++i) waits.push_back(std::async(std::launch::async, [&] { return tracker.wait(8); }));
  std::this_thread::sleep_for(20ms);
  sync.release();
  for (auto& w : waits) ASSERT_TRUE(w.get().ok());
  EXPECT_EQ(sync.calls, 1);
}

TEST(DurabilityTrackerTest, AFailedSyncFailsItsCommitAndEveryLaterOne) {
  FakeSync sync;
  sync.result = EIO;
  DurabilityTracker tracker([&] { return sync(); });
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

}  // namespace
}  // namespace kvq::kv::lmdb
