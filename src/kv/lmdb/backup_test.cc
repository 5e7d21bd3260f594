// backup_lmdb_store (kvq/lmdb_store.h): a copy taken while other processes and threads commit is
// one committed state, opens as a store of its own, compacts, and bad paths are errors that
// change nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "kvq/lmdb_store.h"
#include "support/child_process.h"
#include "support/kv_helpers.h"
#include "support/temp_dir.h"

namespace kvq::testing {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<kv::Store> open_or_die(const std::string& path, Durability d = Durability::kSync) {
  auto store = open_lmdb_store({.path = path, .durability = d});
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  return store.ok() ? *store : nullptr;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Increments "n" and "n_copy" in one transaction: a copy that holds a commit in part shows them
// differing.
Status increment_pair(kv::Store& store) {
  return kv::run(store, [](kv::Transaction& txn) -> Status {
    KVQ_ASSIGN_OR_RETURN(auto n, txn.get("n"));
    const std::string next = std::to_string(std::stoll(n.value_or("0")) + 1);
    txn.set("n", next);
    txn.set("n_copy", next);
    return Status::OK();
  });
}

long long counter(kv::Store& store) { return std::stoll(read(store, "n").value_or("0")); }

class BackupTest : public ::testing::TestWithParam<bool> {
 protected:
  LmdbBackupOptions options() const { return {.compact = GetParam()}; }
};

INSTANTIATE_TEST_SUITE_P(CompactOrNot, BackupTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "compact" : "page_for_page"; });

TEST_P(BackupTest, ACopyTakenWhileAnotherProcessCommitsIsOneCommittedState) {
  TempDir dir;
  const std::string data = dir.sub("data");
  ChildProcess writer({KVQ_LMDB_TEST_WRITER, data, "count"});
  ASSERT_TRUE(writer.started());
  std::string line;
  long long acked = 0;
  while (acked < 300 && writer.read_line(line)) acked = std::stoll(line);
  ASSERT_EQ(acked, 300) << "the writer stopped early";

  // This process has not opened the directory: the copy opens it read-only, beside the writer.
  auto size = backup_lmdb_store(data, dir.sub("copy"), options());
  ASSERT_TRUE(size.ok()) << size.status().to_string();
  writer.kill_hard();
  writer.wait();

  EXPECT_EQ(*size, fs::file_size(dir.sub("copy") + "/data.mdb"));
  EXPECT_FALSE(fs::exists(dir.sub("copy") + "/data.mdb.partial"));
  auto copy = open_or_die(dir.sub("copy"));
  ASSERT_NE(copy, nullptr);
  EXPECT_GE(counter(*copy), acked) << "a commit acknowledged before the backup began is missing";
  EXPECT_EQ(read(*copy, "n_copy"), read(*copy, "n")) << "the copy holds a commit in part";
}

TEST_P(BackupTest, ACopyTakenThroughAStoreThisProcessHasOpenIsOneCommittedState) {
  for (Durability durability : {Durability::kSync, Durability::kNoSync}) {
    TempDir dir;
    auto store = open_or_die(dir.sub("data"), durability);
    ASSERT_NE(store, nullptr);
    std::atomic<bool> stop{false};
    std::atomic<long long> committed{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < 4; ++t) {
      writers.emplace_back([&] {
        while (!stop) {
          if (increment_pair(*store).ok()) ++committed;
        }
      });
    }
    while (committed < 200) std::this_thread::yield();
    const long long before = counter(*store);
    auto size = backup_lmdb_store(dir.sub("data"), dir.sub("copy"), options());
    stop = true;
    for (auto& w : writers) w.join();
    ASSERT_TRUE(size.ok()) << size.status().to_string();

    auto copy = open_or_die(dir.sub("copy"));
    ASSERT_NE(copy, nullptr);
    EXPECT_GE(counter(*copy), before) << "a commit made before the backup began is missing";
    EXPECT_LE(counter(*copy), counter(*store));
    EXPECT_EQ(read(*copy, "n_copy"), read(*copy, "n")) << "the copy holds a commit in part";
    put(*store, "after", "backup");  // the source store goes on as before
    EXPECT_EQ(read(*store, "after"), "backup");
  }
}

TEST_P(BackupTest, TheCopyIsAStoreOfItsOwn) {
  TempDir dir;
  auto store = open_or_die(dir.sub("data"));
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 500; ++i)
    put(*store, "t/" + std::to_string(i), std::string(100, 'a' + i % 26));
  ASSERT_TRUE(backup_lmdb_store(dir.sub("data"), dir.sub("copy"), options()).ok());

  auto copy = open_or_die(dir.sub("copy"));
  ASSERT_NE(copy, nullptr);
  for (int i = 0; i < 500; i += 37) {
    EXPECT_EQ(read(*copy, "t/" + std::to_string(i)), std::string(100, 'a' + i % 26)) << i;
  }
  auto all = kv::run(*copy, [](kv::Transaction& txn) { return txn.get_range("t/", "t0"); });
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 500u);
  // Commit versions go on from the source's: a transaction on the copy conflicts and commits
  // as on any store.
  put(*copy, "t/0", "changed in the copy");
  EXPECT_EQ(read(*copy, "t/0"), "changed in the copy");
  EXPECT_EQ(read(*store, "t/0"), std::string(100, 'a'));
}

TEST(BackupCompactionTest, ACompactCopyLeavesOutTheFreedPages) {
  TempDir dir;
  auto store = open_or_die(dir.sub("data"), Durability::kNoSync);
  ASSERT_NE(store, nullptr);
  const std::string big(4000, 'x');
  for (int batch = 0; batch < 20; ++batch) {
    ASSERT_TRUE(kv::run(*store, [&](kv::Transaction& txn) -> Status {
                  for (int i = 0; i < 100; ++i)
                    txn.set("t/" + std::to_string(batch * 100 + i), big);
                  return Status::OK();
                }).ok());
  }
  ASSERT_TRUE(kv::run(*store, [](kv::Transaction& txn) -> Status {
                txn.clear_range("t/", "t0");
                return Status::OK();
              }).ok());
  put(*store, "kept", "1");

  auto page_for_page = backup_lmdb_store(dir.sub("data"), dir.sub("plain"), {.compact = false});
  auto compacted = backup_lmdb_store(dir.sub("data"), dir.sub("compact"), {.compact = true});
  ASSERT_TRUE(page_for_page.ok()) << page_for_page.status().to_string();
  ASSERT_TRUE(compacted.ok()) << compacted.status().to_string();
  EXPECT_GT(*page_for_page, 8'000'000u) << "2,000 values of 4 KB were written";
  EXPECT_LT(*compacted * 50, *page_for_page) << "the compact copy kept freed pages";
  auto copy = open_or_die(dir.sub("compact"));
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(read(*copy, "kept"), "1");
  EXPECT_EQ(read(*copy, "t/0"), std::nullopt);
}

TEST(BackupErrorsTest, AMissingDataDirectoryIsNotFoundAndIsNotCreated) {
  TempDir dir;
  auto size = backup_lmdb_store(dir.sub("nothing"), dir.sub("copy"));
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), Code::kNotFound);
  EXPECT_NE(size.status().message().find("no kvq data directory"), std::string::npos)
      << size.status().to_string();
  EXPECT_FALSE(fs::exists(dir.sub("nothing")));
  EXPECT_FALSE(fs::exists(dir.sub("copy")));
}

TEST(BackupErrorsTest, ADestinationThatHoldsAnythingIsRefusedAndLeftAsItWas) {
  TempDir dir;
  { put(*open_or_die(dir.sub("data")), "k", "v"); }
  // An earlier backup: a second one into it must not replace it.
  ASSERT_TRUE(backup_lmdb_store(dir.sub("data"), dir.sub("copy")).ok());
  const std::string earlier = file_bytes(dir.sub("copy") + "/data.mdb");
  auto again = backup_lmdb_store(dir.sub("data"), dir.sub("copy"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kInvalidArgument);
  EXPECT_NE(again.status().message().find("not empty"), std::string::npos)
      << again.status().to_string();
  EXPECT_EQ(file_bytes(dir.sub("copy") + "/data.mdb"), earlier);

  std::ofstream(dir.sub("a-file")) << "x";
  auto onto_file = backup_lmdb_store(dir.sub("data"), dir.sub("a-file"));
  ASSERT_FALSE(onto_file.ok());
  EXPECT_EQ(onto_file.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(file_bytes(dir.sub("a-file")), "x");

  // Backing a directory up into itself is the same refusal: it is not empty.
  auto into_itself = backup_lmdb_store(dir.sub("data"), dir.sub("data"));
  EXPECT_EQ(into_itself.status().code(), Code::kInvalidArgument);
}

TEST(BackupErrorsTest, AFailedCopyLeavesNoFileBehindAndTheSourceUntouched) {
  TempDir dir;
  fs::create_directories(dir.sub("data"));
  const std::string garbage(100'000, '\x5a');
  std::ofstream(dir.sub("data") + "/data.mdb", std::ios::binary) << garbage;

  auto size = backup_lmdb_store(dir.sub("data"), dir.sub("copy"));
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("read-only"), std::string::npos)
      << size.status().to_string();
  EXPECT_TRUE(fs::is_empty(dir.sub("copy"))) << "a partial copy was left behind";
  EXPECT_EQ(file_bytes(dir.sub("data") + "/data.mdb"), garbage);
}

TEST(BackupErrorsTest, EmptyPathsAreRejected) {
  TempDir dir;
  EXPECT_EQ(backup_lmdb_store("", dir.sub("copy")).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(backup_lmdb_store(dir.path(), "").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace kvq::testing
