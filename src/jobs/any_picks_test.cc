// Which pick an accept attempt over several types makes: in order only when it started alone
// in this process; overlapping attempts collide on the head of the queue otherwise.
#include "jobs/any_picks.h"

#include <gtest/gtest.h>

namespace kvq::jobs {
namespace {

TEST(AnyAttemptTest, TheFirstTryOfAnAttemptAloneTakesInOrderAndARetrySpreads) {
  const Keys keys("t");
  AnyAttempt attempt(&keys, {"a", "b"}, {{}, {}});
  EXPECT_EQ(attempt.next_pick(), Pick::kInOrder);
  EXPECT_EQ(attempt.next_pick(), Pick::kSpread);
}

TEST(AnyAttemptTest, AnAttemptThatOverlapsAnotherOnAnyOfItsTypesSpreadsFromItsFirstTry) {
  const Keys keys("t");
  AnyAttempt first(&keys, {"a"}, {{}});
  AnyAttempt second(&keys, {"b", "a"}, {{}, {}});  // "a" is under way
  AcceptInFlight accept(keys, "b");                // and a plain accept of "b"
  AnyAttempt third(&keys, {"b"}, {{}});
  EXPECT_EQ(first.next_pick(), Pick::kInOrder);
  EXPECT_EQ(second.next_pick(), Pick::kSpread);
  EXPECT_EQ(third.next_pick(), Pick::kSpread);
  EXPECT_FALSE(accept.alone());
}

TEST(AnyAttemptTest, ASettledAttemptNoLongerCountsAndOtherJobsLayersDoNotCount) {
  const Keys keys("t");
  const Keys other_layer("t");  // another Jobs on the same store: its own count
  AnyAttempt settled(&keys, {"a"}, {{}});
  settled.settle();
  AnyAttempt elsewhere(&other_layer, {"a"}, {{}});
  AnyAttempt next(&keys, {"a"}, {{}});
  EXPECT_EQ(elsewhere.next_pick(), Pick::kInOrder);
  EXPECT_EQ(next.next_pick(), Pick::kInOrder);
}

TEST(AnyAttemptTest, AnAttemptThatMakesNoLookIsNotCounted) {
  const Keys keys("t");
  AnyAttempt finish_only(nullptr, {"a"}, {{}});
  EXPECT_FALSE(AcceptInFlight::under_way(keys, "a"));
  AnyAttempt looking(&keys, {"a"}, {{}});
  EXPECT_EQ(looking.next_pick(), Pick::kInOrder);
}

}  // namespace
}  // namespace kvq::jobs
