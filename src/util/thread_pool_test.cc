#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace kvq::util {
namespace {

using namespace std::chrono_literals;

TEST(ThreadPoolTest, RunsTasksSideBySideUpToItsThreads) {
  // Each task waits for the other to start: both see it only if two threads run them at once.
  // Declared before the pool, so that they outlive its threads.
  std::promise<void> first_started, second_started;
  std::promise<bool> first_saw_second, second_saw_first;
  auto first_sees = second_started.get_future();
  auto second_sees = first_started.get_future();
  auto first_result = first_saw_second.get_future();
  auto second_result = second_saw_first.get_future();
  ThreadPool pool(2);
  pool.post([&] {
    first_started.set_value();
    first_saw_second.set_value(first_sees.wait_for(10s) == std::future_status::ready);
  });
  pool.post([&] {
    second_started.set_value();
    second_saw_first.set_value(second_sees.wait_for(10s) == std::future_status::ready);
  });
  ASSERT_EQ(first_result.wait_for(20s), std::future_status::ready);
  ASSERT_EQ(second_result.wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(first_result.get());
  EXPECT_TRUE(second_result.get());
}

TEST(ThreadPoolTest, DestructionRunsEveryTaskAlreadyPosted) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 100; ++i) {
      pool.post([&] {
        std::this_thread::sleep_for(100us);
        ++ran;
      });
    }
  }
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace kvq::util
