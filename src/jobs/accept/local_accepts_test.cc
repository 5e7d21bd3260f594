// What the accepts of one Jobs share in this process (local_accepts.h): claims that keep
// overlapping attempts from picking the same job, counts in flight, held-back looks, queue
// latencies and index heads — each a LocalAccepts's own.
#include "jobs/accept/local_accepts.h"

#include <gtest/gtest.h>

namespace kvq::jobs {
namespace {

TEST(PickClaimsTest, AJobClaimedByOneAttemptIsRefusedToOthersUntilItsClaimsAreDropped) {
  LocalAccepts local;
  PickClaims first(local.claims);
  PickClaims second(local.claims);
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
    PickClaims ended(local.claims);
    EXPECT_TRUE(ended.claim("a", "3"));
  }
  first.new_try();
  EXPECT_TRUE(first.claim("a", "3")) << "an attempt's claims end with it";
}

TEST(PickClaimsTest, TypesAndIdsDoNotRunIntoEachOtherAndJobsLayersKeepTheirOwn) {
  LocalAccepts local;
  LocalAccepts other_layer;
  PickClaims first(local.claims);
  PickClaims second(local.claims);
  PickClaims elsewhere(other_layer.claims);
  EXPECT_TRUE(first.claim("ab", "c"));
  EXPECT_TRUE(second.claim("a", "bc"));
  EXPECT_TRUE(elsewhere.claim("ab", "c"));
}

TEST(LocalAcceptsTest, EachPartCountsByTypeAndTwoLocalAcceptsShareNothing) {
  LocalAccepts one;
  LocalAccepts two;
  {
    AcceptInFlight a(one.in_flight, "a");
    AcceptInFlight again(one.in_flight, "a");
    EXPECT_TRUE(one.in_flight.under_way("a"));
    EXPECT_FALSE(one.in_flight.under_way("b"));
    EXPECT_FALSE(two.in_flight.under_way("a"));
  }
  EXPECT_FALSE(one.in_flight.under_way("a")) << "counted while an attempt lives";

  one.held_back.note("a");
  one.held_back.note("a");
  EXPECT_EQ(one.held_back.count("a"), 2u);
  EXPECT_EQ(one.held_back.count("b"), 0u);
  EXPECT_EQ(two.held_back.count("a"), 0u);

  one.latencies.note("lock-1", Millis(7));
  EXPECT_EQ(two.latencies.take("lock-1"), std::nullopt);
  EXPECT_EQ(one.latencies.take("lock-1"), Millis(7));
  EXPECT_EQ(one.latencies.take("lock-1"), std::nullopt) << "taken once";

  one.heads.set("index", 1, 2);
  EXPECT_EQ(one.heads.get("index"), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(two.heads.get("index"), std::nullopt);
}

TEST(LocalAcceptsTest, NotesNeverTakenAreBounded) {
  QueueLatencies latencies;
  for (size_t i = 0; i <= QueueLatencies::kMaxNoted; ++i)
    latencies.note("lock-" + std::to_string(i), Millis(1));
  EXPECT_EQ(latencies.take("lock-0"), std::nullopt) << "the oldest note went";
  EXPECT_EQ(latencies.take("lock-1"), Millis(1));
}

}  // namespace
}  // namespace kvq::jobs
