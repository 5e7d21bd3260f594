// The cross-process wake-up (kv/lmdb/wake_signal.h): watches in one process fire at once for
// commits made in another, without relying on the safety-net poll, and a process killed while
// waiting leaves the signal working.
#include "kv/lmdb/wake_signal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <thread>

#include "kvq/lmdb_store.h"
#include "support/child_process.h"
#include "support/kv_helpers.h"
#include "support/temp_dir.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using kv::lmdb::WakeSignal;

// Far longer than any bound below: a test passes only if the wake-up works.
constexpr auto kSafetyNet = 5000ms;
constexpr auto kPrompt = 200ms;

std::shared_ptr<kv::Store> open_store(const std::string& dir) {
  // Durable, as the lmdb_test_writer children open it: one directory takes one durability.
  auto store = open_lmdb_store({.path = dir, .watch_poll_interval = kSafetyNet});
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  return store.ok() ? *store : nullptr;
}

// A thread's scheduler state as /proc shows it: 'S' while it sleeps (in the futex here).
char thread_state(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = all.rfind(')');
  return paren != std::string::npos && paren + 2 < all.size() ? all[paren + 2] : '?';
}

std::unique_ptr<WakeSignal> open_signal(const std::string& dir) {
  auto signal = WakeSignal::open(dir);
  EXPECT_TRUE(signal.ok()) << signal.status().to_string();
  return signal.ok() ? std::move(*signal) : nullptr;
}

// Each round arms a watch, lets a child process commit to the key and requires the watch to have
// fired within kPrompt of the child reporting its commit. Several rounds, so most find this
// process's watcher asleep on the signal rather than about to look.
TEST(WakeSignalTest, AnotherProcessesCommitFiresAWatchWithin200Ms) {
  TempDir dir;
  auto store = open_store(dir.path());
  ASSERT_TRUE(store);
  for (int round = 0; round < 10; ++round) {
    auto txn = begin(*store);
    auto watch = txn->watch("ping");
    ASSERT_TRUE(watch.ok());
    txn.reset();
    ChildProcess other({KVQ_LMDB_TEST_WRITER, dir.path(), "set", "ping", std::to_string(round)});
    ASSERT_TRUE(other.started());
    std::string line;
    ASSERT_TRUE(other.read_line(line));
    ASSERT_EQ(line, "done");
    const auto committed = kv::Clock::now();
    EXPECT_TRUE(watch->wait_until(committed + kPrompt).ok())
        << "round " << round << ": not fired within 200 ms of the other process's commit";
    EXPECT_EQ(other.wait(), 0);
  }
}

// The other direction, and a waiter killed in its sleep: the next process's watch is still
// woken by this process's commit.
TEST(WakeSignalTest, AWaiterKilledInItsSleepLeavesTheSignalWorking) {
  TempDir dir;
  auto store = open_store(dir.path());
  ASSERT_TRUE(store);
  auto signal = open_signal(dir.path());  // to see the shared count
  ASSERT_TRUE(signal);
  {
    ChildProcess doomed({KVQ_LMDB_TEST_WRITER, dir.path(), "watch", "k"});
    std::string line;
    ASSERT_TRUE(doomed.read_line(line));
    ASSERT_EQ(line, "armed");
    // Its watcher thread counts itself just before it sleeps; nothing else announces the sleep.
    const auto deadline = kv::Clock::now() + 5s;
    while (signal->waiters() == 0 && kv::Clock::now() < deadline) std::this_thread::yield();
    ASSERT_EQ(signal->waiters(), 1u);
    doomed.kill_hard();
    doomed.wait();
  }
  EXPECT_EQ(signal->waiters(), 1u)
      << "the killed sleeper's count stays (harmless: a needless wake)";
  for (int round = 0; round < 5; ++round) {
    ChildProcess watcher({KVQ_LMDB_TEST_WRITER, dir.path(), "watch", "k"});
    std::string line;
    ASSERT_TRUE(watcher.read_line(line));
    ASSERT_EQ(line, "armed");
    put(*store, "k", std::to_string(round));
    const auto committed = kv::Clock::now();
    auto fired =
        std::async(std::launch::async, [&] { return watcher.read_line(line) && line == "fired"; });
    const bool prompt = fired.wait_until(committed + kPrompt) == std::future_status::ready;
    if (!prompt) watcher.kill_hard();  // ends the read the future waits on
    ASSERT_TRUE(prompt) << "round " << round
                        << ": the other process's watch did not fire within 200 ms";
    EXPECT_TRUE(fired.get());
    EXPECT_EQ(watcher.wait(), 0);
  }
}

TEST(WakeSignalTest, WaitReturnsAtOnceWhenTheSequenceMovedSinceItWasRead) {
  TempDir dir;
  auto a = open_signal(dir.path());
  ASSERT_TRUE(a);
  const uint32_t seen = a->sequence();
  a->notify();
  const auto start = std::chrono::steady_clock::now();
  a->wait(seen, kSafetyNet);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kPrompt);
}

// Two mappings of the file, as two processes have: a notify through one wakes a sleeper on the
// other (a shared futex, keyed by the file page, not a private one keyed by the address).
TEST(WakeSignalTest, ANotifyThroughAnotherMappingWakesASleeper) {
  TempDir dir;
  auto a = open_signal(dir.path());
  auto b = open_signal(dir.path());
  ASSERT_TRUE(a && b);
  std::promise<pid_t> about_to_sleep;
  auto slept = std::async(std::launch::async, [&] {
    const uint32_t seen = a->sequence();
    about_to_sleep.set_value(gettid());
    a->wait(seen, kSafetyNet);
  });
  const pid_t sleeper = about_to_sleep.get_future().get();
  // Wake it only once it sleeps in the kernel, or a private futex would pass too (the word
  // would have moved before it slept).
  const auto deadline = kv::Clock::now() + 5s;
  while (kv::Clock::now() < deadline && thread_state(sleeper) != 'S') std::this_thread::yield();
  ASSERT_EQ(thread_state(sleeper), 'S');
  b->notify();
  EXPECT_EQ(slept.wait_for(kPrompt), std::future_status::ready);
}

// A count left behind by a killed waiter is reset by the first process to open the file alone,
// and only then (a live process's waiter must stay counted).
TEST(WakeSignalTest, AStaleWaiterCountIsResetOnlyByAnOpenerThatIsAlone) {
  TempDir dir;
  open_signal(dir.path()).reset();  // creates the file
  const auto write_waiters = [&](uint32_t n) {
    int fd = ::open((dir.path() + "/kvq-wake").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, &n, sizeof n, 64), static_cast<ssize_t>(sizeof n));
    ::close(fd);
  };
  write_waiters(3);
  auto alone = open_signal(dir.path());
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->waiters(), 0u);
  write_waiters(2);
  auto second = open_signal(dir.path());
  ASSERT_TRUE(second);
  EXPECT_EQ(second->waiters(), 2u) << "another process has it open: its waiters stay counted";
}

TEST(WakeSignalTest, AnUnusableDirectoryIsAnErrorNotACrash) {
  TempDir dir;
  EXPECT_FALSE(WakeSignal::open(dir.sub("missing")).ok());
}

}  // namespace
}  // namespace kvq::testing
