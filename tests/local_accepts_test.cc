// Each Jobs owns what its accepts share in this process (src/jobs/accept/local_accepts.h),
// white-box on real LMDB: two Jobs on two stores with the same key prefix see nothing of each
// other's claims, index heads or attempts in flight, and a Jobs made again starts clean. (These
// were once process-wide, keyed by a Keys's address or by an index's key prefix.)
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "jobs/jobs_impl.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "support/temp_dir.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;

struct Opened {
  std::shared_ptr<kv::Store> store;
  std::unique_ptr<jobs::Jobs> jobs;
};

class LocalAcceptsTest : public ::testing::Test {
 protected:
  Opened open(const TempDir& dir) {
    auto store = open_lmdb_store({.path = dir.path(), .durability = Durability::kNoSync});
    EXPECT_TRUE(store.ok()) << store.status().to_string();
    auto jobs = jobs::Jobs::open(*store, options_);
    EXPECT_TRUE(jobs.ok()) << jobs.status().to_string();
    EXPECT_TRUE((*jobs)->set_type_timeout("work", 60s).ok());
    return {*store, std::move(*jobs)};
  }
  static jobs::LocalAccepts& local(jobs::Jobs& jobs) { return impl_of(jobs).local_accepts; }
  // The key its heads are kept under: where a read of the type's pending index starts.
  std::string pending_head() const { return keys_.pending_index("work").all().first; }

  jobs::JobsOptions options_{.key_prefix = "same", .retry = {.timeout = 2s}};
  jobs::Keys keys_{options_.key_prefix};
  TempDir dir_a_, dir_b_;
};

TEST_F(LocalAcceptsTest, TwoJobsWithTheSameKeyPrefixShareNoClaimsHeadsOrCountsInFlight) {
  Opened a = open(dir_a_);
  Opened b = open(dir_b_);
  ASSERT_TRUE(a.jobs->add("work", "j1", "{}").ok());
  ASSERT_TRUE(b.jobs->add("work", "j1", "{}").ok());

  // An attempt of A's under way, claiming j1: nothing of it shows in B.
  jobs::AcceptInFlight in_flight(local(*a.jobs).in_flight, "work");
  jobs::PickClaims claims(local(*a.jobs).claims);
  claims.new_try();
  ASSERT_TRUE(claims.claim("work", "j1"));
  EXPECT_TRUE(local(*a.jobs).in_flight.under_way("work"));
  EXPECT_FALSE(local(*b.jobs).in_flight.under_way("work"));

  // B's accept takes its own j1 at once: were A's claim B's too, B's look would pass over j1
  // and retry until A let go of it (never, here), then fail.
  EXPECT_EQ(local(*b.jobs).heads.get(pending_head()), std::nullopt);
  auto taken = b.jobs->accept("work", {});
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  EXPECT_EQ(taken->id, "j1");
  EXPECT_NE(local(*b.jobs).heads.get(pending_head()), std::nullopt) << "B's look found a head";
  EXPECT_EQ(local(*a.jobs).heads.get(pending_head()), std::nullopt) << "and A keeps none of it";

  // A's own accept of its j1 is held up by its own claim, as the claim is there for.
  jobs::PickClaims other(local(*a.jobs).claims);
  other.new_try();
  EXPECT_FALSE(other.claim("work", "j1"));
}

TEST_F(LocalAcceptsTest, AJobsMadeAgainStartsClean) {
  {
    Opened first = open(dir_a_);
    ASSERT_TRUE(first.jobs->add("work", "j1", "{}").ok());
    ASSERT_TRUE(first.jobs->accept("work", {}).ok());
    ASSERT_NE(local(*first.jobs).heads.get(pending_head()), std::nullopt);
    jobs::PickClaims claims(local(*first.jobs).claims);
    claims.new_try();
    ASSERT_TRUE(claims.claim("work", "j2"));
    local(*first.jobs).held_back.note("work");
    local(*first.jobs).latencies.note("a-lock", jobs::Millis(5));
    claims.let_go();  // before its Jobs goes: the claims live in it
  }
  Opened again = open(dir_a_);  // the same store, the same prefix, perhaps the same address
  jobs::LocalAccepts& fresh = local(*again.jobs);
  EXPECT_EQ(fresh.heads.get(pending_head()), std::nullopt);
  EXPECT_EQ(fresh.held_back.count("work"), 0u);
  EXPECT_EQ(fresh.latencies.take("a-lock"), std::nullopt);
  EXPECT_FALSE(fresh.in_flight.under_way("work"));
  jobs::PickClaims claims(fresh.claims);
  claims.new_try();
  EXPECT_TRUE(claims.claim("work", "j2")) << "a claim of the Jobs before";
}

}  // namespace
}  // namespace kvq::testing
