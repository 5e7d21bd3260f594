// The kv conformance suite: what every backend must honour (kvq/kv.h), run on each backend.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kv/fault_injection.h"
#include "support/backends.h"
#include "support/delivered.h"
#include "support/kv_helpers.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using kv::KeyValue;
using kv::RangeOptions;

class KvConformance : public StoreTest {};

std::vector<std::string> keys_of(const std::vector<KeyValue>& kvs) {
  std::vector<std::string> out;
  for (const auto& kv : kvs) out.push_back(kv.key);
  return out;
}

// Commits `txn` with commit_async and waits for its one outcome (Internal if none came).
Status commit_async_and_wait(const std::shared_ptr<kv::Transaction>& txn) {
  auto delivered = std::make_shared<Delivered<Status>>();
  // The callback holds the transaction: it must outlive `done` even if this wait gives up.
  txn->commit_async([txn, delivered](Status s) { delivered->add(std::move(s)); });
  if (!delivered->wait_for(1)) return Internal("commit_async never called done");
  return delivered->values()[0];
}

Status increment(kv::Transaction& txn) {
  KVQ_ASSIGN_OR_RETURN(auto v, txn.get("n"));
  txn.set("n", std::to_string(std::stoi(v.value_or("0")) + 1));
  return Status::OK();
}

TEST_P(KvConformance, ReadsSeeTheTransactionsOwnWrites) {
  put(store(), "a", "1");
  put(store(), "b", "2");
  auto txn = begin(store());
  txn->set("a", "10");
  txn->clear("b");
  txn->set("c", "3");
  EXPECT_EQ(*txn->get("a"), "10");
  EXPECT_EQ(*txn->get("b"), std::nullopt);
  EXPECT_EQ(*txn->get("c"), "3");
  auto range = txn->get_range("a", "z");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(*range, (std::vector<KeyValue>{{"a", "10"}, {"c", "3"}}));
}

TEST_P(KvConformance, ClearRangeThenSetInsideItKeepsOnlyTheLaterSet) {
  for (auto k : {"k1", "k2", "k3", "k4"}) put(store(), k, "old");
  auto txn = begin(store());
  txn->set("k2", "doomed");
  txn->clear_range("k1", "k4");
  txn->set("k3", "new");
  EXPECT_EQ(*txn->get("k2"), std::nullopt);
  EXPECT_EQ(keys_of(*txn->get_range("k", "l")), (std::vector<std::string>{"k3", "k4"}));
  ASSERT_TRUE(txn->commit().ok());
  EXPECT_EQ(read(store(), "k1"), std::nullopt);
  EXPECT_EQ(read(store(), "k2"), std::nullopt);
  EXPECT_EQ(read(store(), "k3"), "new");
  EXPECT_EQ(read(store(), "k4"), "old");
}

TEST_P(KvConformance, UncommittedWritesAreInvisibleAndDiscarded) {
  {
    auto txn = begin(store());
    txn->set("x", "1");
    auto other = begin(store());
    EXPECT_EQ(*other->get("x"), std::nullopt);
  }
  EXPECT_EQ(read(store(), "x"), std::nullopt);
}

TEST_P(KvConformance, NonSnapshotReadConflictsWithALaterCommit) {
  put(store(), "k", "0");
  auto t1 = begin(store());
  ASSERT_EQ(*t1->get("k"), "0");
  put(store(), "k", "1");
  t1->set("other", "x");
  Status s = t1->commit();
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  EXPECT_EQ(read(store(), "other"), std::nullopt) << "a failed commit must change nothing";
}

TEST_P(KvConformance, ReadsAllowedToBeStaleStillConflictWithALaterCommit) {
  put(store(), "k", "0");
  put(store(), "r", "0");
  auto t1 = begin(store());
  t1->allow_stale_reads();  // (on etcd, the first read skips the quorum round)
  ASSERT_EQ(*t1->get("k"), "0");
  auto rows = t1->get_range("r", "s");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  put(store(), "k", "1");
  t1->set("k", "2");
  Status s = t1->commit();
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  EXPECT_EQ(read(store(), "k"), "1") << "a failed commit must change nothing";

  auto t2 = begin(store());
  t2->allow_stale_reads();
  ASSERT_TRUE(t2->get_range("r", "s").ok());
  put(store(), "r2", "new");  // into the range t2 read
  t2->set("k", "3");
  s = t2->commit();
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  EXPECT_EQ(read(store(), "k"), "1");
}

// Guessed reads (ReadOptions::remembered, assume_absent) are checked at commit like any read,
// whatever `snapshot` says: a wrong guess never commits, and kv::run's next attempt, reading
// instead, writes what a read would have. (On LMDB a guess is an ordinary read.)
TEST_P(KvConformance, AGuessedReadNeverCommitsOverWhatTheStoreHolds) {
  put(store(), "row", "old");
  put(store(), "settings", "s1");
  auto seen = begin(store());  // the settings remembered, where a store remembers
  seen->allow_stale_reads();
  ASSERT_EQ(*seen->get("settings", {.remembered = true}), "s1");
  int attempts = 0;
  Status s = kv::run(store(), [&](kv::Transaction& txn) -> Status {
    const bool guess = attempts++ == 0;
    txn.allow_stale_reads();
    KVQ_ASSIGN_OR_RETURN(auto settings, txn.get("settings", {.remembered = guess}));
    KVQ_ASSIGN_OR_RETURN(auto rows,
                         txn.get_many({"row"}, {.snapshot = true, .assume_absent = guess}));
    txn.set("row", rows[0].value_or("none") + "+" + settings.value_or("none"));
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(read(store(), "row"), "old+s1");
}

// prefetch only fetches: a prefetched key conflicts once the transaction reads it, never before,
// and what it answers then is what get would have (the transaction's own writes included).
TEST_P(KvConformance, APrefetchedKeyIsTrackedOnlyOnceReadAndReadsAsGetWould) {
  put(store(), "a", "1");
  put(store(), "b", "2");
  auto t1 = begin(store());
  ASSERT_TRUE(t1->read_version().ok());  // fixed here on every backend
  t1->set("c", "mine");
  t1->prefetch({"a", "b", "c", "absent"});
  put(store(), "a", "changed after the prefetch");
  EXPECT_EQ(*t1->get("a"), "1") << "the read answers at the transaction's version";
  EXPECT_EQ(*t1->get("c"), "mine");
  EXPECT_EQ(*t1->get("absent"), std::nullopt);
  t1->set("out", "1");
  Status s = t1->commit();
  EXPECT_EQ(s.code(), Code::kAborted) << "a changed after t1 read it: " << s.to_string();

  auto t2 = begin(store());
  t2->prefetch({"a", "b"});
  ASSERT_EQ(*t2->get("a"), "changed after the prefetch");
  put(store(), "b", "changed, never read by t2");
  t2->set("out", "2");
  s = t2->commit();
  EXPECT_TRUE(s.ok()) << "b was prefetched, not read: " << s.to_string();
  EXPECT_EQ(read(store(), "out"), "2");
}

// A prefetched range likewise: its get_range answers as it would have (at the transaction's
// version, with the transaction's own writes, reverse and limit as asked), and only a
// non-snapshot get_range of it adds a conflict.
TEST_P(KvConformance, APrefetchedRangeIsTrackedOnlyOnceReadAndReadsAsGetRangeWould) {
  for (const char* k : {"q/1", "q/2", "q/3", "q/4"}) put(store(), k, "v");
  put(store(), "s/1", "v");
  auto t1 = begin(store());
  ASSERT_TRUE(t1->read_version().ok());  // fixed here on every backend
  t1->set("q/25", "mine");
  t1->clear("q/3");
  t1->prefetch({"a"}, {{"q/", "q0", {.limit = 3}},
                       {"q/", "q0", {.reverse = true}},
                       {"s/", "s0", {.snapshot = true}}});
  put(store(), "q/0", "added after the prefetch");
  auto forward = t1->get_range("q/", "q0", {.limit = 3});
  ASSERT_TRUE(forward.ok()) << forward.status().to_string();
  EXPECT_EQ(keys_of(*forward), (std::vector<std::string>{"q/1", "q/2", "q/25"}));
  auto backward = t1->get_range("q/", "q0", {.reverse = true});
  ASSERT_TRUE(backward.ok()) << backward.status().to_string();
  EXPECT_EQ(keys_of(*backward), (std::vector<std::string>{"q/4", "q/25", "q/2", "q/1"}));
  t1->set("out", "1");
  Status s = t1->commit();
  EXPECT_EQ(s.code(), Code::kAborted) << "q/0 went into a range t1 read: " << s.to_string();

  auto t2 = begin(store());
  t2->prefetch({}, {{"q/", "q0", {}}, {"s/", "s0", {}}});
  auto read_q = t2->get_range("q/", "q0");
  ASSERT_TRUE(read_q.ok()) << read_q.status().to_string();
  EXPECT_EQ(read_q->size(), 5u);
  put(store(), "s/2", "added to a range t2 prefetched, never read");
  t2->set("out", "2");
  s = t2->commit();
  EXPECT_TRUE(s.ok()) << "s/ was prefetched, not read: " << s.to_string();
  EXPECT_EQ(read(store(), "out"), "2");
}

TEST_P(KvConformance, SnapshotReadAddsNoConflict) {
  put(store(), "k", "0");
  auto t1 = begin(store());
  ASSERT_EQ(*t1->get("k", {.snapshot = true}), "0");
  put(store(), "k", "1");
  t1->set("other", "x");
  EXPECT_TRUE(t1->commit().ok());
}

TEST_P(KvConformance, GetManyAnswersInOrderAndSeesTheTransactionsOwnWrites) {
  put(store(), "a", "1");
  put(store(), "b", "2");
  put(store(), "e", "5");
  auto txn = begin(store());
  txn->set("c", "3");
  txn->clear("b");
  auto values = txn->get_many({"e", "a", "b", "c", "d"});
  ASSERT_TRUE(values.ok()) << values.status().to_string();
  EXPECT_EQ(*values,
            (std::vector<std::optional<std::string>>{"5", "1", std::nullopt, "3", std::nullopt}));
}

TEST_P(KvConformance, GetManyReadsAtTheTransactionsReadVersion) {
  put(store(), "a", "1");
  put(store(), "b", "2");
  auto t1 = begin(store());
  ASSERT_EQ(*t1->get("a"), "1");  // fixes t1's read version
  put(store(), "a", "10");
  put(store(), "b", "20");
  put(store(), "c", "30");
  auto values = t1->get_many({"a", "b", "c"});
  ASSERT_TRUE(values.ok()) << values.status().to_string();
  EXPECT_EQ(*values, (std::vector<std::optional<std::string>>{"1", "2", std::nullopt}));
}

TEST_P(KvConformance, GetManyConflictsWithALaterChangeOfAnyKeyItRead) {
  put(store(), "k", "0");
  {
    auto t1 = begin(store());
    ASSERT_TRUE(t1->get_many({"k", "absent1"}).ok());
    put(store(), "k", "1");  // a key it found
    t1->set("other", "x");
    EXPECT_EQ(t1->commit().code(), Code::kAborted);
  }
  {
    auto t1 = begin(store());
    ASSERT_TRUE(t1->get_many({"k", "absent2"}).ok());
    put(store(), "absent2", "created");  // a key it found absent
    t1->set("other", "x");
    EXPECT_EQ(t1->commit().code(), Code::kAborted);
  }
  EXPECT_EQ(read(store(), "other"), std::nullopt) << "a failed commit must change nothing";
}

TEST_P(KvConformance, GetManyWithSnapshotAddsNoConflict) {
  put(store(), "k", "0");
  auto t1 = begin(store());
  ASSERT_TRUE(t1->get_many({"k", "absent"}, {.snapshot = true}).ok());
  put(store(), "k", "1");
  put(store(), "absent", "now present");
  t1->set("other", "x");
  EXPECT_TRUE(t1->commit().ok());
}

TEST_P(KvConformance, ReadingAnAbsentKeyConflictsWithItsCreation) {
  auto t1 = begin(store());
  ASSERT_EQ(*t1->get("k"), std::nullopt);
  put(store(), "k", "new");
  t1->set("k", "mine");
  EXPECT_EQ(t1->commit().code(), Code::kAborted);
  EXPECT_EQ(read(store(), "k"), "new");
}

TEST_P(KvConformance, ReadingAKeyConflictsWithItsDeletion) {
  put(store(), "k", "v");
  auto t1 = begin(store());
  ASSERT_EQ(*t1->get("k"), "v");
  ASSERT_TRUE(kv::run(store(), [](kv::Transaction& t) {
                t.clear("k");
                return Status::OK();
              }).ok());
  t1->set("other", "x");
  EXPECT_EQ(t1->commit().code(), Code::kAborted);
}

TEST_P(KvConformance, ReadOnlyTransactionsNeverConflict) {
  put(store(), "k", "0");
  auto t1 = begin(store());
  ASSERT_EQ(*t1->get("k"), "0");
  put(store(), "k", "1");
  EXPECT_TRUE(t1->commit().ok());
}

TEST_P(KvConformance, ExplicitReadConflictKeyConflicts) {
  auto t1 = begin(store());
  ASSERT_TRUE(t1->add_read_conflict_key("guard").ok());
  put(store(), "guard", "changed");
  t1->set("x", "1");
  EXPECT_EQ(t1->commit().code(), Code::kAborted);
}

TEST_P(KvConformance, OfTwoReadModifyWritesOnOneKeyExactlyOneCommitsFirst) {
  put(store(), "n", "0");
  auto t1 = begin(store());
  auto t2 = begin(store());
  ASSERT_EQ(*t1->get("n"), "0");
  ASSERT_EQ(*t2->get("n"), "0");
  t1->set("n", "1");
  t2->set("n", "1");
  EXPECT_TRUE(t1->commit().ok());
  EXPECT_EQ(t2->commit().code(), Code::kAborted);
  EXPECT_EQ(read(store(), "n"), "1");
}

TEST_P(KvConformance, ConcurrentIncrementsThroughTheRetryLoopAllCount) {
  put(store(), "n", "0");
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Status s = kv::run(store(), [](kv::Transaction& txn) -> Status {
          KVQ_ASSIGN_OR_RETURN(auto v, txn.get("n"));
          txn.set("n", std::to_string(std::stoi(v.value_or("0")) + 1));
          return Status::OK();
        });
        if (!s.ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(read(store(), "n"), std::to_string(kThreads * kEach));
}

TEST_P(KvConformance, RangeReadsHonourLimitAndReverse) {
  for (char c = 'a'; c <= 'f'; ++c) put(store(), std::string("r/") + c, std::string(1, c));
  put(store(), "q", "outside");
  put(store(), "s", "outside");
  auto txn = begin(store());
  EXPECT_EQ(keys_of(*txn->get_range("r/", "r0")),
            (std::vector<std::string>{"r/a", "r/b", "r/c", "r/d", "r/e", "r/f"}));
  EXPECT_EQ(keys_of(*txn->get_range("r/", "r0", {.limit = 2})),
            (std::vector<std::string>{"r/a", "r/b"}));
  EXPECT_EQ(keys_of(*txn->get_range("r/", "r0", {.limit = 2, .reverse = true})),
            (std::vector<std::string>{"r/f", "r/e"}));
  EXPECT_EQ(keys_of(*txn->get_range("r/b", "r/e", {.reverse = true})),
            (std::vector<std::string>{"r/d", "r/c", "r/b"}));
  EXPECT_TRUE(txn->get_range("r/z", "r0")->empty());
  EXPECT_TRUE(txn->get_range("r0", "r/")->empty()) << "an inverted range is empty";
}

TEST_P(KvConformance, ReverseRangeReadMergesOwnWrites) {
  put(store(), "m/b", "b");
  put(store(), "m/d", "d");
  auto txn = begin(store());
  txn->set("m/c", "c");
  txn->set("m/e", "e");
  txn->clear("m/b");
  EXPECT_EQ(keys_of(*txn->get_range("m/", "m0", {.reverse = true})),
            (std::vector<std::string>{"m/e", "m/d", "m/c"}));
  EXPECT_EQ(keys_of(*txn->get_range("m/", "m0", {.limit = 2})),
            (std::vector<std::string>{"m/c", "m/d"}));
}

TEST_P(KvConformance, ClearRangeRemovesExactlyTheHalfOpenRange) {
  for (auto k : {"a", "b", "c", "d"}) put(store(), k, k);
  ASSERT_TRUE(kv::run(store(), [](kv::Transaction& t) {
                t.clear_range("b", "d");
                return Status::OK();
              }).ok());
  EXPECT_EQ(read(store(), "a"), "a");
  EXPECT_EQ(read(store(), "b"), std::nullopt);
  EXPECT_EQ(read(store(), "c"), std::nullopt);
  EXPECT_EQ(read(store(), "d"), "d");
}

TEST_P(KvConformance, RangeReadConflictsWithAnInsertIntoTheRange) {
  put(store(), "p/1", "x");
  auto t1 = begin(store());
  ASSERT_EQ(t1->get_range("p/", "p0")->size(), 1u);
  put(store(), "p/2", "y");
  t1->set("result", "1");
  EXPECT_EQ(t1->commit().code(), Code::kAborted);
}

TEST_P(KvConformance, RangeReadConflictsWithADeletionInTheRange) {
  put(store(), "p/1", "x");
  put(store(), "p/2", "y");
  auto t1 = begin(store());
  ASSERT_EQ(t1->get_range("p/", "p0")->size(), 2u);
  ASSERT_TRUE(kv::run(store(), [](kv::Transaction& t) {
                t.clear("p/2");
                return Status::OK();
              }).ok());
  t1->set("result", "1");
  EXPECT_EQ(t1->commit().code(), Code::kAborted);
}

TEST_P(KvConformance, LimitedRangeReadDoesNotConflictBeyondWhatItCovered) {
  for (auto k : {"p/1", "p/2", "p/3"}) put(store(), k, "v");
  auto t1 = begin(store());
  ASSERT_EQ(t1->get_range("p/", "p0", {.limit = 1})->size(), 1u);
  put(store(), "p/3", "changed");
  t1->set("result", "1");
  EXPECT_TRUE(t1->commit().ok());
}

TEST_P(KvConformance, SnapshotRangeReadAddsNoConflict) {
  auto t1 = begin(store());
  ASSERT_TRUE(t1->get_range("p/", "p0", {.snapshot = true})->empty());
  put(store(), "p/1", "x");
  t1->set("result", "1");
  EXPECT_TRUE(t1->commit().ok());
}

TEST_P(KvConformance, ReadVersionsFollowCommitOrder) {
  auto t0 = begin(store());
  uint64_t v0 = *t0->read_version();
  t0->set("a", "1");
  ASSERT_TRUE(t0->commit().ok());
  uint64_t c0 = t0->committed_version();
  EXPECT_GT(c0, v0);
  auto t1 = begin(store());
  EXPECT_GE(*t1->read_version(), c0);
  t1->set("a", "2");
  ASSERT_TRUE(t1->commit().ok());
  EXPECT_GT(t1->committed_version(), c0);
}

TEST_P(KvConformance, OversizedKeyOrValueFailsAtCommitAndChangesNothing) {
  auto txn = begin(store());
  txn->set("fine", "1");
  txn->set(std::string(kv::kMaxKeySize + 1, 'k'), "v");
  EXPECT_EQ(txn->commit().code(), Code::kInvalidArgument);
  EXPECT_EQ(read(store(), "fine"), std::nullopt);

  auto txn2 = begin(store());
  txn2->set("fine", "1");
  txn2->set("big", std::string(kv::kMaxValueSize + 1, 'v'));
  EXPECT_EQ(txn2->commit().code(), Code::kInvalidArgument);
  EXPECT_EQ(read(store(), "fine"), std::nullopt);
}

TEST_P(KvConformance, LargestAllowedKeyAndValueRoundTrip) {
  const std::string key(kv::kMaxKeySize, 'k'), value(kv::kMaxValueSize, 'v');
  put(store(), key, value);
  EXPECT_EQ(read(store(), key), value);
}

TEST_P(KvConformance, WatchFiresAfterACommitChangesTheKeyAndNotBefore) {
  put(store(), "w", "0");
  auto reader = begin(store());
  auto watch = reader->watch("w");
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  ASSERT_TRUE(reader->commit().ok());
  EXPECT_FALSE(watch->ready());

  auto writer = begin(store());
  writer->set("w", "1");
  EXPECT_EQ(watch->wait_until(kv::Clock::now() + 50ms).code(), Code::kDeadlineExceeded)
      << "an uncommitted write must not fire a watch";
  ASSERT_TRUE(writer->commit().ok());
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
}

// touch() is a write of a fresh value: the transaction reads it back, a commit fires the
// key's watch, and many commits touching one key at once (on etcd: batched, the token written
// once for them) all commit with their own writes, each waking the watch.
TEST_P(KvConformance, TouchWritesAFreshValueThatWakesTheKeysWatch) {
  put(store(), "token", "0");
  auto reader = begin(store());
  auto watch = reader->watch("token");
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE(reader->commit().ok());

  auto writer = begin(store());
  writer->touch("token");
  auto seen = writer->get("token");
  ASSERT_TRUE(seen.ok());
  ASSERT_TRUE(seen->has_value());
  EXPECT_NE(**seen, "0");
  ASSERT_TRUE(writer->commit().ok());
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
  EXPECT_EQ(read(store(), "token"), **seen);

  std::vector<std::thread> threads;
  std::atomic<int> committed{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 10; ++j) {
        Status s = kv::run(store(), [&](kv::Transaction& txn) -> Status {
          const std::string key = "own/" + std::to_string(i) + "/" + std::to_string(j);
          KVQ_ASSIGN_OR_RETURN(auto v, txn.get(key));
          if (v) return Internal(key + " exists before its commit");
          txn.set(key, "x");
          txn.touch("token");
          return Status::OK();
        });
        if (s.ok()) ++committed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(committed.load(), 80);
  auto own = begin(store())->get_range("own/", "own0");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->size(), 80u);
  EXPECT_NE(read(store(), "token"), **seen);
}

TEST_P(KvConformance, WatchMissesNoChangeBetweenTheReadAndItsCreation) {
  put(store(), "w", "0");
  auto reader = begin(store());
  ASSERT_EQ(*reader->get("w"), "0");
  put(store(), "w", "1");  // after the reader's read version, before its watch
  auto watch = reader->watch("w");
  ASSERT_TRUE(watch.ok());
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
}

TEST_P(KvConformance, WatchOnAnAbsentKeyFiresWhenItIsCreated) {
  auto reader = begin(store());
  auto watch = reader->watch("later");
  ASSERT_TRUE(watch.ok());
  put(store(), "unrelated", "x");
  EXPECT_EQ(watch->wait_until(kv::Clock::now() + 30ms).code(), Code::kDeadlineExceeded);
  put(store(), "later", "x");
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
}

TEST_P(KvConformance, WatchIgnoresAWriteOfTheSameValue) {
  put(store(), "w", "same");
  auto reader = begin(store());
  auto watch = reader->watch("w");
  ASSERT_TRUE(watch.ok());
  put(store(), "w", "same");
  EXPECT_EQ(watch->wait_until(kv::Clock::now() + 50ms).code(), Code::kDeadlineExceeded);
  put(store(), "w", "different");
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
}

TEST_P(KvConformance, CancelledWatchReportsCancelledToItsCallback) {
  auto reader = begin(store());
  auto watch = reader->watch("w");
  ASSERT_TRUE(watch.ok());
  std::atomic<int> calls{0};
  Code seen = Code::kOk;
  watch->on_ready([&](const Status& s) {
    seen = s.code();
    ++calls;
  });
  watch->cancel();
  put(store(), "w", "x");
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(seen, Code::kCancelled);
}

TEST_P(KvConformance, WatchCallbackRunsOnceWhenTheKeyChanges) {
  auto reader = begin(store());
  auto watch = reader->watch("w");
  ASSERT_TRUE(watch.ok());
  std::atomic<int> calls{0};
  watch->on_ready([&](const Status& s) {
    EXPECT_TRUE(s.ok());
    ++calls;
  });
  put(store(), "w", "1");
  put(store(), "w", "2");
  ASSERT_TRUE(watch->wait_until(kv::Clock::now() + 5s).ok());
  EXPECT_EQ(calls.load(), 1);
}

TEST_P(KvConformance, CommittedDataSurvivesReopening) {
  put(store(), "durable", "yes");
  reopen();
  EXPECT_EQ(read(store(), "durable"), "yes");
}

TEST_P(KvConformance, RetryLoopGivesUpAtItsDeadline) {
  int attempts = 0;
  const auto start = kv::Clock::now();
  Status s = kv::run(
      store(),
      [&](kv::Transaction&) {
        ++attempts;
        return Aborted("always conflicts");
      },
      kv::RetryOptions{.timeout = 200ms});
  const auto elapsed = kv::Clock::now() - start;
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.to_string();
  EXPECT_GT(attempts, 1);
  EXPECT_LE(elapsed, 200ms + 150ms) << "must not sleep past its deadline";
}

TEST_P(KvConformance, RetryLoopStopsAtItsAttemptLimit) {
  const auto before = kv::retry_counts();
  int attempts = 0;
  Status s = kv::run(
      store(),
      [&](kv::Transaction&) {
        ++attempts;
        return Unavailable("down");
      },
      kv::RetryOptions{.max_attempts = 3});
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(attempts, 3);
  EXPECT_GE(kv::retry_counts().unavailable, before.unavailable + 3)
      << "retries are counted for metrics";
}

TEST_P(KvConformance, RetryLoopDoesNotRetryOtherErrorsNorCommitThem) {
  int attempts = 0;
  Status s = kv::run(store(), [&](kv::Transaction& txn) {
    ++attempts;
    txn.set("never", "written");
    return InvalidArgument("bad input");
  });
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(read(store(), "never"), std::nullopt);
}

TEST_P(KvConformance, RunOnAnOpenTransactionJoinsTheCallersCommit) {
  auto txn = begin(store());
  ASSERT_TRUE(kv::run(*txn, [](kv::Transaction& t) {
                t.set("joined", "1");
                return Status::OK();
              }).ok());
  EXPECT_EQ(read(store(), "joined"), std::nullopt)
      << "nothing is committed until the caller commits";
  ASSERT_TRUE(txn->commit().ok());
  EXPECT_EQ(read(store(), "joined"), "1");
}

// ---- commit_async and run_async ------------------------------------------------------------

TEST_P(KvConformance, CommitAsyncOfAWriteDeliversOkOnceAndTheWriteIsVisible) {
  std::shared_ptr<kv::Transaction> txn = begin(store());
  const uint64_t read_version = *txn->read_version();
  txn->set("a", "1");
  auto delivered = std::make_shared<Delivered<Status>>();
  txn->commit_async([txn, delivered](Status s) { delivered->add(std::move(s)); });
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  EXPECT_TRUE(delivered->values()[0].ok()) << delivered->values()[0].to_string();
  EXPECT_GT(txn->committed_version(), read_version);
  EXPECT_EQ(read(store(), "a"), "1");
  auto later = begin(store());
  EXPECT_GE(*later->read_version(), txn->committed_version());
  EXPECT_EQ(delivered->size(), 1u) << "done was called more than once";
}

TEST_P(KvConformance, CommitAsyncOfAConflictingTransactionIsAbortedAndWritesNothing) {
  put(store(), "k", "0");
  std::shared_ptr<kv::Transaction> t1 = begin(store());
  ASSERT_EQ(*t1->get("k"), "0");
  put(store(), "k", "1");
  t1->set("other", "x");
  Status s = commit_async_and_wait(t1);
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  EXPECT_EQ(read(store(), "other"), std::nullopt) << "a failed commit must change nothing";
  EXPECT_EQ(read(store(), "k"), "1");
}

TEST_P(KvConformance, CommitAsyncOfAReadOnlyTransactionSucceedsAtItsReadVersion) {
  put(store(), "k", "0");
  std::shared_ptr<kv::Transaction> t1 = begin(store());
  ASSERT_EQ(*t1->get("k"), "0");
  const uint64_t read_version = *t1->read_version();
  put(store(), "k", "1");
  Status s = commit_async_and_wait(t1);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(t1->committed_version(), read_version);
}

TEST_P(KvConformance, CommitAsyncOfAnOversizedValueFailsAndChangesNothing) {
  std::shared_ptr<kv::Transaction> txn = begin(store());
  txn->set("fine", "1");
  txn->set("big", std::string(kv::kMaxValueSize + 1, 'v'));
  EXPECT_EQ(commit_async_and_wait(txn).code(), Code::kInvalidArgument);
  EXPECT_EQ(read(store(), "fine"), std::nullopt);
}

TEST_P(KvConformance, ConcurrentIncrementsThroughRunAsyncAllCount) {
  put(store(), "n", "0");
  constexpr int kThreads = 4, kEach = 25;
  auto delivered = std::make_shared<Delivered<Status>>();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        // `fn` holds the store: its retries may outlive a wait that gives up.
        kv::run_async(
            store(), [keep = store_ptr()](kv::Transaction& txn) { return increment(txn); },
            [delivered](Status s) { delivered->add(std::move(s)); }, kv::replayable({}));
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(delivered->wait_for(kThreads * kEach, 120s))
      << delivered->size() << " of " << kThreads * kEach << " run_async calls finished";
  for (const Status& s : delivered->values()) EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(read(store(), "n"), std::to_string(kThreads * kEach));
  EXPECT_EQ(delivered->size(), size_t{kThreads * kEach}) << "a done was called more than once";
}

TEST_P(KvConformance, RunAsyncRetriesAConflictAndDeliversTheCommittedAttemptsValue) {
  put(store(), "n", "0");
  auto attempts = std::make_shared<std::atomic<int>>(0);
  auto delivered = std::make_shared<Delivered<Result<int>>>();
  kv::run_async(
      store(),
      [keep = store_ptr(), attempts](kv::Transaction& txn) -> Result<int> {
        KVQ_ASSIGN_OR_RETURN(auto n, txn.get("n"));
        // A commit between this first attempt's read and its commit: the attempt must abort.
        if (attempts->fetch_add(1) == 0) put(*keep, "n", "100");
        const int next = std::stoi(n.value_or("0")) + 1;
        txn.set("n", std::to_string(next));
        return next;
      },
      [delivered](Result<int> r) { delivered->add(std::move(r)); }, kv::replayable({}));
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  const Result<int> outcome = delivered->values()[0];
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(*outcome, 101) << "done got a value from an attempt that did not commit";
  EXPECT_EQ(attempts->load(), 2);
  EXPECT_EQ(read(store(), "n"), "101");
  EXPECT_EQ(delivered->size(), 1u);
}

TEST_P(KvConformance, RunAsyncDeliversTheValueOfAResultFn) {
  put(store(), "k", "v");
  auto delivered = std::make_shared<Delivered<Result<std::optional<std::string>>>>();
  kv::run_async(
      store(), [](kv::Transaction& txn) { return txn.get("k"); },
      [delivered](Result<std::optional<std::string>> r) { delivered->add(std::move(r)); },
      kv::replayable({}));
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  const auto outcome = delivered->values()[0];
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(*outcome, "v");
}

// A body whose reads each name the next key: on a store that replays bodies (etcd) each run
// fetches one more level, and all of them read at the first read's version. A commit made
// after that version, while the runs go on, must fail the attempt, and the retry see it.
TEST_P(KvConformance, RunAsyncOfABodyWhoseReadsFollowEachOtherReadsOneStateAndConflictsAfter) {
  put(store(), "a", "b");
  put(store(), "b", "c");
  put(store(), "c", "1");
  put(store(), "range/1", "x");
  auto changed = std::make_shared<std::atomic<bool>>(false);
  auto seen = std::make_shared<Delivered<std::string>>();  // by each run that read everything
  auto delivered = std::make_shared<Delivered<Result<std::string>>>();
  kv::run_async(
      store(),
      [keep = store_ptr(), changed, seen](kv::Transaction& txn) -> Result<std::string> {
        KVQ_ASSIGN_OR_RETURN(auto second, txn.get("a"));
        // The read version is fixed now; this commit comes after it.
        if (!changed->exchange(true)) put(*keep, "c", "2");
        KVQ_ASSIGN_OR_RETURN(auto third, txn.get(second.value_or("?")));
        KVQ_ASSIGN_OR_RETURN(auto value, txn.get(third.value_or("?")));
        KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range("range/", "range0"));
        const std::string out = value.value_or("?") + "/" + std::to_string(rows.size());
        seen->add(out);
        txn.set("out", out);
        return out;
      },
      [delivered](Result<std::string> r) { delivered->add(std::move(r)); }, kv::replayable({}));
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  const auto outcome = delivered->values()[0];
  ASSERT_TRUE(outcome.ok()) << outcome.status().to_string();
  EXPECT_EQ(*outcome, "2/1") << "the attempt that read c before the change committed";
  EXPECT_EQ(read(store(), "out"), "2/1");
  // The first attempt read c at its read version, from before the change: reads that moved on
  // to a later version would have seen the change at once, and committed it without a retry.
  ASSERT_GE(seen->size(), 2u);
  EXPECT_EQ(seen->values().front(), "1/1");
  EXPECT_EQ(delivered->size(), 1u);
}

// On a store that replays bodies, run_async returns before the store has answered anything,
// and no run of the body that read something runs on the caller's thread.
TEST_P(KvConformance, RunAsyncOnAStoreThatReplaysBodiesReadsOnlyOffTheCallersThread) {
  if (!store().replays_bodies())
    GTEST_SKIP() << "this store runs bodies on the caller's thread: its reads never wait";
  put(store(), "k", "v");
  const auto caller = std::this_thread::get_id();
  auto on_caller = std::make_shared<std::atomic<int>>(0);
  auto delivered = std::make_shared<Delivered<std::thread::id>>();
  kv::run_async(
      store(),
      [caller, on_caller](kv::Transaction& txn) -> Status {
        KVQ_ASSIGN_OR_RETURN(auto v, txn.get("k"));
        if (std::this_thread::get_id() == caller) ++*on_caller;
        txn.set("seen", v.value_or(""));
        return Status::OK();
      },
      [delivered](Status s) {
        EXPECT_TRUE(s.ok()) << s.to_string();
        delivered->add(std::this_thread::get_id());
      },
      kv::replayable({}));
  EXPECT_EQ(delivered->size(), 0u) << "run_async waited for the store on the caller's thread";
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  EXPECT_NE(delivered->values()[0], caller);
  EXPECT_EQ(on_caller->load(), 0) << "a read was answered on the caller's thread";
  EXPECT_EQ(read(store(), "seen"), "v");
}

TEST_P(KvConformance, RunAsyncDoesNotRetryOtherErrorsFromFnNorCommitThem) {
  auto attempts = std::make_shared<std::atomic<int>>(0);
  auto delivered = std::make_shared<Delivered<Result<int>>>();
  kv::run_async(
      store(),
      [attempts](kv::Transaction& txn) -> Result<int> {
        ++*attempts;
        txn.set("never", "written");
        return InvalidArgument("bad input");
      },
      [delivered](Result<int> r) { delivered->add(std::move(r)); }, kv::replayable({}));
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  EXPECT_EQ(delivered->values()[0].status().code(), Code::kInvalidArgument);
  EXPECT_EQ(attempts->load(), 1);
  EXPECT_EQ(read(store(), "never"), std::nullopt);
}

TEST_P(KvConformance, RunAsyncDoesNotRetryACommitThatFailsOtherwise) {
  auto attempts = std::make_shared<std::atomic<int>>(0);
  auto delivered = std::make_shared<Delivered<Status>>();
  kv::run_async(
      store(),
      [attempts](kv::Transaction& txn) {
        ++*attempts;
        txn.set("fine", "1");
        txn.set("big", std::string(kv::kMaxValueSize + 1, 'v'));
        return Status::OK();
      },
      [delivered](Status s) { delivered->add(std::move(s)); }, kv::replayable({}));
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  EXPECT_EQ(delivered->values()[0].code(), Code::kInvalidArgument)
      << delivered->values()[0].to_string();
  EXPECT_EQ(attempts->load(), 1);
  EXPECT_EQ(read(store(), "fine"), std::nullopt);
}

TEST_P(KvConformance, RunAsyncStopsAtItsAttemptLimitLikeRun) {
  const auto before = kv::retry_counts();
  auto attempts = std::make_shared<std::atomic<int>>(0);
  auto delivered = std::make_shared<Delivered<Status>>();
  kv::run_async(
      store(),
      [keep = store_ptr(), attempts](kv::Transaction&) {
        ++*attempts;
        return Unavailable("down");
      },
      [delivered](Status s) { delivered->add(std::move(s)); },
      kv::replayable(kv::RetryOptions{.max_attempts = 3}));
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  const Status async_outcome = delivered->values()[0];
  EXPECT_EQ(async_outcome.code(), Code::kUnavailable) << async_outcome.to_string();
  EXPECT_EQ(attempts->load(), 3);
  EXPECT_GE(kv::retry_counts().unavailable, before.unavailable + 3)
      << "retries are counted for metrics";
  const Status run_outcome = kv::run(
      store(), [](kv::Transaction&) { return Unavailable("down"); },
      kv::RetryOptions{.max_attempts = 3});
  EXPECT_EQ(async_outcome, run_outcome) << "run_async and run gave up differently";
}

TEST_P(KvConformance, RunAsyncGivesUpAtItsDeadlineLikeRun) {
  auto attempts = std::make_shared<std::atomic<int>>(0);
  auto delivered = std::make_shared<Delivered<Status>>();
  const auto start = kv::Clock::now();
  kv::run_async(
      store(),
      [keep = store_ptr(), attempts](kv::Transaction&) {
        ++*attempts;
        return Aborted("always conflicts");
      },
      [delivered](Status s) { delivered->add(std::move(s)); },
      kv::replayable(kv::RetryOptions{.timeout = 200ms}));
  ASSERT_TRUE(delivered->wait_for(1)) << "done was never called";
  const auto elapsed = kv::Clock::now() - start;
  const Status async_outcome = delivered->values()[0];
  EXPECT_EQ(async_outcome.code(), Code::kDeadlineExceeded) << async_outcome.to_string();
  EXPECT_GT(attempts->load(), 1);
  EXPECT_LE(elapsed, 200ms + 150ms) << "must not wait past its deadline";
  const Status run_outcome = kv::run(
      store(), [](kv::Transaction&) { return Aborted("always conflicts"); },
      kv::RetryOptions{.timeout = 200ms});
  EXPECT_EQ(async_outcome, run_outcome) << "run_async and run gave up differently";
}

// A wrapper whose transactions keep the default commit_async (commit(), then done): run_async
// must retry its injected conflicts, unavailability (also at begin) and unknown results.
TEST_P(KvConformance, RunAsyncAppliesEachIdempotentIncrementOnceDespiteInjectedFaults) {
  auto faulty = std::make_shared<kv::FaultInjectingStore>(
      store_ptr(),
      kv::FaultOptions{
          .conflict_rate = 0.2, .unavailable_rate = 0.1, .unknown_result_rate = 0.3, .seed = 42});
  constexpr int kOps = 60;
  auto delivered = std::make_shared<Delivered<Status>>();
  for (int i = 0; i < kOps; ++i) {
    kv::run_async(
        *faulty,
        [faulty, op = "ops/" + std::to_string(i)](kv::Transaction& txn) -> Status {
          KVQ_ASSIGN_OR_RETURN(auto done, txn.get(op));
          if (done) return Status::OK();
          KVQ_RETURN_IF_ERROR(increment(txn));
          txn.set(op, "");
          return Status::OK();
        },
        [delivered](Status s) { delivered->add(std::move(s)); },
        // Short backoffs: with these rates some operation always needs many attempts.
        kv::replayable(kv::RetryOptions{.initial_backoff = 100us, .max_backoff = 2ms}));
  }
  ASSERT_TRUE(delivered->wait_for(kOps, 120s))
      << delivered->size() << " of " << kOps << " run_async calls finished";
  for (const Status& s : delivered->values()) EXPECT_TRUE(s.ok()) << s.to_string();
  const auto counts = faulty->counts();
  EXPECT_GT(counts.unknown_applied, 0u) << "the test must exercise commits that applied";
  EXPECT_GT(counts.conflicts + counts.unavailable, 0u);
  EXPECT_EQ(read(store(), "n"), std::to_string(kOps));
}

KVQ_INSTANTIATE_FOR_BACKENDS(KvConformance);

}  // namespace
}  // namespace kvq::testing
