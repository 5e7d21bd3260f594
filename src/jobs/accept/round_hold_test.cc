// How long the accept waiters' next round waits for the workers the last one served.
#include "jobs/accept/round_hold.h"

#include <gtest/gtest.h>

namespace kvq::jobs {
namespace {

using namespace std::chrono_literals;

TEST(RoundHoldTest, NothingWaitsBeforeAnyRound) {
  RoundHold hold;
  EXPECT_FALSE(hold.holds(0, kv::Clock::now()));
}

TEST(RoundHoldTest, WaitsUntilAsManyWaitersAsTheLastRoundServed) {
  RoundHold hold;
  const auto start = kv::Clock::now();
  hold.ended(4, start, start + 4ms);
  EXPECT_TRUE(hold.holds(1, start + 4ms));
  EXPECT_TRUE(hold.holds(3, start + 5ms));
  EXPECT_FALSE(hold.holds(4, start + 5ms));
  EXPECT_FALSE(hold.holds(9, start + 5ms));
}

TEST(RoundHoldTest, WaitsAtMostHalfAsLongAsTheLastRoundTook) {
  RoundHold hold;
  const auto start = kv::Clock::now();
  hold.ended(4, start, start + 4ms);
  EXPECT_EQ(hold.until(), start + 6ms);
  EXPECT_TRUE(hold.holds(1, start + 6ms - 1us));
  EXPECT_FALSE(hold.holds(1, start + 6ms));
}

TEST(RoundHoldTest, ALongRoundHoldsTheNextOnlyUpToTheCap) {
  RoundHold hold;
  const auto start = kv::Clock::now();
  hold.ended(4, start, start + 2s);  // say, across a leader election
  EXPECT_EQ(hold.until(), start + 2s + RoundHold::kMaxHold);
  EXPECT_FALSE(hold.holds(1, start + 2s + RoundHold::kMaxHold));
}

TEST(RoundHoldTest, ARoundThatServedNobodyHoldsNothing) {
  RoundHold hold;
  const auto start = kv::Clock::now();
  hold.ended(4, start, start + 4ms);
  hold.ended(0, start + 4ms, start + 8ms);  // found nothing due, or failed
  EXPECT_FALSE(hold.holds(0, start + 8ms));
}

}  // namespace
}  // namespace kvq::jobs
