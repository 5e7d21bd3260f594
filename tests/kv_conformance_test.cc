// The kv conformance suite: what every backend must honour (kvq/kv.h), run on each backend.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "support/backends.h"
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

TEST_P(KvConformance, SnapshotReadAddsNoConflict) {
  put(store(), "k", "0");
  auto t1 = begin(store());
  ASSERT_EQ(*t1->get("k", {.snapshot = true}), "0");
  put(store(), "k", "1");
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
  EXPECT_EQ(keys_of(*txn->get_range("r/", "r0", {.limit = 2})), (std::vector<std::string>{"r/a", "r/b"}));
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
  EXPECT_EQ(keys_of(*txn->get_range("m/", "m0", {.limit = 2})), (std::vector<std::string>{"m/c", "m/d"}));
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
  EXPECT_GE(kv::retry_counts().unavailable, before.unavailable + 3) << "retries are counted for metrics";
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
  EXPECT_EQ(read(store(), "joined"), std::nullopt) << "nothing is committed until the caller commits";
  ASSERT_TRUE(txn->commit().ok());
  EXPECT_EQ(read(store(), "joined"), "1");
}

KVQ_INSTANTIATE_FOR_BACKENDS(KvConformance);

}  // namespace
}  // namespace kvq::testing
