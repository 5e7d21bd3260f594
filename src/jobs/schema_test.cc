#include "jobs/schema.h"

#include <gtest/gtest.h>

#include <limits>

namespace kvq::jobs {
namespace {

TEST(SchemaTest, JobRowRoundTripsThroughItsEncoding) {
  JobRow row;
  row.seq = 42;
  row.lock = "abc";
  row.worker = "w1";
  row.resubmit = true;
  row.scheduled = -5;
  row.priority = 3;
  row.next_scheduled = 99;
  row.next_priority = -1;
  row.finished_lock = "old";
  row.attempts = 7;
  row.created = 1;
  row.updated = 2;
  row.data = R"({"a":1})";
  auto decoded = decode_row(encode_row(row));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(encode_row(*decoded), encode_row(row));
  EXPECT_EQ(decoded->lock, "abc");
  EXPECT_EQ(decoded->data, row.data);
}

TEST(SchemaTest, CorruptRowsAreErrorsNotCrashes) {
  EXPECT_FALSE(decode_row("").ok());
  EXPECT_FALSE(decode_row("\x15\x02").ok());
  EXPECT_FALSE(decode_row(Tuple{int64_t{2}}.pack()).ok());
}

TEST(SchemaTest, StateIsDerivedFromLockAndFinished) {
  JobRow row;
  EXPECT_EQ(state_of(row), State::kPending);
  row.finished = true;
  EXPECT_EQ(state_of(row), State::kFinished);
  row.lock = "x";
  EXPECT_EQ(state_of(row), State::kRunning);
}

TEST(SchemaTest, PendingKeysSortByPriorityThenScheduledTime) {
  Keys keys("p");
  EXPECT_LT(keys.pending("t", 0, 500, "z"), keys.pending("t", 1, 100, "a"));
  EXPECT_LT(keys.pending("t", -3, 500, "z"), keys.pending("t", 0, 100, "a"));
  EXPECT_LT(keys.pending("t", 0, 100, "z"), keys.pending("t", 0, 101, "a"));
  auto [lo, hi] = keys.pending_due("t", 0, 100);
  EXPECT_LE(lo, keys.pending("t", 0, 100, "zzz"));
  EXPECT_LT(keys.pending("t", 0, 100, "zzz"), hi);
  EXPECT_GE(keys.pending("t", 0, 101, ""), hi);
}

TEST(SchemaTest, IndexKeysParseBack) {
  Keys keys("p");
  auto p = keys.parse_pending(keys.pending("t", 2, 9, "id"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->priority, 2);
  EXPECT_EQ(p->scheduled, 9);
  EXPECT_EQ(p->id, "id");
  auto a = keys.parse_activity(keys.activity("t", 77, "id"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->seq, 77u);
  EXPECT_FALSE(keys.parse_activity(keys.pending("t", 2, 9, "id")).ok());
}

TEST(SchemaTest, TypeSettingsWithoutRetentionEncodeAsBeforeRetentionExisted) {
  EXPECT_EQ(encode_type({.timeout = Millis(1500)}), Tuple{int64_t{1500}}.pack());
  auto old = decode_type(Tuple{int64_t{1500}}.pack());
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->timeout, Millis(1500));
  EXPECT_EQ(old->finished_retention, std::nullopt);
  auto both = decode_type(encode_type({.timeout = Millis(30'000), .finished_retention = Millis(86'400'000)}));
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->timeout, Millis(30'000));
  EXPECT_EQ(both->finished_retention, Millis(86'400'000));
  EXPECT_FALSE(decode_type("").ok());
  EXPECT_FALSE(decode_type(Tuple{}.pack()).ok());
  EXPECT_FALSE(decode_type(Tuple{int64_t{1}, int64_t{2}, int64_t{3}}.pack()).ok());
  EXPECT_FALSE(decode_type(Tuple{"1500"}.pack()).ok());
}

TEST(SchemaTest, FinishedKeysSortByFinishTimeAndTheExpiredArePrefix) {
  Keys keys("p");
  EXPECT_LT(keys.finished("t", 100, "z"), keys.finished("t", 101, "a"));
  auto [lo, hi] = keys.finished_before("t", 101);
  EXPECT_LE(lo, keys.finished("t", -5, "a"));
  EXPECT_LT(keys.finished("t", 100, "zzz"), hi);
  EXPECT_GE(keys.finished("t", 101, ""), hi);
  auto [all_lo, all_hi] = keys.finished_before("t", std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(keys.finished("ta", 0, "x") >= all_lo && keys.finished("ta", 0, "x") < all_hi);
  auto parsed = keys.parse_finished(keys.finished("t", 100, "id"));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->finished_ms, 100);
  EXPECT_EQ(parsed->id, "id");
  EXPECT_FALSE(keys.parse_finished(keys.pending("t", 2, 9, "id")).ok());
}

TEST(SchemaTest, TypesDoNotShareIndexRanges) {
  Keys keys("p");
  auto [lo, hi] = keys.pending_of("a");
  const auto other = keys.pending("ab", 0, 0, "x");
  EXPECT_FALSE(other >= lo && other < hi);
}

}  // namespace
}  // namespace kvq::jobs
