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
  row.lost_runs = 2;
  row.gave_up = true;
  auto decoded = decode_row(encode_row(row));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(encode_row(*decoded), encode_row(row));
  EXPECT_EQ(decoded->lock, "abc");
  EXPECT_EQ(decoded->data, row.data);
  EXPECT_EQ(decoded->lost_runs, 2u);
  EXPECT_TRUE(decoded->gave_up);
}

TEST(SchemaTest, ARowWrittenBeforeLostRunsDecodesWithNone) {
  // The 16 fields rows had before lost_runs and gave_up were added.
  const Tuple before{int64_t{1}, int64_t{42}, "",           "",         true, false,
                     int64_t{5}, int64_t{0},  int64_t{0},   int64_t{0}, "lk", int64_t{3},
                     int64_t{1}, int64_t{2},  R"({"a":1})", int64_t{40}};
  auto decoded = decode_row(before.pack());
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_TRUE(decoded->finished);
  EXPECT_EQ(decoded->attempts, 3u);
  EXPECT_EQ(decoded->data, R"({"a":1})");
  EXPECT_EQ(decoded->lost_runs, 0u);
  EXPECT_FALSE(decoded->gave_up);
  Tuple seventeen = before;
  seventeen.append(int64_t{1});
  EXPECT_FALSE(decode_row(seventeen.pack()).ok());
  // A job that never lost a run encodes exactly as before the fields existed.
  EXPECT_EQ(encode_row(*decoded), before.pack());
}

TEST(SchemaTest, AWorkerTypeRoundTripsAndARowWithoutOneEncodesAsBefore) {
  JobRow row;
  row.lock = "l";
  row.worker = "shared-id";
  row.worker_type = "wtB";
  auto decoded = decode_row(encode_row(row));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->worker_type, "wtB");
  EXPECT_EQ(decoded->lost_runs, 0u);
  EXPECT_EQ(Tuple::unpack(encode_row(row))->size(), 19u);
  row.worker_type.clear();
  EXPECT_EQ(Tuple::unpack(encode_row(row))->size(), 16u) << "as rows were before worker types";
  row.lost_runs = 1;
  auto eighteen = decode_row(encode_row(row));
  ASSERT_TRUE(eighteen.ok());
  EXPECT_EQ(eighteen->worker_type, "");
  EXPECT_EQ(Tuple::unpack(encode_row(row))->size(), 18u);
}

TEST(SchemaTest, WorkerIndexKeysOfBareAndTypedWorkersParseAndNeverMeet) {
  Keys keys("p");
  const auto bare = keys.held_by("", "shared-id", "work", "j1");
  const auto typed = keys.held_by("wtA", "shared-id", "work", "j2");
  EXPECT_EQ(keys.parse_held(bare)->second, "j1");
  EXPECT_EQ(keys.parse_held(typed)->second, "j2");
  EXPECT_EQ(keys.parse_held(typed)->first, "work");
  auto [a_begin, a_end] = keys.held_by("wtA", "shared-id");
  EXPECT_TRUE(typed >= a_begin && typed < a_end);
  EXPECT_FALSE(bare >= a_begin && bare < a_end);
  EXPECT_FALSE(keys.held_by("wtB", "shared-id", "work", "j2") >= a_begin &&
               keys.held_by("wtB", "shared-id", "work", "j2") < a_end);
}

TEST(SchemaTest, CorruptRowsAreErrorsNotCrashes) {
  EXPECT_FALSE(decode_row("").ok());
  EXPECT_FALSE(decode_row("\x15\x02").ok());
  EXPECT_FALSE(decode_row(Tuple{int64_t{2}}.pack()).ok());
}

TEST(SchemaTest, TheFieldsOfDependenciesRoundTripAs35FieldsOnlyWhenSet) {
  JobRow row;
  row.scheduled = 5;
  row.data = "{}";
  row.waiting_on = 2;
  row.dependencies = 3;
  row.on_dependency_failure = OnDependencyFailure::kRun;
  const std::string bytes = encode_row(row);
  auto t = Tuple::unpack(bytes);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 35u);
  EXPECT_EQ((*t)[30].as_string(), "") << "no traceparent: \"\" written before them";
  auto decoded = decode_row(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->waiting_on, 2u);
  EXPECT_EQ(decoded->dependencies, 3u);
  EXPECT_FALSE(decoded->has_dependents);
  EXPECT_EQ(decoded->on_dependency_failure, OnDependencyFailure::kRun);
  EXPECT_EQ(state_of(*decoded), State::kWaiting);
  EXPECT_EQ(encode_row(*decoded), bytes);
  // A row with only has_dependents carries them too; one with none encodes as before them.
  JobRow flagged;
  flagged.has_dependents = true;
  auto f = decode_row(encode_row(flagged));
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->has_dependents);
  EXPECT_EQ(state_of(*f), State::kPending);
  f->has_dependents = false;
  EXPECT_EQ(Tuple::unpack(encode_row(*f))->size(), 16u) << "as before dependencies";
  Tuple wrong;
  for (size_t i = 0; i < t->size(); ++i) wrong.append(i == 34 ? Element(int64_t{7}) : (*t)[i]);
  EXPECT_FALSE(decode_row(wrong.pack()).ok()) << "an unknown on_dependency_failure";
}

TEST(SchemaTest, TheFieldsOfAddWindowsRoundTripAs38FieldsOnlyWhenSet) {
  JobRow row;
  row.scheduled = 5;
  row.data = "{}";
  row.debounce_since = 1'700'000'000'000;
  const std::string bytes = encode_row(row);
  auto t = Tuple::unpack(bytes);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 38u);
  EXPECT_EQ((*t)[31].as_int(), 0) << "the dependency fields at their defaults before them";
  EXPECT_EQ((*t)[35].as_string(), "") << "and no batch";
  auto decoded = decode_row(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->debounce_since, 1'700'000'000'000);
  EXPECT_EQ(decoded->unique_until, 0);
  EXPECT_EQ(decoded->on_dependency_failure, OnDependencyFailure::kCancel);
  EXPECT_EQ(state_of(*decoded), State::kPending);
  EXPECT_EQ(encode_row(*decoded), bytes);
  JobRow unique;
  unique.unique_until = 9;
  unique.waiting_on = 1;
  unique.batch = "b";
  auto u = decode_row(encode_row(unique));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->unique_until, 9);
  EXPECT_EQ(u->waiting_on, 1u);
  EXPECT_EQ(u->batch, "b");
  u->batch.clear();
  // Without windows a row encodes as before them: 35 fields with dependencies, 16 without.
  u->unique_until = 0;
  EXPECT_EQ(Tuple::unpack(encode_row(*u))->size(), 35u);
  decoded->debounce_since = 0;
  EXPECT_EQ(Tuple::unpack(encode_row(*decoded))->size(), 16u);
  Tuple wrong;
  for (size_t i = 0; i < t->size(); ++i) wrong.append(i == 37 ? Element(int64_t{-1}) : (*t)[i]);
  EXPECT_FALSE(decode_row(wrong.pack()).ok()) << "a negative unique_until";
  Tuple text;
  for (size_t i = 0; i < t->size(); ++i) text.append(i == 36 ? Element("x") : (*t)[i]);
  EXPECT_FALSE(decode_row(text.pack()).ok()) << "a debounce_since that is not an integer";
}

TEST(SchemaTest, DependencyKeysParseBackAndDoNotShareRanges) {
  Keys keys("p");
  auto edge = keys.parse_edge_end(keys.dependency("t", "a", "u", "b"));
  ASSERT_TRUE(edge.ok());
  EXPECT_EQ(*edge, (std::pair<std::string, std::string>{"u", "b"}));
  auto back = keys.parse_edge_end(keys.dependent("u", "b", "t", "a"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, (std::pair<std::string, std::string>{"t", "a"}));
  auto [begin, end] = keys.dependencies_of("t", "a");
  const std::string other = keys.dependency("t", "ab", "u", "b");
  EXPECT_FALSE(other >= begin && other < end) << "job a's edges hold none of job ab's";
  const std::string waiting = keys.waiting("t", "a");
  auto [wb, we] = keys.waiting_of("t");
  EXPECT_TRUE(waiting >= wb && waiting < we);
  EXPECT_FALSE(keys.parse_edge_end(waiting).ok());
}

TEST(SchemaTest, ABatchRoundTripsAs36FieldsOnlyWhenSet) {
  JobRow row;
  row.scheduled = 5;
  row.data = "{}";
  row.batch = "nightly";
  const std::string bytes = encode_row(row);
  auto t = Tuple::unpack(bytes);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 36u);
  EXPECT_EQ((*t)[35].as_string(), "nightly");
  auto decoded = decode_row(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->batch, "nightly");
  EXPECT_EQ(decoded->dependencies, 0u);
  EXPECT_EQ(encode_row(*decoded), bytes);
  decoded->batch.clear();
  EXPECT_EQ(Tuple::unpack(encode_row(*decoded))->size(), 16u) << "as before batches";
  Tuple empty;
  for (size_t i = 0; i < t->size(); ++i) empty.append(i == 35 ? Element(std::string()) : (*t)[i]);
  EXPECT_FALSE(decode_row(empty.pack()).ok()) << "a 36th field names a batch";
}

TEST(SchemaTest, BatchKeysParseBackAndDoNotShareRanges) {
  Keys keys("p");
  auto dead = keys.parse_batch_dead(keys.batch_dead("b", "t", "x"));
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(*dead, (std::pair<std::string, std::string>{"t", "x"}));
  auto [begin, end] = keys.batch_dead_of("b");
  const std::string other = keys.batch_dead("bb", "t", "x");
  EXPECT_FALSE(other >= begin && other < end) << "batch b's dead hold none of batch bb's";
  EXPECT_FALSE(keys.parse_batch_dead(keys.batch("b")).ok());
  EXPECT_NE(keys.batch_totals(), keys.batch(""));
}

TEST(SchemaTest, StateIsDerivedFromLockAndFinished) {
  JobRow row;
  EXPECT_EQ(state_of(row), State::kPending);
  row.finished = true;
  EXPECT_EQ(state_of(row), State::kFinished);
  row.lock = "x";
  EXPECT_EQ(state_of(row), State::kRunning);
  JobRow waiting;
  waiting.waiting_on = 1;
  EXPECT_EQ(state_of(waiting), State::kWaiting);
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
  auto both = decode_type(
      encode_type({.timeout = Millis(30'000), .finished_retention = Millis(86'400'000)}));
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->timeout, Millis(30'000));
  EXPECT_EQ(both->finished_retention, Millis(86'400'000));
  EXPECT_FALSE(decode_type("").ok());
  EXPECT_FALSE(decode_type(Tuple{}.pack()).ok());
  EXPECT_FALSE(decode_type(Tuple{int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}}.pack()).ok());
  EXPECT_FALSE(decode_type(Tuple{int64_t{1}, int64_t{2}, int64_t{0}}.pack()).ok());
  EXPECT_FALSE(decode_type(Tuple{int64_t{1}, "2"}.pack()).ok());
  EXPECT_FALSE(decode_type(Tuple{"1500"}.pack()).ok());
}

TEST(SchemaTest, TypeSettingsWithMaxLostRunsRoundTripWithOrWithoutRetention) {
  const TypeSettings alone{.timeout = Millis(1500), .max_lost_runs = 3};
  EXPECT_EQ(encode_type(alone), (Tuple{int64_t{1500}, nullptr, int64_t{3}}.pack()));
  auto decoded = decode_type(encode_type(alone));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->timeout, Millis(1500));
  EXPECT_EQ(decoded->finished_retention, std::nullopt);
  EXPECT_EQ(decoded->max_lost_runs, 3u);
  auto all = decode_type(
      encode_type({.timeout = Millis(1), .finished_retention = Millis(2), .max_lost_runs = 5}));
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->finished_retention, Millis(2));
  EXPECT_EQ(all->max_lost_runs, 5u);
  // Clearing max_lost_runs gives back the shorter encoding.
  EXPECT_EQ(encode_type({.timeout = Millis(1), .finished_retention = Millis(2)}),
            (Tuple{int64_t{1}, int64_t{2}}.pack()));
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

TEST(SchemaTest, OldRowsDecodeWithTheOutcomeTheyImply) {
  JobRow pending;
  EXPECT_EQ(decode_row(encode_row(pending))->outcome, Outcome::kNone);
  JobRow finished;
  finished.finished = true;
  finished.outcome = Outcome::kSucceeded;
  EXPECT_EQ(Tuple::unpack(encode_row(finished))->size(), 16u) << "as rows were before outcomes";
  EXPECT_EQ(decode_row(encode_row(finished))->outcome, Outcome::kSucceeded);
  JobRow gave_up = finished;
  gave_up.outcome = Outcome::kDead;
  gave_up.gave_up = true;
  gave_up.lost_runs = 3;
  EXPECT_EQ(Tuple::unpack(encode_row(gave_up))->size(), 18u);
  EXPECT_EQ(decode_row(encode_row(gave_up))->outcome, Outcome::kDead);
  // A 19-field row (with a worker type) written before outcomes.
  JobRow typed;
  typed.lock = "l";
  typed.worker = "w";
  typed.worker_type = "pool";
  const std::string nineteen = encode_row(typed);
  EXPECT_EQ(Tuple::unpack(nineteen)->size(), 19u);
  auto decoded = decode_row(nineteen);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->outcome, Outcome::kNone);
  EXPECT_TRUE(decoded->errors.empty());
  EXPECT_FALSE(decoded->result);
  EXPECT_EQ(decoded->started, 0);
}

TEST(SchemaTest, TheFieldsOfOutcomesRoundTrip) {
  JobRow row;
  row.finished = true;
  row.outcome = Outcome::kCancelled;
  row.result.emplace(R"({"r":1})");
  row.progress = "[1]";
  row.started = 77;
  row.attempts = 2;
  row.errors.push_back(JobError{1, 10, "w1", "io", "boom", R"({"d":true})"});
  row.errors.push_back(JobError{2, 20, "", "timeout", "no update", ""});
  const std::string bytes = encode_row(row);
  EXPECT_EQ(Tuple::unpack(bytes)->size(), 24u);
  auto decoded = decode_row(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->outcome, Outcome::kCancelled);
  EXPECT_EQ(decoded->result, row.result);
  EXPECT_EQ(decoded->progress, row.progress);
  EXPECT_EQ(decoded->started, 77);
  ASSERT_EQ(decoded->errors.size(), 2u);
  EXPECT_EQ(decoded->errors[0].attempt, 1u);
  EXPECT_EQ(decoded->errors[0].at_ms, 10);
  EXPECT_EQ(decoded->errors[0].worker, "w1");
  EXPECT_EQ(decoded->errors[0].kind, "io");
  EXPECT_EQ(decoded->errors[0].message, "boom");
  EXPECT_EQ(decoded->errors[0].details, R"({"d":true})");
  EXPECT_EQ(decoded->errors[1].details, "");
  EXPECT_EQ(encode_row(*decoded), bytes);
  // A finished row that is dead without having given up needs the fields too.
  JobRow failed;
  failed.finished = true;
  failed.outcome = Outcome::kDead;
  EXPECT_EQ(decode_row(encode_row(failed))->outcome, Outcome::kDead);
  // An outcome out of range is corrupt, not a crash.
  Tuple t = *Tuple::unpack(bytes);
  std::vector<Element> e = t.elements();
  e[19] = int64_t{9};
  EXPECT_FALSE(decode_row(Tuple(e).pack()).ok());
}

TEST(SchemaTest, ARetryPolicyIsStoredOnlyWhenNotTheDefault) {
  const TypeSettings plain{.timeout = Millis(1500)};
  EXPECT_EQ(encode_type(plain), Tuple{int64_t{1500}}.pack());
  TypeSettings custom{.timeout = Millis(1500)};
  custom.retry.max_attempts = 3;
  custom.retry.backoff_base = Millis(200);
  custom.retry.backoff_factor = 1.5;
  custom.retry.backoff_cap = Millis(60'000);
  custom.retry.jitter = 0.25;
  auto decoded = decode_type(encode_type(custom));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->timeout, Millis(1500));
  EXPECT_FALSE(decoded->finished_retention);
  EXPECT_FALSE(decoded->max_lost_runs);
  EXPECT_EQ(decoded->retry.max_attempts, 3u);
  EXPECT_EQ(decoded->retry.backoff_base, Millis(200));
  EXPECT_DOUBLE_EQ(decoded->retry.backoff_factor, 1.5);
  EXPECT_EQ(decoded->retry.backoff_cap, Millis(60'000));
  EXPECT_DOUBLE_EQ(decoded->retry.jitter, 0.25);
  custom.max_lost_runs = 4;
  custom.finished_retention = Millis(9);
  decoded = decode_type(encode_type(custom));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->max_lost_runs, 4u);
  EXPECT_EQ(decoded->finished_retention, Millis(9));
  EXPECT_EQ(decoded->retry.max_attempts, 3u);
  // A null max_lost_runs without a policy after it is corrupt.
  EXPECT_FALSE(decode_type(Tuple{int64_t{1}, nullptr, nullptr}.pack()).ok());
}

TEST(SchemaTest, FlowControlIsStoredOnlyWhenSetAndRoundTrips) {
  // Nothing set, or a pause lifted and limits cleared: the row encodes as before flow control.
  TypeSettings s{.timeout = Millis(1500), .max_lost_runs = 2};
  const std::string before = encode_type(s);
  EXPECT_EQ(before, (Tuple{int64_t{1500}, nullptr, int64_t{2}}.pack()));
  s.paused_until_ms = 99;  // without a pause it means nothing
  EXPECT_EQ(encode_type(s), before);

  s.paused = true;
  auto decoded = decode_type(encode_type(s));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_TRUE(decoded->paused);
  EXPECT_EQ(decoded->paused_until_ms, 99);
  EXPECT_FALSE(decoded->max_running);
  EXPECT_FALSE(decoded->rate);
  EXPECT_EQ(decoded->max_lost_runs, 2u);
  EXPECT_FALSE(decoded->finished_retention);
  EXPECT_EQ(decoded->retry.max_attempts, RetryPolicy{}.max_attempts);
  EXPECT_DOUBLE_EQ(decoded->retry.backoff_factor, RetryPolicy{}.backoff_factor);
  EXPECT_DOUBLE_EQ(decoded->retry.jitter, RetryPolicy{}.jitter);
  EXPECT_EQ(encode_type(*decoded), encode_type(s));

  s.paused = false;
  s.paused_until_ms.reset();
  s.max_running = 7;
  s.rate = RateLimit{20, Millis(500)};
  s.retry.max_attempts = 4;
  decoded = decode_type(encode_type(s));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_FALSE(decoded->paused);
  EXPECT_FALSE(decoded->paused_until_ms);
  EXPECT_EQ(decoded->max_running, 7u);
  EXPECT_EQ(decoded->rate, (RateLimit{20, Millis(500)}));
  EXPECT_EQ(decoded->retry.max_attempts, 4u);

  s.max_running.reset();
  s.rate.reset();
  s.retry = RetryPolicy{};
  EXPECT_EQ(encode_type(s), before);

  // Corrupt flow fields are errors, not crashes.
  auto with_flow = [](Element paused, Element until, Element max_running, Element limit,
                      Element period) {
    return Tuple{int64_t{1}, nullptr, nullptr, int64_t{3},  int64_t{4}, int64_t{5}, int64_t{6},
                 int64_t{7}, paused,  until,   max_running, limit,      period}
        .pack();
  };
  EXPECT_TRUE(decode_type(with_flow(true, nullptr, nullptr, nullptr, nullptr)).ok());
  EXPECT_FALSE(decode_type(with_flow(int64_t{1}, nullptr, nullptr, nullptr, nullptr)).ok());
  EXPECT_FALSE(decode_type(with_flow(false, "x", nullptr, nullptr, nullptr)).ok());
  EXPECT_FALSE(decode_type(with_flow(false, nullptr, int64_t{0}, nullptr, nullptr)).ok());
  EXPECT_FALSE(decode_type(with_flow(false, nullptr, "x", nullptr, nullptr)).ok());
  EXPECT_FALSE(decode_type(with_flow(false, nullptr, nullptr, int64_t{3}, nullptr)).ok());
  EXPECT_FALSE(decode_type(with_flow(false, nullptr, nullptr, "3", "4")).ok());
  EXPECT_FALSE(decode_type(Tuple{int64_t{1}, nullptr, nullptr, int64_t{3}, int64_t{4}, int64_t{5},
                                 int64_t{6}, int64_t{7}, false}
                               .pack())
                   .ok());
}

TEST(SchemaTest, TheProtocolsFieldsRoundTripAndOlderRowsStillDecode) {
  JobRow row;
  row.scheduled = 5;
  row.data = "{}";
  row.group = "g";
  const std::string with_group = encode_row(row);  // as a row of 25 fields was written
  ASSERT_EQ(Tuple::unpack(with_group)->size(), 25u);
  auto old = decode_row(with_group);
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->timeout, std::nullopt);
  EXPECT_EQ(old->data_format, DataFormat::kJson);
  EXPECT_FALSE(old->global_id);
  EXPECT_EQ(old->snoozes, 0u);

  row.group.clear();
  row.timeout = Millis(1500);
  row.data = std::string("a\0b", 3);
  row.data_format = DataFormat::kBytes;
  row.global_id = true;
  row.snoozes = 4;
  const std::string bytes = encode_row(row);
  auto t = Tuple::unpack(bytes);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 29u);  // every field, the group "" among them
  EXPECT_EQ((*t)[24].as_string(), "");
  auto decoded = decode_row(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->timeout, std::optional<Millis>(1500));
  EXPECT_EQ(decoded->data, std::string("a\0b", 3));
  EXPECT_EQ(decoded->data_format, DataFormat::kBytes);
  EXPECT_TRUE(decoded->global_id);
  EXPECT_EQ(decoded->snoozes, 4u);
  EXPECT_EQ(decoded->group, "");
  EXPECT_EQ(encode_row(*decoded), bytes);

  // Back at their defaults, the row encodes as before the fields existed.
  decoded->timeout.reset();
  decoded->data_format = DataFormat::kJson;
  decoded->global_id = false;
  decoded->snoozes = 0;
  decoded->data = "{}";
  EXPECT_EQ(Tuple::unpack(encode_row(*decoded))->size(), 16u);

  // Fields of the wrong kind are corrupt: a timeout of 0, an unknown format, a negative count.
  auto corrupt = [&](size_t field, Element value) {
    Tuple changed;
    for (size_t i = 0; i < t->size(); ++i) changed.append(i == field ? value : (*t)[i]);
    return decode_row(changed.pack()).ok();
  };
  EXPECT_TRUE(corrupt(25, nullptr));
  EXPECT_FALSE(corrupt(25, int64_t{0}));
  EXPECT_FALSE(corrupt(26, int64_t{2}));
  EXPECT_FALSE(corrupt(27, int64_t{1}));
  EXPECT_FALSE(corrupt(28, int64_t{-1}));
}

TEST(SchemaTest, KicksRoundTripAsA30thFieldOnlyWhenNotZero) {
  JobRow row;
  row.scheduled = 5;
  row.data = "{}";
  row.kicks = 3;
  const std::string bytes = encode_row(row);
  auto t = Tuple::unpack(bytes);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 30u);
  auto decoded = decode_row(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->kicks, 3u);
  EXPECT_EQ(encode_row(*decoded), bytes);
  decoded->kicks = 0;
  EXPECT_EQ(Tuple::unpack(encode_row(*decoded))->size(), 16u) << "as before kicks existed";
  Tuple zero;
  for (size_t i = 0; i < t->size(); ++i) zero.append(i == 29 ? Element(int64_t{0}) : (*t)[i]);
  EXPECT_FALSE(decode_row(zero.pack()).ok()) << "0 kicks are never written";
}

TEST(SchemaTest, ATraceparentRoundTripsAsA31stFieldOnlyWhenSet) {
  JobRow row;
  row.scheduled = 5;
  row.data = "{}";
  row.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const std::string bytes = encode_row(row);
  auto t = Tuple::unpack(bytes);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 31u);
  EXPECT_EQ((*t)[29].as_int(), 0) << "no kicks: 0 written before it";
  auto decoded = decode_row(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->traceparent, row.traceparent);
  EXPECT_EQ(decoded->kicks, 0u);
  EXPECT_EQ(encode_row(*decoded), bytes);
  decoded->kicks = 2;
  auto kicked = decode_row(encode_row(*decoded));
  ASSERT_TRUE(kicked.ok());
  EXPECT_EQ(kicked->kicks, 2u);
  EXPECT_EQ(kicked->traceparent, row.traceparent);
  decoded->traceparent.clear();
  EXPECT_EQ(Tuple::unpack(encode_row(*decoded))->size(), 30u) << "as before traceparents";
  decoded->kicks = 0;
  EXPECT_EQ(Tuple::unpack(encode_row(*decoded))->size(), 16u);
  Tuple empty;
  for (size_t i = 0; i < t->size(); ++i) empty.append(i == 30 ? Element("") : (*t)[i]);
  EXPECT_FALSE(decode_row(empty.pack()).ok()) << "an empty traceparent is never written";
  Tuple wrong;
  for (size_t i = 0; i < t->size(); ++i) wrong.append(i == 30 ? Element(int64_t{1}) : (*t)[i]);
  EXPECT_FALSE(decode_row(wrong.pack()).ok());
}

TEST(SchemaTest, AGroupRoundTripsAndARowWithoutOneEncodesAsBefore) {
  JobRow row;
  row.scheduled = 5;
  row.data = "{}";
  const std::string without = encode_row(row);
  ASSERT_EQ(Tuple::unpack(without)->size(), 16u);  // a pending job, as before outcomes
  row.group = "customer-7";
  const std::string with = encode_row(row);
  auto t = Tuple::unpack(with);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 25u);  // every optional field, then the group
  EXPECT_EQ((*t)[24].as_string(), "customer-7");
  auto decoded = decode_row(with);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->group, "customer-7");
  EXPECT_EQ(decoded->outcome, Outcome::kNone);
  EXPECT_EQ(encode_row(*decoded), with);
  decoded->group.clear();
  EXPECT_EQ(encode_row(*decoded), without);
  // A 25th field that is not a group name is corrupt.
  Tuple bad = *t;
  Tuple empty_group;
  for (size_t i = 0; i < 24; ++i) empty_group.append(bad[i]);
  empty_group.append("");
  EXPECT_FALSE(decode_row(empty_group.pack()).ok());
  empty_group = Tuple();
  for (size_t i = 0; i < 24; ++i) empty_group.append(bad[i]);
  empty_group.append(int64_t{3});
  EXPECT_FALSE(decode_row(empty_group.pack()).ok());
}

TEST(SchemaTest, GroupSettingsAreStoredOnlyWhenSetAndRoundTrip) {
  TypeSettings s{.timeout = Millis(1500)};
  const std::string before = encode_type(s);
  EXPECT_EQ(before, (Tuple{int64_t{1500}}.pack()));
  s.has_groups = true;
  auto decoded = decode_type(encode_type(s));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_TRUE(decoded->has_groups);
  EXPECT_FALSE(decoded->max_running_per_group);
  EXPECT_FALSE(decoded->paused);
  EXPECT_EQ(Tuple::unpack(encode_type(s))->size(), 15u);
  s.max_running_per_group = 3;
  decoded = decode_type(encode_type(s));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->max_running_per_group, 3u);
  EXPECT_EQ(encode_type(*decoded), encode_type(s));
  s.has_groups = false;
  decoded = decode_type(encode_type(s));
  ASSERT_TRUE(decoded.ok());
  EXPECT_FALSE(decoded->has_groups);
  EXPECT_EQ(decoded->max_running_per_group, 3u);
  s.max_running_per_group.reset();
  EXPECT_EQ(encode_type(s), before);
  // A type row of flow control's 13 fields still decodes, without groups.
  const auto thirteen =
      Tuple{int64_t{1}, nullptr, nullptr, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{6},
            int64_t{7}, false,   nullptr, int64_t{2}, nullptr,    nullptr}
          .pack();
  decoded = decode_type(thirteen);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->max_running, 2u);
  EXPECT_FALSE(decoded->has_groups);
  EXPECT_EQ(encode_type(*decoded), thirteen);
  Tuple bad = *Tuple::unpack(thirteen);
  bad.append(int64_t{0});
  bad.append(true);
  EXPECT_FALSE(decode_type(bad.pack()).ok());  // a limit of 0
}

TEST(SchemaTest, GroupRowsRoundTripAndGroupKeysParseBack) {
  GroupRow row{.running = 2,
               .queued = std::pair{int64_t{-1}, int64_t{1'700'000'000'000'123}},
               .last_accept_us = 77,
               .full = false};
  auto decoded = decode_group(encode_group(row));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, row);
  row.queued.reset();
  row.full = true;
  decoded = decode_group(encode_group(row));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, row);
  EXPECT_FALSE(decode_group(Tuple{int64_t{1}, int64_t{2}, nullptr, int64_t{3}, false}.pack()).ok());
  EXPECT_FALSE(decode_group("junk").ok());

  Keys keys("p");
  EXPECT_EQ(*keys.parse_group_name(keys.group("t", "g1")), "g1");
  EXPECT_FALSE(keys.parse_group_name(keys.pending("t", 0, 0, "x")).ok());
  auto [lo, hi] = keys.groups_of("t");
  EXPECT_LE(lo, keys.group("t", ""));
  EXPECT_LT(keys.group("t", "zzz"), hi);
  EXPECT_FALSE(keys.group("tt", "a") >= lo && keys.group("tt", "a") < hi);
  // A group's pending index and the queue of groups sort by priority, then time, then name.
  const OrderedIndex queue = keys.group_queue("t");
  EXPECT_LT(queue.key(0, 500, "z"), queue.key(1, 100, "a"));
  EXPECT_LT(queue.key(0, 100, "z"), queue.key(0, 101, "a"));
  auto [due_lo, due_hi] = queue.due(0, 100);
  EXPECT_LE(due_lo, queue.key(0, 100, "zzz"));
  EXPECT_LT(queue.key(0, 100, "zzz"), due_hi);
  EXPECT_GE(queue.key(0, 101, ""), due_hi);
  auto entry = queue.parse(queue.key(3, 9, "g"));
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->priority, 3);
  EXPECT_EQ(entry->time, 9);
  EXPECT_EQ(entry->name, "g");
  // Groups never share each other's pending index, nor the jobs without a group's.
  const auto a = keys.group_pending_index("t", "a").all();
  const auto ab = keys.group_pending_index("t", "ab").key(0, 0, "x");
  EXPECT_FALSE(ab >= a.first && ab < a.second);
  const auto all_grouped = keys.group_pending_of("t");
  EXPECT_TRUE(ab >= all_grouped.first && ab < all_grouped.second);
  const auto ungrouped = keys.pending("t", 0, 0, "x");
  EXPECT_FALSE(ungrouped >= all_grouped.first && ungrouped < all_grouped.second);
  EXPECT_EQ(keys.pending_index("t").key(0, 0, "x"), ungrouped);
}

TEST(SchemaTest, OutcomeIndexKeysParseBackAndOutcomesDoNotShareRanges) {
  Keys keys("p");
  const auto dead = keys.ended("work", Outcome::kDead, "j1");
  EXPECT_EQ(*keys.parse_ended_id(dead), "j1");
  auto [dlo, dhi] = keys.ended_with("work", Outcome::kDead);
  EXPECT_TRUE(dlo <= dead && dead < dhi);
  auto [clo, chi] = keys.ended_with("work", Outcome::kCancelled);
  EXPECT_FALSE(clo <= dead && dead < chi);
  EXPECT_FALSE(keys.parse_ended_id(keys.job("work", "j1")).ok());
}

TEST(RetryPolicyTest, BackoffDoublesUpToTheCapAndJitterOnlyShortens) {
  RetryPolicy p;  // 1 s, x2, cap 1 h, jitter 0.2
  EXPECT_EQ(backoff_delay(p, 1), Millis(1000));
  EXPECT_EQ(backoff_delay(p, 2), Millis(2000));
  EXPECT_EQ(backoff_delay(p, 5), Millis(16000));
  EXPECT_EQ(backoff_delay(p, 20), Millis(3'600'000));
  EXPECT_EQ(backoff_delay(p, 1'000'000), Millis(3'600'000));
  EXPECT_EQ(jittered_backoff_delay(p, 2, 0.0), Millis(2000));
  EXPECT_EQ(jittered_backoff_delay(p, 2, 0.999999), Millis(1601));
  EXPECT_EQ(jittered_backoff_delay(p, 2, 0.5), Millis(1800));
  EXPECT_TRUE(validate_retry_policy(p).ok());
  p.backoff_cap = Millis(31LL * 24 * 3600 * 1000);
  EXPECT_EQ(validate_retry_policy(p).code(), Code::kInvalidArgument);
  p = RetryPolicy{};
  p.max_attempts = kMaxAttemptsLimit + 1;
  EXPECT_EQ(validate_retry_policy(p).code(), Code::kInvalidArgument);
  p = RetryPolicy{};
  p.backoff_base = Millis(0);
  EXPECT_EQ(validate_retry_policy(p).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace kvq::jobs
