#include "util/timer_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>

namespace kvq::util {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(TimerQueueTest, FiresEachItemOnceInOrderOfTheirTimesNeverEarly) {
  std::mutex mu;
  std::vector<std::pair<int, Clock::time_point>> fired;
  std::promise<void> all_fired;
  const auto start = Clock::now();
  TimerQueue<int> queue([&](std::vector<int>& due) {
    std::lock_guard lock(mu);
    for (int n : due) fired.emplace_back(n, Clock::now());
    if (fired.size() == 3) all_fired.set_value();
  });
  queue.at(start + 60ms, 3);
  queue.at(start + 20ms, 1);
  queue.at(start + 40ms, 2);
  ASSERT_EQ(all_fired.get_future().wait_for(10s), std::future_status::ready);
  std::lock_guard lock(mu);
  ASSERT_EQ(fired.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fired[i].first, i + 1);
    EXPECT_GE(fired[i].second, start + (i + 1) * 20ms);
  }
}

TEST(TimerQueueTest, ItemsDueTogetherFireInOneBatchUpToItsLimit) {
  std::mutex mu;
  std::vector<size_t> batches;
  std::promise<void> all_fired;
  size_t total = 0;
  TimerQueue<int> queue(
      [&](std::vector<int>& due) {
        std::lock_guard lock(mu);
        batches.push_back(due.size());
        if ((total += due.size()) == 5) all_fired.set_value();
      },
      /*max_batch=*/3);
  // All queued before any falls due, so that the queue sees all five at once.
  const auto when = Clock::now() + 50ms;
  for (int i = 0; i < 5; ++i) queue.at(when, i);
  ASSERT_EQ(all_fired.get_future().wait_for(10s), std::future_status::ready);
  std::lock_guard lock(mu);
  EXPECT_EQ(batches, (std::vector<size_t>{3, 2}));
}

TEST(TimerQueueTest, ACancelledItemNeverFires) {
  std::atomic<int> fired{0};
  std::promise<void> later_fired;
  TimerQueue<std::function<void()>> queue(run_each);
  const uint64_t id = queue.at(Clock::now() + 20ms, [&] { fired += 100; });
  EXPECT_TRUE(queue.cancel(id));
  EXPECT_FALSE(queue.cancel(id));
  queue.at(Clock::now() + 40ms, [&] {
    fired += 1;
    later_fired.set_value();
  });
  ASSERT_EQ(later_fired.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fired.load(), 1);
}

TEST(TimerQueueTest, FireMayRescheduleWhatItFired) {
  std::atomic<int> rounds{0};
  std::promise<void> third;
  // The queue is created by the first fire's caller below; fire reaches it through a pointer.
  TimerQueue<int>* self = nullptr;
  TimerQueue<int> queue([&](std::vector<int>& due) {
    for (int n : due) {
      if (++rounds == 3) third.set_value();
      if (rounds < 3) self->at(Clock::now(), n);
    }
  });
  self = &queue;
  queue.at(Clock::now(), 7);
  ASSERT_EQ(third.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(rounds.load(), 3);
}

TEST(TimerQueueTest, DestroyingTheQueueDropsItemsNotYetDue) {
  std::atomic<bool> fired{false};
  {
    TimerQueue<std::function<void()>> queue(run_each);
    queue.at(Clock::now() + 1h, [&] { fired = true; });
  }
  EXPECT_FALSE(fired.load());
}

}  // namespace
}  // namespace kvq::util
