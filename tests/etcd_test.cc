// What only the etcd backend has to get right: compacted history, and the URL format.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/backends.h"
#include "support/kv_helpers.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;

// Makes etcd's history compacted up to `revision` with Debian's etcdctl. Tests share one etcd
// and run in parallel, so another may have compacted past `revision` already: etcd then refuses
// ("required revision has been compacted"), and the history is compacted all the same.
bool compact_now(const std::string& endpoint, uint64_t revision) {
  const std::string cmd =
      "ETCDCTL_API=3 etcdctl --endpoints=" + endpoint + " compaction " + std::to_string(revision) + " 2>&1";
  FILE* out = popen(cmd.c_str(), "r");
  if (!out) return false;
  std::string said;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, out)) said.append(buf, n);
  const int status = pclose(out);
  return status == 0 || said.find("required revision has been compacted") != std::string::npos;
}

TEST(EtcdStoreTest, AWatchWhoseHistoryWasCompactedStillSeesTheChange) {
  TempDir dir;
  auto store = open_etcd_store({.endpoints = {test_etcd_endpoint()}, .key_prefix = dir.path() + "/"});
  ASSERT_TRUE(store.ok());
  put(**store, "k", "old");
  auto reader = begin(**store);
  ASSERT_EQ(*reader->get("k"), "old");
  put(**store, "k", "new");
  put(**store, "other", "x");  // moves the revision past the change
  auto now = begin(**store);
  const uint64_t revision = *now->read_version();
  ASSERT_TRUE(compact_now(test_etcd_endpoint(), revision)) << "etcdctl compaction failed";
  // The watch must start before the compaction point: etcd cancels it, kvq re-reads.
  auto watch = reader->watch("k");
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  EXPECT_TRUE(watch->wait_until(kv::Clock::now() + 10s).ok()) << "a compacted change was missed";
}

TEST(EtcdStoreTest, ATransactionWhoseReadRevisionWasCompactedIsRetried) {
  TempDir dir;
  auto store = open_etcd_store({.endpoints = {test_etcd_endpoint()}, .key_prefix = dir.path() + "/"});
  ASSERT_TRUE(store.ok());
  put(**store, "a", "1");
  auto old = begin(**store);
  ASSERT_EQ(*old->get("a"), "1");
  put(**store, "a", "2");
  put(**store, "b", "x");
  auto now = begin(**store);
  ASSERT_TRUE(compact_now(test_etcd_endpoint(), *now->read_version()));
  auto stale = old->get("b");  // at the old revision, now compacted
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), Code::kAborted) << "retryable, so kv::run starts over: " << stale.status().to_string();
}

TEST(EtcdStoreTest, UrlsNameEndpointsAndAPrefix) {
  auto o = parse_etcd_url("etcd://10.0.0.1:2379,10.0.0.2:2379/kvq-prod");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->endpoints, (std::vector<std::string>{"10.0.0.1:2379", "10.0.0.2:2379"}));
  EXPECT_EQ(o->key_prefix, "kvq-prod");
  EXPECT_EQ(parse_etcd_url("http://x:1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse_etcd_url("etcd://nohost").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse_etcd_url("etcd://").status().code(), Code::kInvalidArgument);
}

TEST(EtcdStoreTest, AnUnreachableClusterIsUnavailableNotACrash) {
  auto store = open_etcd_store({.endpoints = {"127.0.0.1:1"}, .request_timeout = 300ms});
  ASSERT_TRUE(store.ok()) << "opening is lazy";
  auto txn = (*store)->begin();
  ASSERT_TRUE(txn.ok());
  auto v = (*txn)->get("k");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kUnavailable) << v.status().to_string();
}

}  // namespace
}  // namespace kvq::testing
