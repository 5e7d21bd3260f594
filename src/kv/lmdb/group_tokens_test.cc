// Tokens (Transaction::touch) in an LMDB group commit mean what a write per member means: a
// watch wakes, a later member that read the token is aborted, whatever comes last wins. Kept as
// the contract any coalescing of tokens in a group (issue 42's lever 3, tried and not kept:
// docs/performance.md) must meet. Each test forms its group deterministically: asynchronous
// commits made while a loop (kv::LoopBatching) has not turned join the first one's put-off
// lead, and the loop's turn commits them together.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kv/lmdb/lmdb_env.h"
#include "kvq/lmdb_store.h"
#include "support/kv_helpers.h"
#include "support/list_loop.h"
#include "support/temp_dir.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;

class GroupTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = open_lmdb_store({.path = dir_.path(), .durability = Durability::kNoSync});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    store_ = *store;
  }

  // Commits `txn` asynchronously (settled only at the loop's turn); its status lands in the
  // returned slot.
  std::shared_ptr<std::optional<Status>> commit_later(std::shared_ptr<kv::Transaction> txn) {
    auto status = std::make_shared<std::optional<Status>>();
    txn->commit_async([txn, status](Status s) { *status = s; });
    return status;
  }
  std::optional<std::string> value_of(const std::string& key) {
    auto value = kv::run(*store_, [&](kv::Transaction& txn) { return txn.get(key); });
    EXPECT_TRUE(value.ok()) << value.status().to_string();
    return value.ok() ? *value : std::nullopt;
  }
  uint64_t lmdb_txnid() {
    auto env = kv::lmdb::Env::open({.path = dir_.path(), .durability = Durability::kNoSync});
    EXPECT_TRUE(env.ok()) << env.status().to_string();
    auto read = (*env)->begin_read();
    EXPECT_TRUE(read.ok()) << read.status().to_string();
    return read.ok() ? mdb_txn_id(read->get()) : 0;
  }

  TempDir dir_;
  std::shared_ptr<kv::Store> store_;
  ListLoop loop_;
};

TEST_F(GroupTokensTest, ATokenEveryMemberTouchedChangesOnceAndWakesItsWatch) {
  put(*store_, "tok", "before");
  auto watch = kv::run(*store_, [](kv::Transaction& txn) { return txn.watch("tok"); });
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  const uint64_t txnid = lmdb_txnid();
  kv::LoopBatching batching(loop_.poster());
  std::vector<std::shared_ptr<std::optional<Status>>> statuses;
  for (int i = 0; i < 3; ++i) {
    std::shared_ptr<kv::Transaction> txn = begin(*store_);
    txn->set("k" + std::to_string(i), "v");
    txn->touch("tok");
    statuses.push_back(commit_later(txn));
  }
  EXPECT_FALSE(watch->ready());
  loop_.run_all();
  for (const auto& s : statuses) {
    ASSERT_TRUE(s->has_value());
    EXPECT_TRUE((*s)->ok()) << (*s)->to_string();
  }
  EXPECT_EQ(lmdb_txnid(), txnid + 1);  // one group
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
  auto now = value_of("tok");
  ASSERT_TRUE(now.has_value());
  EXPECT_NE(*now, "before");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(value_of("k" + std::to_string(i)), "v");
}

TEST_F(GroupTokensTest, AMemberThatReadATokenAnEarlierMemberTouchedIsAborted) {
  put(*store_, "tok", "before");
  kv::LoopBatching batching(loop_.poster());
  std::shared_ptr<kv::Transaction> toucher = begin(*store_);
  toucher->set("a", "1");
  toucher->touch("tok");
  // Both read at the same version, and the toucher commits first in the group.
  std::shared_ptr<kv::Transaction> reader = begin(*store_);
  ASSERT_TRUE(reader->get("tok").ok());
  reader->set("b", "1");
  std::shared_ptr<kv::Transaction> snapshot_reader = begin(*store_);
  ASSERT_TRUE(snapshot_reader->get("tok", {.snapshot = true}).ok());
  snapshot_reader->set("c", "1");
  auto touched = commit_later(toucher);
  auto read = commit_later(reader);
  auto snapshot_read = commit_later(snapshot_reader);
  loop_.run_all();
  ASSERT_TRUE(touched->has_value() && read->has_value() && snapshot_read->has_value());
  EXPECT_TRUE((*touched)->ok()) << (*touched)->to_string();
  EXPECT_EQ((*read)->code(), Code::kAborted) << (*read)->to_string();
  EXPECT_TRUE((*snapshot_read)->ok()) << (*snapshot_read)->to_string();
  EXPECT_EQ(value_of("b"), std::nullopt);
  EXPECT_EQ(value_of("c"), "1");
}

TEST_F(GroupTokensTest, AMemberThatReadARangeHoldingATouchedTokenIsAborted) {
  put(*store_, "r/tok", "before");
  kv::LoopBatching batching(loop_.poster());
  std::shared_ptr<kv::Transaction> toucher = begin(*store_);
  toucher->touch("r/tok");
  std::shared_ptr<kv::Transaction> reader = begin(*store_);
  ASSERT_TRUE(reader->get_range("r/", "r0").ok());
  reader->set("b", "1");
  auto touched = commit_later(toucher);
  auto read = commit_later(reader);
  loop_.run_all();
  ASSERT_TRUE(touched->has_value() && read->has_value());
  EXPECT_TRUE((*touched)->ok()) << (*touched)->to_string();
  EXPECT_EQ((*read)->code(), Code::kAborted) << (*read)->to_string();
}

TEST_F(GroupTokensTest, WhatComesLastWinsBetweenTouchesSetsAndClears) {
  put(*store_, "x", "old");
  put(*store_, "y", "old");
  put(*store_, "r/z", "old");
  kv::LoopBatching batching(loop_.poster());
  // In one transaction: a set after a touch keeps the set's value; a clear after one, none.
  std::shared_ptr<kv::Transaction> one = begin(*store_);
  one->touch("s");
  one->set("s", "set");
  one->touch("c");
  one->clear("c");
  one->touch("r/in");
  one->clear_range("r/", "r0");
  // Across members: a later member's set or clear of a token an earlier one touched wins; a
  // later touch of a key an earlier member set wins over the set.
  std::shared_ptr<kv::Transaction> first = begin(*store_);
  first->touch("x");
  first->touch("y");
  first->touch("r/z");
  first->set("w", "set");
  std::shared_ptr<kv::Transaction> second = begin(*store_);
  second->set("x", "second");
  second->clear("y");
  second->clear_range("r/", "r0");
  second->touch("w");
  auto s1 = commit_later(one);
  auto s2 = commit_later(first);
  auto s3 = commit_later(second);
  loop_.run_all();
  for (const auto& s : {s1, s2, s3}) {
    ASSERT_TRUE(s->has_value());
    EXPECT_TRUE((*s)->ok()) << (*s)->to_string();
  }
  EXPECT_EQ(value_of("s"), "set");
  EXPECT_EQ(value_of("c"), std::nullopt);
  EXPECT_EQ(value_of("r/in"), std::nullopt);
  EXPECT_EQ(value_of("x"), "second");
  EXPECT_EQ(value_of("y"), std::nullopt);
  EXPECT_EQ(value_of("r/z"), std::nullopt);
  auto w = value_of("w");
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(*w, "set");
}

TEST_F(GroupTokensTest, ATransactionReadsTheTokenItTouched) {
  auto txn = begin(*store_);
  txn->touch("tok");
  auto seen = txn->get("tok");
  ASSERT_TRUE(seen.ok()) << seen.status().to_string();
  ASSERT_TRUE(seen->has_value());
  ASSERT_TRUE(txn->commit().ok());
  EXPECT_EQ(value_of("tok"), *seen);
}

}  // namespace
}  // namespace kvq::testing
