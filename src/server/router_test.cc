#include "server/router.h"

#include <gtest/gtest.h>

namespace kvq::server {
namespace {

Request request(std::string method, std::vector<std::string> segments) {
  Request r;
  r.method = std::move(method);
  r.segments = std::move(segments);
  return r;
}

// Whether `r` (its method and path) goes to a route added as public.
bool is_public(const Router& router, Request r) {
  auto matched = router.match(r);
  auto* hit = std::get_if<Router::Match>(&matched);
  return hit && hit->access == Router::Access::kPublic;
}

Router routes() {
  Router router;
  auto nothing = [](Request&, std::shared_ptr<Exchange>) {};
  router.add("GET", "/", nothing, Router::Access::kPublic);
  router.add("GET", "/healthz", nothing, Router::Access::kPublic);
  router.add("GET", "/v1/jobs/{type}/{id}", nothing);
  router.add("DELETE", "/v1/jobs/{type}/{id}", nothing);
  return router;
}

TEST(RouterTest, TheRootPatternMatchesOnlyThePathWithNoSegments) {
  const Router router = routes();
  auto root = request("GET", {});
  auto matched = router.match(root);
  ASSERT_TRUE(std::holds_alternative<Router::Match>(matched));
  EXPECT_EQ(std::get<Router::Match>(matched).route, "/");
  auto other = request("GET", {"nope"});
  ASSERT_TRUE(std::holds_alternative<ApiError>(router.match(other)));
  EXPECT_EQ(std::get<ApiError>(router.match(other)).name, "no_route");
}

TEST(RouterTest, PlaceholdersFillParams) {
  const Router router = routes();
  auto r = request("GET", {"v1", "jobs", "t", "j 1"});
  ASSERT_TRUE(std::holds_alternative<Router::Match>(router.match(r)));
  EXPECT_EQ(r.params["type"], "t");
  EXPECT_EQ(r.params["id"], "j 1");
  EXPECT_EQ(r.route, "/v1/jobs/{type}/{id}");
  auto wrong_method = request("POST", {"v1", "jobs", "t", "j"});
  EXPECT_EQ(std::get<ApiError>(router.match(wrong_method)).name, "method_not_allowed");
}

TEST(RouterTest, OnlyRoutesAddedAsPublicArePublic) {
  const Router router = routes();
  EXPECT_TRUE(is_public(router, request("GET", {})));
  EXPECT_TRUE(is_public(router, request("GET", {"healthz"})));
  EXPECT_FALSE(is_public(router, request("GET", {"v1", "jobs", "t", "j"})));
  EXPECT_FALSE(is_public(router, request("DELETE", {"v1", "jobs", "t", "j"})));
  EXPECT_FALSE(is_public(router, request("POST", {"healthz"})))
      << "public per method, not per path";
  EXPECT_FALSE(is_public(router, request("GET", {"nope"})));
}

}  // namespace
}  // namespace kvq::server
