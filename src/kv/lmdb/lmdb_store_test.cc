// What only the LMDB backend promises: several processes on one directory, crash safety under
// SIGKILL, a map that grows, and LMDB errors as statuses.
#include "kvq/lmdb_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

#include "kv/lmdb/durability.h"
#include "kv/lmdb/lmdb_env.h"
#include "support/child_process.h"
#include "support/kv_helpers.h"
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
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) put(*store, "t" + std::to_string(t) + "/" + std::to_string(i), blob);
    });
  }
  for (auto& th : threads) th.join();
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
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        auto txn = begin(*store);
        txn->set("t" + std::to_string(t) + "/" + std::to_string(i), "v");
        if (!txn->commit().ok()) continue;
        if (durability->durable() < txn->committed_version()) ++early;
      }
    });
  }
  for (auto& th : threads) th.join();
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
  EXPECT_NE(store.status().message().find(dir.path()), std::string::npos) << store.status().to_string();
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

}  // namespace
}  // namespace kvq::testing
