// The relaxed store's record of its last synced state (synced_state.h): what a process crash
// keeps, what a lost page cache restores, and the records themselves. A lost page cache is
// simulated by rewriting the record's boot id after a writer process was killed with its
// commits unsynced (in the page cache only), so that the next open takes it for a new boot.
#include "kv/lmdb/synced_state.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "kvq/lmdb_store.h"
#include "support/child_process.h"
#include "support/kv_helpers.h"
#include "support/temp_dir.h"

namespace kvq::kv::lmdb {
namespace {

using testing::ChildProcess;
using testing::read;
using testing::TempDir;

constexpr int kUnsynced = 40;

Result<std::shared_ptr<kv::Store>> open_relaxed(const std::string& dir) {
  return open_lmdb_store({.path = dir, .durability = Durability::kRelaxed});
}

void put(kv::Store& store, const std::string& key, const std::string& value) {
  ASSERT_TRUE(kv::run(store, [&](kv::Transaction& txn) {
                txn.set(key, value);
                return Status::OK();
              }).ok());
}

// A closed store holding "before"; then a writer process that commits kUnsynced keys after
// the state its open recorded, and is killed before any sync.
void synced_then_unsynced(const std::string& dir) {
  {
    auto store = open_relaxed(dir);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    put(**store, "before", "synced");
  }  // closing syncs and records
  ChildProcess writer({KVQ_LMDB_TEST_WRITER, dir, "unsynced", std::to_string(kUnsynced)});
  ASSERT_TRUE(writer.started());
  std::string line;
  ASSERT_TRUE(writer.read_line(line));
  ASSERT_EQ(line, "done");
  writer.kill_hard();
  writer.wait();
}

int open_lock(const std::string& dir) { return ::open((dir + "/kvq.lock").c_str(), O_RDWR); }

// Rewrites the newest record as if it had been made under another boot.
void forget_the_page_cache(const std::string& dir) {
  const int fd = open_lock(dir);
  ASSERT_GE(fd, 0);
  auto rec = read_record(fd);
  ASSERT_TRUE(rec.ok() && *rec) << "no record";
  SyncedState moved = **rec;
  moved.cache.boot_id = "another-boot";
  ASSERT_TRUE(record(fd, moved).ok());
  ::close(fd);
}

int present(kv::Store& store) {
  int n = 0;
  for (int i = 0; i < kUnsynced; ++i) n += read(store, "u" + std::to_string(i)).has_value();
  return n;
}

TEST(SyncedStateTest, AKilledRelaxedProcessLosesNoCommitItsPageCacheHolds) {
  TempDir dir;
  synced_then_unsynced(dir.path());
  auto store = open_relaxed(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(present(**store), kUnsynced);
  EXPECT_EQ(read(**store, "before"), "synced");
}

TEST(SyncedStateTest, ALostPageCacheRestoresTheLastSyncedStateWhole) {
  TempDir dir;
  synced_then_unsynced(dir.path());
  forget_the_page_cache(dir.path());
  auto store = open_relaxed(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(present(**store), 0) << "the commits after the recorded state are gone";
  EXPECT_EQ(read(**store, "before"), "synced");
  put(**store, "after", "works");  // and the restored store takes writes
  EXPECT_EQ(read(**store, "after"), "works");
}

TEST(SyncedStateTest, ADurableOpenRestoresAndThenKeepsNoRecord) {
  TempDir dir;
  synced_then_unsynced(dir.path());
  forget_the_page_cache(dir.path());
  {
    auto store = open_lmdb_store({.path = dir.path(), .durability = Durability::kDurable});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    EXPECT_EQ(present(**store), 0);
    EXPECT_EQ(read(**store, "before"), "synced");
  }
  const int fd = open_lock(dir.path());
  auto rec = read_record(fd);
  ::close(fd);
  ASSERT_TRUE(rec.ok());
  EXPECT_FALSE(rec->has_value()) << "a durable store must never be rolled back by a stale record";
}

TEST(SyncedStateTest, ARecordOfAnotherDataFileIsIgnored) {
  TempDir dir;
  synced_then_unsynced(dir.path());
  forget_the_page_cache(dir.path());
  // The data file replaced by a copy of itself (a restore from a backup, say): a new inode.
  const std::string data = dir.path() + "/data.mdb";
  std::filesystem::copy_file(data, data + ".copy");
  std::filesystem::rename(data + ".copy", data);
  auto store = open_relaxed(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(present(**store), kUnsynced);
}

TEST(SyncedStateTest, AFileTooShortForTheRecordedStateIsRefusedUntouched) {
  TempDir dir;
  synced_then_unsynced(dir.path());
  const int fd = open_lock(dir.path());
  auto rec = read_record(fd);
  ASSERT_TRUE(rec.ok() && *rec);
  SyncedState bad = **rec;
  bad.cache.boot_id = "another-boot";
  const uint64_t far = uint64_t{1} << 40;  // the recorded state's last page, beyond the file
  bad.meta.replace(120, sizeof far, reinterpret_cast<const char*>(&far), sizeof far);
  ASSERT_TRUE(record(fd, bad).ok());
  ::close(fd);
  auto store = open_relaxed(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition) << store.status().to_string();
  EXPECT_NE(store.status().message().find("shorter"), std::string::npos);
}

TEST(SyncedStateTest, ATornRecordLeavesTheOtherSlotsRecord) {
  TempDir dir;
  const int fd = ::open((dir.path() + "/kvq.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  SyncedState state{.txnid = 7, .page_size = 4096, .meta = std::string(kMetaBytes, 'm')};
  state.cache.boot_id = "b";
  ASSERT_TRUE(record(fd, state).ok());
  state.txnid = 9;
  ASSERT_TRUE(record(fd, state).ok());
  auto newest = read_record(fd);
  ASSERT_TRUE(newest.ok() && *newest);
  EXPECT_EQ((*newest)->txnid, 9u);
  // The second record went to slot 0 (offset 512): tear it.
  ASSERT_EQ(::pwrite(fd, "torn", 4, 512 + 20), 4);
  newest = read_record(fd);
  ASSERT_TRUE(newest.ok() && *newest);
  EXPECT_EQ((*newest)->txnid, 7u);
  ASSERT_TRUE(clear_records(fd).ok());
  newest = read_record(fd);
  ASSERT_TRUE(newest.ok());
  EXPECT_FALSE(newest->has_value());
  ::close(fd);
}

}  // namespace
}  // namespace kvq::kv::lmdb
