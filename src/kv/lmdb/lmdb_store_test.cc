// What only the LMDB backend promises: several processes on one directory, crash safety under
// SIGKILL, a map that grows, and LMDB errors as statuses.
#include "kvq/lmdb_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kv/lmdb/durability.h"
#include "kv/lmdb/lmdb_env.h"
#include "support/child_process.h"
#include "support/kv_helpers.h"
#include "support/list_loop.h"
#include "support/temp_dir.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<kv::Store> open_or_die(const std::string& path, Durability d = Durability::kSync,
                                       uint64_t map = uint64_t{1} << 30) {
  auto store = open_lmdb_store({.path = path, .durability = d, .initial_map_size = map});
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  return store.ok() ? *store : nullptr;
}

// How many keys lie in ["t", "u"): the tests below write theirs there.
size_t keys_under_t(kv::Store& store) {
  auto all = kv::run(store, [](kv::Transaction& txn) { return txn.get_range("t", "u"); });
  EXPECT_TRUE(all.ok()) << all.status().to_string();
  return all.ok() ? all->size() : 0;
}

// The durability tracker of the sync store already open on `path` (Env::open returns the
// environment this process has open there; the store keeps it alive).
kv::lmdb::DurabilityTracker* durability_of(const std::string& path) {
  auto env = kv::lmdb::Env::open({.path = path, .durability = Durability::kSync});
  EXPECT_TRUE(env.ok()) << env.status().to_string();
  return env.ok() ? (*env)->durability() : nullptr;
}

// The outcomes of `n` commits, by index, whichever thread delivers them. Held by shared_ptr:
// a callback that comes after a failed test returned must still find it.
class Outcomes {
 public:
  explicit Outcomes(size_t n) : statuses_(n), calls_(n, 0) {}

  void record(size_t i, const Status& status) {
    {
      std::lock_guard lock(mu_);
      if (calls_[i]++ == 0) statuses_[i] = status;
      ++total_;
    }
    cv_.notify_all();
  }
  // True once every commit has its outcome; waits up to `timeout`, so a lost callback fails the
  // test rather than hanging it.
  bool wait_all(std::chrono::seconds timeout = 30s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return total_ >= statuses_.size(); });
  }
  std::vector<Status> statuses() {
    std::lock_guard lock(mu_);
    return statuses_;
  }
  std::vector<int> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  size_t received() {
    std::lock_guard lock(mu_);
    return total_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Status> statuses_;
  std::vector<int> calls_;
  size_t total_ = 0;
};

// The key commit `i` of thread `t` writes, under "t" (see keys_under_t).
std::string key_of(int t, int i) { return "t" + std::to_string(t) + "/" + std::to_string(i); }

// Runs body(t, i) for every i < `each` on each of `threads` threads at once, and joins them.
void on_threads(int threads, int each, const std::function<void(int t, int i)>& body) {
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&body, each, t] {
      for (int i = 0; i < each; ++i) body(t, i);
    });
  }
  for (auto& th : running) th.join();
}

TEST(LmdbStoreTest, AProcessKilledMidWriteLeavesTheLastCommittedState) {
  TempDir dir;
  ChildProcess writer({KVQ_LMDB_TEST_WRITER, dir.path(), "count"});
  ASSERT_TRUE(writer.started());
  std::string line;
  long long acked = 0;
  while (acked < 300 && writer.read_line(line)) acked = std::stoll(line);
  ASSERT_EQ(acked, 300) << "the writer stopped early";
  writer.kill_hard();
  while (writer.read_line(line)) acked = std::stoll(line);
  writer.wait();

  auto store = open_or_die(dir.path());
  const long long n = std::stoll(read(*store, "n").value_or("0"));
  EXPECT_EQ(read(*store, "n_copy"), read(*store, "n")) << "a commit was torn";
  EXPECT_GE(n, acked) << "an acknowledged commit was lost";
  EXPECT_LE(n, acked + 1) << "more commits than the writer ever made";
  put(*store, "after", "crash");  // the directory is writable again (stale lock recovered)
  EXPECT_EQ(read(*store, "after"), "crash");
}

TEST(LmdbStoreTest, TwoProcessesIncrementingOneDirectoryBothCount) {
  TempDir dir;
  auto store = open_or_die(dir.path());
  ChildProcess other({KVQ_LMDB_TEST_WRITER, dir.path(), "incr", "200", "child"});
  ASSERT_TRUE(other.started());
  for (int i = 0; i < 200; ++i) {
    Status s = kv::run(*store, [&](kv::Transaction& txn) -> Status {
      KVQ_ASSIGN_OR_RETURN(auto n, txn.get("n"));
      txn.set("n", std::to_string(std::stoll(n.value_or("0")) + 1));
      return Status::OK();
    });
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  std::string line;
  ASSERT_TRUE(other.read_line(line));
  EXPECT_EQ(line, "done");
  EXPECT_EQ(other.wait(), 0);
  EXPECT_EQ(read(*store, "n"), "400");
}

// LMDB's rules differ by mode, and each mode makes its own promise: a second process must not
// join a directory with the other one (it used to start silently).
TEST(LmdbStoreTest, AnotherProcessWithTheOtherDurabilityIsRefusedNamingBoth) {
  for (const auto& [held, asked] :
       {std::pair{"relaxed", Durability::kDurable}, std::pair{"durable", Durability::kRelaxed}}) {
    TempDir dir;
    ChildProcess holder({KVQ_LMDB_TEST_WRITER, dir.path(), "hold", held});
    ASSERT_TRUE(holder.started());
    std::string line;
    ASSERT_TRUE(holder.read_line(line));
    ASSERT_EQ(line, "open");
    auto refused = open_lmdb_store({.path = dir.path(), .durability = asked});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
    const std::string& message = refused.status().message();
    EXPECT_NE(message.find(std::string("'") + held + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("'") + durability_name(asked) + "'"), std::string::npos)
        << message;
    // The same mode joins; and once the holder is gone, so does the other one.
    const Durability same =
        asked == Durability::kDurable ? Durability::kRelaxed : Durability::kDurable;
    EXPECT_TRUE(open_lmdb_store({.path = dir.path(), .durability = same}).ok());
    holder.kill_hard();
    holder.wait();
    auto alone = open_lmdb_store({.path = dir.path(), .durability = asked});
    EXPECT_TRUE(alone.ok()) << alone.status().to_string();
  }
}

TEST(LmdbStoreTest, AProcessIsRefusedWhileThisOneHoldsTheOtherDurability) {
  TempDir dir;
  auto store = open_or_die(dir.path(), Durability::kDurable);
  ChildProcess other({KVQ_LMDB_TEST_WRITER, dir.path(), "hold", "nosync"});
  ASSERT_TRUE(other.started());
  std::string line;
  ASSERT_TRUE(other.read_line(line));
  EXPECT_NE(line.find("'durable'"), std::string::npos) << line;
  EXPECT_NE(line.find("'relaxed'"), std::string::npos) << line;
  EXPECT_NE(other.wait(), 0);
}

TEST(LmdbStoreTest, DurabilityNamesAndTheirFormerNames) {
  EXPECT_EQ(parse_durability("durable"), Durability::kDurable);
  EXPECT_EQ(parse_durability("sync"), Durability::kDurable);
  EXPECT_EQ(parse_durability("relaxed"), Durability::kRelaxed);
  EXPECT_EQ(parse_durability("nosync"), Durability::kRelaxed);
  EXPECT_EQ(parse_durability("fast"), std::nullopt);
  EXPECT_STREQ(durability_name(Durability::kNoSync), "relaxed");
}

// The relaxed syncer keeps a read snapshot pinned between syncs; commits that fill and grow the
// map must still go through, and the store reopens with everything.
TEST(LmdbStoreTest, ARelaxedStoreGrowsItsMapAndSyncsInTheBackground) {
  TempDir dir;
  {
    auto store = open_lmdb_store({.path = dir.path(),
                                  .durability = Durability::kRelaxed,
                                  .initial_map_size = uint64_t{1} << 20,
                                  .relaxed_sync_interval = std::chrono::milliseconds(5)});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    const std::string value(2000, 'x');
    for (int i = 0; i < 3000; ++i) put(**store, "k" + std::to_string(i), value);
    EXPECT_TRUE((*store)->check_health().ok());
  }
  auto reopened = open_or_die(dir.path(), Durability::kRelaxed);
  EXPECT_EQ(read(*reopened, "k2999"), std::string(2000, 'x'));
}

TEST(LmdbStoreTest, WatchSeesAChangeMadeByAnotherProcess) {
  TempDir dir;
  auto store = open_or_die(dir.path());
  auto txn = begin(*store);
  auto watch = txn->watch("ping");
  ASSERT_TRUE(watch.ok());
  ChildProcess other({KVQ_LMDB_TEST_WRITER, dir.path(), "set", "ping", "pong"});
  ASSERT_TRUE(other.started());
  EXPECT_EQ(other.wait(), 0);
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
  EXPECT_EQ(read(*store, "ping"), "pong");
}

TEST(LmdbStoreTest, TheMapGrowsWhenFullInsteadOfFailing) {
  TempDir dir;
  auto store = open_or_die(dir.path(), Durability::kNoSync, uint64_t{1} << 20);
  const std::string blob(64 * 1024, 'x');
  for (int i = 0; i < 200; ++i) {  // ~13 MiB into a 1 MiB map
    put(*store, "blob/" + std::to_string(i), blob);
  }
  for (int i = 0; i < 200; i += 37) EXPECT_EQ(read(*store, "blob/" + std::to_string(i)), blob);
}

TEST(LmdbStoreTest, ConcurrentCommitsGrowTheMapWithoutLosingAny) {
  TempDir dir;
  auto store = open_or_die(dir.path(), Durability::kNoSync, uint64_t{1} << 20);
  const std::string blob(16 * 1024, 'y');
  on_threads(4, 100, [&](int t, int i) { put(*store, key_of(t, i), blob); });
  EXPECT_EQ(keys_under_t(*store), 400u);
}

// With sync, LMDB leaves each commit's meta page unsynced (MDB_NOMETASYNC) and kvq syncs it
// after the commit; a commit must not return before that (kv/lmdb/durability.h).
TEST(LmdbStoreTest, ASyncCommitReturnsOnlyOnceItIsOnDisk) {
  TempDir dir;
  auto store = open_or_die(dir.path(), Durability::kSync);
  auto* durability = durability_of(dir.path());
  ASSERT_NE(durability, nullptr);
  std::atomic<int> early{0};
  on_threads(8, 40, [&](int t, int i) {
    auto txn = begin(*store);
    txn->set(key_of(t, i), "v");
    if (!txn->commit().ok()) return;
    if (durability->durable() < txn->committed_version()) ++early;
  });
  EXPECT_EQ(early, 0) << "commits returned before their meta page was synced";
  EXPECT_EQ(keys_under_t(*store), 320u);
}

// After a failed fsync the kernel may have dropped the pages it could not write, so no later
// commit can be promised durable: the store refuses them, and says so to a health check, until it
// is opened again.
TEST(LmdbStoreTest, AFailedFsyncStopsEveryLaterCommitUntilTheStoreIsReopened) {
  TempDir dir;
  {
    auto store = open_or_die(dir.path(), Durability::kSync);
    ASSERT_TRUE(store->check_health().ok());
    auto* durability = durability_of(dir.path());
    ASSERT_NE(durability, nullptr);
    durability->set_sync_for_testing([] { return EIO; });

    auto txn = begin(*store);
    txn->set("k", "first");
    Status first = txn->commit();
    EXPECT_EQ(first.code(), Code::kUnknownResult) << first.to_string();
    Status health = store->check_health();
    EXPECT_EQ(health.code(), Code::kInternal) << health.to_string();
    EXPECT_NE(health.message().find("fdatasync"), std::string::npos) << health.to_string();

    auto later = begin(*store);
    later->set("k", "second");
    EXPECT_EQ(later->commit().code(), Code::kInternal);
    EXPECT_EQ(read(*store, "k"), "first") << "the refused commit was applied";
  }
  // Every handle is gone, so the environment closes; opening it again starts afresh.
  auto reopened = open_or_die(dir.path(), Durability::kSync);
  EXPECT_TRUE(reopened->check_health().ok());
  put(*reopened, "k", "third");
  EXPECT_EQ(read(*reopened, "k"), "third");
}

TEST(LmdbStoreTest, AHealthyStoreSaysSo) {
  TempDir dir;
  EXPECT_TRUE(open_or_die(dir.path(), Durability::kSync)->check_health().ok());
  EXPECT_TRUE(open_or_die(dir.path() + "/nosync", Durability::kNoSync)->check_health().ok());
}

TEST(LmdbStoreTest, OpeningOneDirectoryTwiceInAProcessSharesIt) {
  TempDir dir;
  auto a = open_or_die(dir.path());
  auto b = open_or_die(dir.path());
  put(*a, "k", "v");
  EXPECT_EQ(read(*b, "k"), "v");
  auto txn = begin(*b);
  auto watch = txn->watch("k");
  ASSERT_TRUE(watch.ok());
  put(*a, "k", "w");
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 1s).ok());
  auto conflicting = open_lmdb_store({.path = dir.path(), .durability = Durability::kNoSync});
  EXPECT_EQ(conflicting.status().code(), Code::kInvalidArgument);
}

TEST(LmdbStoreTest, ACorruptDataFileIsAnErrorNotACrash) {
  TempDir dir;
  {
    std::ofstream garbage(dir.path() + "/data.mdb", std::ios::binary);
    for (int i = 0; i < 8192; ++i) garbage.put(static_cast<char>(i * 7));
  }
  auto store = open_lmdb_store({.path = dir.path()});
  EXPECT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(dir.path()), std::string::npos)
      << store.status().to_string();
}

TEST(LmdbStoreTest, ADataPathThatIsAFileIsAnError) {
  TempDir dir;
  std::ofstream(dir.sub("file")) << "x";
  auto store = open_lmdb_store({.path = dir.sub("file")});
  EXPECT_FALSE(store.ok());
}

TEST(LmdbStoreTest, BadOptionsAreRejected) {
  TempDir dir;
  EXPECT_EQ(open_lmdb_store({.path = ""}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(open_lmdb_store({.path = dir.path(), .initial_map_size = 1000}).status().code(),
            Code::kInvalidArgument);
}

TEST(LmdbStoreTest, WatchesEndWhenTheStoreCloses) {
  TempDir dir;
  auto store = open_or_die(dir.path());
  auto txn = begin(*store);
  auto watch = txn->watch("k");
  ASSERT_TRUE(watch.ok());
  txn.reset();
  store.reset();
  EXPECT_EQ(watch->wait_until(kv::Clock::now() + 1s).code(), Code::kUnavailable);
}

// commit_async leaves the meta page's fsync to the durability tracker; it must still not call
// `done` before that fsync.
TEST(LmdbStoreTest, AnAsyncSyncCommitIsSettledOnlyOnceItIsOnDisk) {
  TempDir dir;
  auto store = open_or_die(dir.path(), Durability::kSync);
  auto* durability = durability_of(dir.path());
  ASSERT_NE(durability, nullptr);
  constexpr int kThreads = 8, kEach = 40;
  auto outcomes = std::make_shared<Outcomes>(kThreads * kEach);
  auto early = std::make_shared<std::atomic<int>>(0);
  on_threads(kThreads, kEach, [&](int t, int i) {
    std::shared_ptr<kv::Transaction> txn = begin(*store);
    txn->set(key_of(t, i), "v");
    // Not waited for: the next commit joins the queue while this one may be in flight.
    txn->commit_async([txn, outcomes, early, durability, index = t * kEach + i](Status s) {
      if (s.ok() && durability->durable() < txn->committed_version()) ++*early;
      outcomes->record(index, s);
    });
  });
  ASSERT_TRUE(outcomes->wait_all())
      << outcomes->received() << " of " << kThreads * kEach << " commits settled";
  for (const Status& s : outcomes->statuses()) EXPECT_TRUE(s.ok()) << s.to_string();
  for (int calls : outcomes->calls()) EXPECT_EQ(calls, 1);
  EXPECT_EQ(*early, 0) << "async commits were settled before their meta page was synced";
  EXPECT_EQ(keys_under_t(*store), size_t{kThreads * kEach});
}

// Blocking and asynchronous committers share one queue: each may lead groups holding the other
// kind. Every one must hear its outcome, once, and every write must land.
void blocking_and_async_commits_all_land(Durability durability) {
  TempDir dir;
  auto store = open_or_die(dir.path(), durability);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8, kEach = 40;
  auto outcomes = std::make_shared<Outcomes>(kThreads * kEach);
  on_threads(kThreads, kEach, [&](int t, int i) {
    const int index = t * kEach + i;
    std::shared_ptr<kv::Transaction> txn = begin(*store);
    txn->set(key_of(t, i), "v");
    // Threads start on different kinds, so both kinds are in the queue at once.
    if ((t + i) % 2 == 0) {
      outcomes->record(index, txn->commit());
    } else {
      txn->commit_async([txn, outcomes, index](Status s) { outcomes->record(index, s); });
    }
  });
  ASSERT_TRUE(outcomes->wait_all())
      << outcomes->received() << " of " << kThreads * kEach << " commits settled";
  for (const Status& s : outcomes->statuses()) EXPECT_TRUE(s.ok()) << s.to_string();
  for (int calls : outcomes->calls()) EXPECT_EQ(calls, 1);
  EXPECT_EQ(keys_under_t(*store), size_t{kThreads * kEach});
}

TEST(LmdbStoreTest, BlockingAndAsyncCommitsFromManyThreadsAllSettleAndLandWithSync) {
  blocking_and_async_commits_all_land(Durability::kSync);
}

TEST(LmdbStoreTest, BlockingAndAsyncCommitsFromManyThreadsAllSettleAndLandWithoutSync) {
  blocking_and_async_commits_all_land(Durability::kNoSync);
}

TEST(LmdbStoreTest, AFailedFsyncMakesAnAsyncCommitReportUnknownResultAndLaterOnesInternal) {
  TempDir dir;
  auto store = open_or_die(dir.path(), Durability::kSync);
  auto* durability = durability_of(dir.path());
  ASSERT_NE(durability, nullptr);
  durability->set_sync_for_testing([] { return EIO; });

  std::shared_ptr<kv::Transaction> first = begin(*store);
  first->set("k", "first");
  auto first_outcome = std::make_shared<Outcomes>(1);
  first->commit_async([first, first_outcome](Status s) { first_outcome->record(0, s); });
  ASSERT_TRUE(first_outcome->wait_all()) << "the async commit was never settled";
  const Status applied = first_outcome->statuses()[0];
  EXPECT_EQ(applied.code(), Code::kUnknownResult) << applied.to_string();
  EXPECT_EQ(read(*store, "k"), "first")
      << "an unknown result here means applied but maybe not durable";
  EXPECT_EQ(store->check_health().code(), Code::kInternal);

  // Several at once, so that some are grouped and led by another async commit.
  constexpr int kThreads = 4, kEach = 10;
  auto later = std::make_shared<Outcomes>(kThreads * kEach);
  on_threads(kThreads, kEach, [&](int t, int i) {
    std::shared_ptr<kv::Transaction> txn = begin(*store);
    txn->set(key_of(t, i), "refused");
    txn->commit_async([txn, later, index = t * kEach + i](Status s) { later->record(index, s); });
  });
  ASSERT_TRUE(later->wait_all()) << later->received() << " of " << kThreads * kEach
                                 << " commits settled";
  for (const Status& s : later->statuses()) EXPECT_EQ(s.code(), Code::kInternal) << s.to_string();
  for (int calls : later->calls()) EXPECT_EQ(calls, 1);
  EXPECT_EQ(keys_under_t(*store), 0u) << "a commit refused after a failed fsync was applied";
}

// Asynchronous commits are settled by different threads with and without fsync (a committer
// and the durability tracker's syncer, or the thread that leads), so these run with both.
class LmdbEachDurabilityTest : public ::testing::TestWithParam<Durability> {
 protected:
  void SetUp() override {
    store_ = open_or_die(dir_.path(), durability());
    ASSERT_NE(store_, nullptr);
  }
  Durability durability() const { return GetParam(); }

  TempDir dir_;
  std::shared_ptr<kv::Store> store_;
};

INSTANTIATE_TEST_SUITE_P(ByDurability, LmdbEachDurabilityTest,
                         ::testing::Values(Durability::kSync, Durability::kNoSync),
                         [](const auto& info) {
                           return info.param == Durability::kSync ? "sync" : "nosync";
                         });

// An in-flight transaction keeps the environment open; the last of them may be released on
// one of the environment's own threads (a committer, or the durability tracker's syncer), which
// must then neither crash nor wait for itself.
TEST_P(LmdbEachDurabilityTest, DroppingTheLastStoreHandleWithAsyncCommitsInFlightLosesNothing) {
  std::weak_ptr<kv::lmdb::Env> env;
  {
    auto opened = kv::lmdb::Env::open({.path = dir_.path(), .durability = durability()});
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    env = *opened;
  }
  constexpr int kThreads = 4, kEach = 16;
  std::vector<std::shared_ptr<kv::Transaction>> txns;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kEach; ++i) {
      txns.push_back(begin(*store_));
      txns.back()->set(key_of(t, i), "v");
    }
  }
  store_.reset();
  auto outcomes = std::make_shared<Outcomes>(txns.size());
  on_threads(kThreads, kEach, [&](int t, int i) {
    const int index = t * kEach + i;
    // From here on only the callback holds the transaction, as kv::run_async does.
    auto txn = std::move(txns[index]);
    txn->commit_async([txn, outcomes, index](Status s) { outcomes->record(index, s); });
  });
  ASSERT_TRUE(outcomes->wait_all())
      << outcomes->received() << " of " << txns.size() << " commits settled";
  for (const Status& s : outcomes->statuses()) EXPECT_TRUE(s.ok()) << s.to_string();
  for (int calls : outcomes->calls()) EXPECT_EQ(calls, 1);

  // The callbacks are released just after they return; then nothing holds the environment.
  const auto deadline = kv::Clock::now() + 5s;
  while (!env.expired() && kv::Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(env.expired()) << "the environment stayed open after every commit was settled";
  auto reopened = open_or_die(dir_.path(), durability());
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(keys_under_t(*reopened), size_t{kThreads * kEach});
}

// A callback may hold the queue's leadership or be the syncer that settles groups: a blocking
// commit from there could wait for itself, so it fails at once instead.
TEST_P(LmdbEachDurabilityTest,
       ABlockingCommitInsideAnAsyncCommitsCallbackFailsInsteadOfWaitingForItself) {
  std::shared_ptr<kv::Store> store = store_;
  std::shared_ptr<kv::Transaction> outer = begin(*store);
  outer->set("t/outer", "v");
  auto inner_status = std::make_shared<std::promise<Status>>();
  auto inner = inner_status->get_future();
  outer->commit_async([outer, store, inner_status](Status s) {
    EXPECT_TRUE(s.ok()) << s.to_string();
    auto txn = begin(*store);
    txn->set("t/inner", "v");
    inner_status->set_value(txn->commit());
  });
  ASSERT_EQ(inner.wait_for(10s), std::future_status::ready)
      << "the blocking commit waited for itself";
  EXPECT_EQ(inner.get().code(), Code::kFailedPrecondition);
  EXPECT_EQ(read(*store, "t/outer"), "v");
  EXPECT_EQ(read(*store, "t/inner"), std::nullopt);
}

// Env::open used to release the reference it found while holding the registry's lock: when
// every other reference went meanwhile (here, a commit settled on the syncer thread), ~Env
// then waited for that lock on the same thread, forever. A race, so it is run many times; with
// the fault it hung about once in a few hundred rounds (the test's timeout catches a hang).
TEST(LmdbStoreTest, OpeningWithAnotherDurabilityWhileTheLastHandleGoesElsewhereNeverHangs) {
  TempDir dir;
  for (int round = 0; round < 300; ++round) {
    auto store = open_or_die(dir.path(), Durability::kSync);
    ASSERT_NE(store, nullptr);
    std::shared_ptr<kv::Transaction> txn = begin(*store);
    txn->set("t/" + std::to_string(round), "v");
    store.reset();
    txn->commit_async([txn](Status s) { EXPECT_TRUE(s.ok()) << s.to_string(); });
    txn.reset();  // the callback holds the last reference now
    Result<std::shared_ptr<kv::Store>> other = InvalidArgument("not yet tried");
    while (!other.ok()) {
      other = open_lmdb_store({.path = dir.path(), .durability = Durability::kNoSync});
      ASSERT_TRUE(other.ok() || other.status().code() == Code::kInvalidArgument)
          << other.status().to_string();
    }
  }
  auto store = open_or_die(dir.path(), Durability::kSync);
  EXPECT_EQ(keys_under_t(*store), 300u);
}

// ---- kv::LoopBatching: commits made in one turn of an event loop go together ----------------

// LMDB's id of the newest committed transaction in the environment this process has open on
// `path`: one more per LMDB write transaction, however many kvq commits it applied.
uint64_t lmdb_txnid(const std::string& path, Durability d) {
  auto env = kv::lmdb::Env::open({.path = path, .durability = d});
  EXPECT_TRUE(env.ok()) << env.status().to_string();
  if (!env.ok()) return 0;
  auto read = (*env)->begin_read();
  EXPECT_TRUE(read.ok()) << read.status().to_string();
  return read.ok() ? mdb_txn_id(read->get()) : 0;
}

// Commits key_of(0, i) asynchronously, recording its outcome as `i`.
void commit_async_key(kv::Store& store, int i, const std::shared_ptr<Outcomes>& outcomes) {
  std::shared_ptr<kv::Transaction> txn = begin(store);
  txn->set(key_of(0, i), "v");
  txn->commit_async([txn, outcomes, i](Status s) { outcomes->record(i, s); });
}

// A store in a fresh directory, and a loop whose tasks wait for run_all().
class LoopBatchingTest : public ::testing::Test {
 protected:
  void open(Durability d) {
    store_ = open_or_die(dir_.path(), d);
    ASSERT_NE(store_, nullptr);
  }
  TempDir dir_;
  std::shared_ptr<kv::Store> store_;
  ListLoop loop_;
};

TEST_F(LoopBatchingTest, CommitsMadeInOneTurnOfALoopGoInOneLmdbTransaction) {
  ASSERT_NO_FATAL_FAILURE(open(Durability::kNoSync));
  kv::LoopBatching batching(loop_.poster());
  const uint64_t before = lmdb_txnid(dir_.path(), Durability::kNoSync);
  auto outcomes = std::make_shared<Outcomes>(3);
  for (int i = 0; i < 3; ++i) commit_async_key(*store_, i, outcomes);
  // The first commit's lead waits for the loop's next turn; the others queued behind it.
  EXPECT_EQ(outcomes->received(), 0u);
  EXPECT_EQ(loop_.pending(), 1u);
  loop_.run_all();
  ASSERT_TRUE(outcomes->wait_all(5s)) << outcomes->received() << " of 3 settled";
  for (const Status& st : outcomes->statuses()) EXPECT_TRUE(st.ok()) << st.to_string();
  for (int calls : outcomes->calls()) EXPECT_EQ(calls, 1);
  EXPECT_EQ(lmdb_txnid(dir_.path(), Durability::kNoSync), before + 1);
  EXPECT_EQ(keys_under_t(*store_), 3u);
}

TEST_F(LoopBatchingTest, ABlockingCommitTakesOverALeadPutOffToALoop) {
  ASSERT_NO_FATAL_FAILURE(open(Durability::kNoSync));
  kv::LoopBatching batching(loop_.poster());
  auto outcomes = std::make_shared<Outcomes>(1);
  commit_async_key(*store_, 0, outcomes);
  ASSERT_EQ(loop_.pending(), 1u);
  // Another thread's blocking commit must not wait for a loop that may never turn again.
  Status blocking = InvalidArgument("not run");
  std::thread([&] {
    auto txn = begin(*store_);
    txn->set(key_of(1, 0), "v");
    blocking = txn->commit();
  }).join();
  EXPECT_TRUE(blocking.ok()) << blocking.to_string();
  ASSERT_TRUE(outcomes->wait_all(5s)) << "the put-off commit did not settle with the blocking one";
  EXPECT_TRUE(outcomes->statuses()[0].ok()) << outcomes->statuses()[0].to_string();
  loop_.run_all();  // the loop's turn comes late: nothing more happens
  EXPECT_EQ(outcomes->calls()[0], 1);
  EXPECT_EQ(keys_under_t(*store_), 2u);
}

TEST_F(LoopBatchingTest, ALoopThatDropsItsTasksLeavesNoCommitBehind) {
  ASSERT_NO_FATAL_FAILURE(open(Durability::kNoSync));
  auto outcomes = std::make_shared<Outcomes>(2);
  {
    kv::LoopBatching batching(loop_.poster());
    commit_async_key(*store_, 0, outcomes);
    commit_async_key(*store_, 1, outcomes);
    EXPECT_EQ(outcomes->received(), 0u);
  }  // the loop stopped without running its tasks
  ASSERT_TRUE(outcomes->wait_all(5s)) << outcomes->received() << " of 2 settled";
  loop_.run_all();  // a task the loop ran after all does nothing more
  for (int calls : outcomes->calls()) EXPECT_EQ(calls, 1);
  // Without batching on the thread, a commit leads at once again.
  auto later = std::make_shared<Outcomes>(1);
  std::shared_ptr<kv::Transaction> txn = begin(*store_);
  txn->set(key_of(1, 1), "v");
  txn->commit_async([txn, later](Status s) { later->record(0, s); });
  EXPECT_EQ(later->received(), 1u);
  EXPECT_EQ(keys_under_t(*store_), 3u);
}

TEST_F(LoopBatchingTest, ADurableStoreDoesNotPutCommitsOff) {
  ASSERT_NO_FATAL_FAILURE(open(Durability::kSync));
  kv::LoopBatching batching(loop_.poster());
  auto outcomes = std::make_shared<Outcomes>(2);
  commit_async_key(*store_, 0, outcomes);
  commit_async_key(*store_, 1, outcomes);
  // Its committer thread already leads the groups (an fsync must not hold up the loop).
  ASSERT_TRUE(outcomes->wait_all(5s)) << outcomes->received() << " of 2 settled";
  EXPECT_EQ(loop_.pending(), 0u);
  EXPECT_EQ(keys_under_t(*store_), 2u);
}

}  // namespace
}  // namespace kvq::testing
