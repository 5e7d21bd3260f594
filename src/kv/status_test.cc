#include "kvq/status.h"

#include <gtest/gtest.h>

namespace kvq {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "ok");
}

TEST(StatusTest, OnlyConflictsUnavailabilityAndUnknownResultsAreRetryable) {
  EXPECT_TRUE(Aborted("x").retryable());
  EXPECT_TRUE(Unavailable("x").retryable());
  EXPECT_TRUE(UnknownResult("x").retryable());
  EXPECT_FALSE(FailedPrecondition("x").retryable());
  EXPECT_FALSE(NotFound("x").retryable());
  EXPECT_FALSE(InvalidArgument("x").retryable());
  EXPECT_FALSE(DeadlineExceeded("x").retryable());
  EXPECT_FALSE(Internal("x").retryable());
  EXPECT_FALSE(NoTimeout("x").retryable());
  EXPECT_FALSE(TypeHasJobs("x").retryable());
}

TEST(StatusTest, ToStringNamesTheCodeAndMessage) {
  EXPECT_EQ(NotFound("job 'a' is absent").to_string(), "not_found: job 'a' is absent");
  EXPECT_EQ(Aborted("c").with_context("add").to_string(), "aborted: add: c");
  EXPECT_EQ(NoTimeout("t").to_string(), "no_timeout: t");
  EXPECT_EQ(TypeHasJobs("t").to_string(), "type_has_jobs: t");
}

TEST(ResultTest, HoldsAValueOrAnError) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  EXPECT_TRUE(good.status().ok());
  Result<int> bad = NotFound("none");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
  EXPECT_EQ(bad.value_or(3), 3);
}

Result<int> half(int x) {
  if (x % 2) return InvalidArgument("odd");
  return x / 2;
}

Result<int> quarter(int x) {
  int h = 0;
  KVQ_ASSIGN_OR_RETURN(h, half(x));
  return half(h);
}

TEST(ResultTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*quarter(8), 2);
  EXPECT_EQ(quarter(6).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace kvq
