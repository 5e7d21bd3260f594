#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace kvq::util {
namespace {

using namespace std::chrono_literals;

TEST(ThreadPoolTest, RunsTasksSideBySideUpToItsThreads) {
  ThreadPool pool(2);
  // Each task waits for the other: they finish only if two threads run them at once.
  std::promise<void> first_started, second_started;
  auto first_sees = second_started.get_future();
  auto second_sees = first_started.get_future();
  std::atomic<int> finished{0};
  pool.post([&] {
    first_started.set_value();
    if (first_sees.wait_for(10s) == std::future_status::ready) ++finished;
  });
  pool.post([&] {
    second_started.set_value();
    if (second_sees.wait_for(10s) == std::future_status::ready) ++finished;
  });
  std::promise<void> third_ran;
  pool.post([&] { third_ran.set_value(); });
  ASSERT_EQ(third_ran.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_EQ(finished.load(), 2);
}

TEST(ThreadPoolTest, DestructionRunsEveryTaskAlreadyPosted) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(1);
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
