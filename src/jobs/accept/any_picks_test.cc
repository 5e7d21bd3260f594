// Which pick an accept attempt makes, and the claims that keep overlapping attempts in this
// process from picking the same job: in order on a first try, passing over what others here
// claimed; spread on a retry.
#include "jobs/accept/any_picks.h"

#include <gtest/gtest.h>

namespace kvq::jobs {
namespace {

TEST(AnyAttemptTest, TheFirstTryTakesInOrderAndARetrySpreads) {
  LocalAccepts local;
  AnyAttempt attempt(&local, {"a", "b"}, {{}, {}});
  EXPECT_EQ(attempt.next_pick(), Pick::kInOrder);
  EXPECT_EQ(attempt.next_pick(), Pick::kSpread);
}

TEST(AnyAttemptTest, AnAttemptThatOverlapsAnotherStillTakesInOrderOnItsFirstTry) {
  LocalAccepts local;
  AnyAttempt first(&local, {"a"}, {{}});
  AnyAttempt second(&local, {"b", "a"}, {{}, {}});  // "a" is under way
  EXPECT_EQ(first.next_pick(), Pick::kInOrder);
  EXPECT_EQ(second.next_pick(), Pick::kInOrder);
  EXPECT_TRUE(local.in_flight.under_way("a"));
}

TEST(AnyAttemptTest, ASettledAttemptNoLongerCountsAndOtherJobsLayersDoNotCount) {
  LocalAccepts local;
  LocalAccepts other_layer;  // another Jobs on the same store: its own count
  AnyAttempt settled(&local, {"a"}, {{}});
  settled.settle();
  EXPECT_FALSE(local.in_flight.under_way("a"));
  AnyAttempt elsewhere(&other_layer, {"a"}, {{}});
  EXPECT_FALSE(local.in_flight.under_way("a"));
  EXPECT_TRUE(other_layer.in_flight.under_way("a"));
}

TEST(AnyAttemptTest, AnAttemptThatMakesNoLookIsNotCountedAndClaimsNothing) {
  LocalAccepts local;
  AnyAttempt finish_only(nullptr, {"a"}, {{}});
  EXPECT_FALSE(local.in_flight.under_way("a"));
  EXPECT_EQ(finish_only.claims(), nullptr);
  AnyAttempt looking(&local, {"a"}, {{}});
  EXPECT_NE(looking.claims(), nullptr);
}

TEST(AnyAttemptTest, ANewTryLetsGoOfTheClaimsOfTheTryBeforeAndSettlingOfTheLast) {
  LocalAccepts local;
  AnyAttempt attempt(&local, {"a"}, {{}});
  PickClaims other(local.claims);
  attempt.begin_try();
  ASSERT_TRUE(attempt.claims()->claim("a", "1"));
  EXPECT_FALSE(other.claim("a", "1"));
  attempt.begin_try();  // a retry picks afresh
  other.new_try();
  EXPECT_TRUE(other.claim("a", "1"));
  other.let_go();
  ASSERT_TRUE(attempt.claims()->claim("a", "2"));
  attempt.settle();
  other.new_try();
  EXPECT_TRUE(other.claim("a", "2"));
}

}  // namespace
}  // namespace kvq::jobs
