// Which pick an accept attempt makes, and the claims that keep overlapping attempts in this
// process from picking the same job: in order on a first try, passing over what others here
// claimed; spread on a retry.
#include "jobs/any_picks.h"

#include <gtest/gtest.h>

namespace kvq::jobs {
namespace {

TEST(AnyAttemptTest, TheFirstTryTakesInOrderAndARetrySpreads) {
  const Keys keys("t");
  AnyAttempt attempt(&keys, {"a", "b"}, {{}, {}});
  EXPECT_EQ(attempt.next_pick(), Pick::kInOrder);
  EXPECT_EQ(attempt.next_pick(), Pick::kSpread);
}

TEST(AnyAttemptTest, AnAttemptThatOverlapsAnotherStillTakesInOrderOnItsFirstTry) {
  const Keys keys("t");
  AnyAttempt first(&keys, {"a"}, {{}});
  AnyAttempt second(&keys, {"b", "a"}, {{}, {}});  // "a" is under way
  EXPECT_EQ(first.next_pick(), Pick::kInOrder);
  EXPECT_EQ(second.next_pick(), Pick::kInOrder);
  EXPECT_TRUE(AcceptInFlight::under_way(keys, "a"));
}

TEST(AnyAttemptTest, ASettledAttemptNoLongerCountsAndOtherJobsLayersDoNotCount) {
  const Keys keys("t");
  const Keys other_layer("t");  // another Jobs on the same store: its own count
  AnyAttempt settled(&keys, {"a"}, {{}});
  settled.settle();
  EXPECT_FALSE(AcceptInFlight::under_way(keys, "a"));
  AnyAttempt elsewhere(&other_layer, {"a"}, {{}});
  EXPECT_FALSE(AcceptInFlight::under_way(keys, "a"));
  EXPECT_TRUE(AcceptInFlight::under_way(other_layer, "a"));
}

TEST(AnyAttemptTest, AnAttemptThatMakesNoLookIsNotCountedAndClaimsNothing) {
  const Keys keys("t");
  AnyAttempt finish_only(nullptr, {"a"}, {{}});
  EXPECT_FALSE(AcceptInFlight::under_way(keys, "a"));
  EXPECT_EQ(finish_only.claims(), nullptr);
  AnyAttempt looking(&keys, {"a"}, {{}});
  EXPECT_NE(looking.claims(), nullptr);
}

TEST(PickClaimsTest, AJobClaimedByOneAttemptIsRefusedToOthersUntilItsClaimsAreDropped) {
  const Keys keys("t");
  PickClaims first(keys);
  PickClaims second(keys);
  EXPECT_TRUE(first.claim("a", "1"));
  EXPECT_FALSE(second.claim("a", "1"));
  EXPECT_TRUE(second.claim("a", "2"));
  EXPECT_TRUE(second.claim("b", "1"));  // another type's job of the same id
  EXPECT_FALSE(first.claim("a", "2"));
  first.let_go();
  EXPECT_FALSE(second.claim("a", "1"))
      << "let go since second's try began: it may not see the commit";
  second.new_try();
  EXPECT_TRUE(second.claim("a", "1")) << "let go before this try began";
  {
    PickClaims ended(keys);
    EXPECT_TRUE(ended.claim("a", "3"));
  }
  first.new_try();
  EXPECT_TRUE(first.claim("a", "3")) << "an attempt's claims end with it";
}

TEST(PickClaimsTest, TypesAndIdsDoNotRunIntoEachOtherAndJobsLayersKeepTheirOwn) {
  const Keys keys("t");
  const Keys other_layer("t");
  PickClaims first(keys);
  PickClaims second(keys);
  PickClaims elsewhere(other_layer);
  EXPECT_TRUE(first.claim("ab", "c"));
  EXPECT_TRUE(second.claim("a", "bc"));
  EXPECT_TRUE(elsewhere.claim("ab", "c"));
}

TEST(AnyAttemptTest, ANewTryLetsGoOfTheClaimsOfTheTryBeforeAndSettlingOfTheLast) {
  const Keys keys("t");
  AnyAttempt attempt(&keys, {"a"}, {{}});
  PickClaims other(keys);
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
