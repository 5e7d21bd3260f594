// The group-commit batcher against the run's real etcd: members that would break
// serializability in one request never share one, independent members do, tokens are written
// once, and a request etcd refuses is sent again member by member without losing or doubling a
// commit.
#include "kv/etcd/commit_batcher.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/backends.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/temp_dir.h"

namespace kvq::kv::etcd {
namespace {

class CommitBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    prefix_ = "batcher-test/" + std::to_string(::getpid()) + "/" + std::to_string(n++) + "/";
    EtcdOptions options;
    options.endpoints = {testing::test_etcd_endpoint()};
    auto client = Client::create(options);
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    client_ = *client;
  }

  std::string key(const std::string& k) const { return prefix_ + k; }

  // The key's mod revision and value as etcd holds them now (0 and "" when absent).
  std::pair<int64_t, std::string> stored(const std::string& k) {
    etcdserverpb::RangeRequest request;
    request.set_key(key(k));
    etcdserverpb::RangeResponse response;
    EXPECT_TRUE(client_->range(request, &response).ok());
    if (response.kvs_size() == 0) return {0, ""};
    return {response.kvs(0).mod_revision(), response.kvs(0).value()};
  }
  int64_t version(const std::string& k) {
    etcdserverpb::RangeRequest request;
    request.set_key(key(k));
    etcdserverpb::RangeResponse response;
    EXPECT_TRUE(client_->range(request, &response).ok());
    return response.kvs_size() ? response.kvs(0).version() : 0;
  }
  void put(const std::string& k, const std::string& value) {
    etcdserverpb::TxnRequest txn;
    auto* p = txn.add_success()->mutable_request_put();
    p->set_key(key(k));
    p->set_value(value);
    etcdserverpb::TxnResponse response;
    ASSERT_TRUE(client_->txn(txn, &response).ok());
  }

  // Adds to `m` a put of `k`, and says that it writes it.
  void add_put(Member& m, const std::string& k, const std::string& value) {
    auto* p = m.txn.add_success()->mutable_request_put();
    p->set_key(key(k));
    p->set_value(value);
    m.written.push_back(Span::key(key(k)));
  }
  // Adds to `m` an EQUAL compare of `k`, and says that it compares it; the caller sets the target.
  etcdserverpb::Compare* add_compare(Member& m, const std::string& k) {
    auto* c = m.txn.add_compare();
    c->set_key(key(k));
    c->set_result(etcdserverpb::Compare::EQUAL);
    m.compared.push_back(Span::key(key(k)));
    return c;
  }

  // A member that compares `read` (at its mod revision now) and puts `write`.
  Member reads_then_writes(const std::string& read, const std::string& write,
                           const std::string& value) {
    Member m;
    auto* c = add_compare(m, read);
    c->set_target(etcdserverpb::Compare::MOD);
    c->set_mod_revision(stored(read).first);
    add_put(m, write, value);
    return m;
  }
  // A member that creates `k` if absent.
  Member creates(const std::string& k, const std::string& value = "v") {
    Member m;
    auto* c = add_compare(m, k);
    c->set_target(etcdserverpb::Compare::VERSION);
    c->set_version(0);
    add_put(m, k, value);
    return m;
  }

  static int successes(const std::vector<Result<Committed>>& results) {
    int n = 0;
    for (const auto& r : results) {
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (r.ok() && r->succeeded) ++n;
    }
    return n;
  }

  std::string prefix_;
  std::shared_ptr<Client> client_;
};

TEST_F(CommitBatcherTest, IndependentMembersGoInOneRequestWithTheirTokensWrittenOnce) {
  CommitBatcher batcher(client_, BatchLimits{});
  std::vector<Member> members;
  for (int i = 0; i < 10; ++i) {
    members.push_back(creates("job" + std::to_string(i)));
    members.back().tokens.emplace_back(key("token"), "t" + std::to_string(i));
  }
  auto results = batcher.commit_together(std::move(members));
  EXPECT_EQ(successes(results), 10);
  for (const auto& r : results) EXPECT_EQ(r->revision, results[0]->revision);
  auto counts = batcher.counts();
  EXPECT_EQ(counts.requests, 1u);
  EXPECT_EQ(counts.batched, 10u);
  EXPECT_EQ(version("token"), 1);  // once for all ten
  EXPECT_EQ(stored("token").first, results[0]->revision);
}

// A writes y after reading x, B writes x after reading y. One after the other, the second
// finds what it read changed; in one request both compares would see the state before either
// write, and both would commit (write skew).
TEST_F(CommitBatcherTest, MembersThatWouldWriteSkewNeverShareARequest) {
  put("x", "0");
  put("y", "0");
  CommitBatcher batcher(client_, BatchLimits{});
  std::vector<Member> members;
  members.push_back(reads_then_writes("x", "y", "A"));
  members.push_back(reads_then_writes("y", "x", "B"));
  auto results = batcher.commit_together(std::move(members));
  EXPECT_EQ(successes(results), 1);
  EXPECT_EQ(batcher.counts().requests, 2u);
  EXPECT_GE(batcher.counts().kept_apart, 1u);
}

// Both read the empty range [r/, r0) and insert into it: only one may, as if serial.
TEST_F(CommitBatcherTest, MembersThatWouldInsertPhantomsNeverShareARequest) {
  put("before", "-");  // a revision to compare against
  const int64_t revision = stored("before").first;
  CommitBatcher batcher(client_, BatchLimits{});
  std::vector<Member> members;
  for (const char* k : {"r/a", "r/b"}) {
    Member m;
    auto* c = m.txn.add_compare();
    c->set_key(key("r/"));
    c->set_range_end(key("r0"));
    c->set_target(etcdserverpb::Compare::MOD);
    c->set_result(etcdserverpb::Compare::LESS);
    c->set_mod_revision(revision + 1);
    m.compared.push_back(Span{key("r/"), key("r0")});
    add_put(m, k, "v");
    members.push_back(std::move(m));
  }
  auto results = batcher.commit_together(std::move(members));
  EXPECT_EQ(successes(results), 1);
  EXPECT_EQ(batcher.counts().requests, 2u);
}

// etcd refuses a request that writes one key twice even when one member would fail; and a
// member that compares a token another touches would be judged before that write.
TEST_F(CommitBatcherTest, MembersWritingOneKeyOrComparingATokenAnotherTouchesGoApart) {
  put("token", "t0");
  CommitBatcher batcher(client_, BatchLimits{});
  std::vector<Member> members;
  members.push_back(creates("same", "1"));
  Member blind;
  add_put(blind, "same", "2");
  members.push_back(std::move(blind));
  members.push_back(reads_then_writes("token", "other", "v"));
  members.push_back(creates("third"));
  members.back().tokens.emplace_back(key("token"), "t1");
  auto results = batcher.commit_together(std::move(members));
  ASSERT_EQ(results.size(), 4u);
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(results[0]->succeeded);
  EXPECT_TRUE(results[1]->succeeded);
  EXPECT_EQ(stored("same").second, "2");  // the blind put came after the create
  // The token's reader came before the toucher, or saw its change: never both in one request.
  EXPECT_TRUE(results[3]->succeeded);
  EXPECT_NE(results[2]->revision, results[3]->revision);
  EXPECT_GE(batcher.counts().kept_apart, 2u);
}

TEST_F(CommitBatcherTest, AFailedMembersTokensAreWrittenAndTheOthersCommit) {
  put("taken", "x");
  CommitBatcher batcher(client_, BatchLimits{});
  std::vector<Member> members;
  members.push_back(creates("taken"));  // fails: it exists
  members.back().tokens.emplace_back(key("token"), "from-the-failed-one");
  members.push_back(creates("free"));
  auto results = batcher.commit_together(std::move(members));
  ASSERT_TRUE(results[0].ok() && results[1].ok());
  EXPECT_FALSE(results[0]->succeeded);
  EXPECT_TRUE(results[1]->succeeded);
  EXPECT_EQ(stored("taken").second, "x");
  EXPECT_EQ(stored("token").second, "from-the-failed-one");  // a spurious wake-up, by design
  EXPECT_EQ(batcher.counts().requests, 1u);
}

// Three members of 600 KB each: together over etcd's --max-request-bytes (1.5 MiB), which the
// batcher was told is larger. etcd refuses the request before applying any of it; each member
// then commits once on its own.
TEST_F(CommitBatcherTest, ARefusedRequestIsSentAgainMemberByMemberWithoutLosingOrDoubling) {
  CommitBatcher batcher(client_, BatchLimits{.max_bytes = 64 << 20});
  std::vector<Member> members;
  for (int i = 0; i < 3; ++i)
    members.push_back(creates("big" + std::to_string(i), std::string(600'000, 'b')));
  auto results = batcher.commit_together(std::move(members));
  EXPECT_EQ(successes(results), 3);
  auto counts = batcher.counts();
  EXPECT_EQ(counts.refused, 1u);
  EXPECT_EQ(counts.requests, 4u);  // the refused one, then one each
  for (int i = 0; i < 3; ++i) EXPECT_EQ(version("big" + std::to_string(i)), 1);
}

// Within the default limits the batcher never sends what etcd refuses: 100 members with their
// own tokens exceed 128 outer operations, so they go in more than one request.
TEST_F(CommitBatcherTest, BatchesStayWithinTheOperationLimit) {
  CommitBatcher batcher(client_, BatchLimits{.max_members = 1000});
  std::vector<Member> members;
  for (int i = 0; i < 100; ++i) {
    members.push_back(creates("op" + std::to_string(i)));
    members.back().tokens.emplace_back(key("tok" + std::to_string(i)), "t");
  }
  auto results = batcher.commit_together(std::move(members));
  EXPECT_EQ(successes(results), 100);
  auto counts = batcher.counts();
  EXPECT_EQ(counts.refused, 0u);
  EXPECT_EQ(counts.requests, 2u);  // 64 + 36 members and tokens: 128, then 72 operations
}

// How many requests a batcher has under way is seen while a 1-member cluster of the test's own
// is paused: what was sent waits there, and counts() says what was sent.
class CommitBatcherInFlightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ready()) << "etcd did not start (logs in " << dir_.path() << ")";
    EtcdOptions options;
    options.endpoints = {cluster_.endpoint(0)};
    // Paused for a while on purpose: not a member to leave.
    options.member_check_after = std::chrono::seconds(30);
    options.request_timeout = std::chrono::seconds(30);
    options.prefer_leader = false;
    auto client = Client::create(options);
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    batcher_.emplace(*client, BatchLimits{});
  }

  static Member puts(const std::string& k) {
    Member m;
    auto* p = m.txn.add_success()->mutable_request_put();
    p->set_key("in-flight/" + k);
    p->set_value("v");
    m.written.push_back(Span::key("in-flight/" + k));
    return m;
  }
  // Waits up to 5 s for `n` requests under way.
  bool under_way(uint64_t n) {
    for (int i = 0; i < 500 && batcher_->counts().under_way < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return batcher_->counts().under_way >= n;
  }

  testing::TempDir dir_;
  testing::EtcdCluster cluster_{dir_.path(), 1};
  std::optional<CommitBatcher> batcher_;
};

// Under light load a commit does not wait for the request under way: behind a request of one
// member (one producer's add, say), a lone commit goes at once as a second request, where
// waiting would cost it a whole Raft round it does not share.
TEST_F(CommitBatcherInFlightTest, ALoneCommitBehindALightRequestIsSentAtOnce) {
  ASSERT_TRUE(cluster_.pause(0)) << "the member's threads did not all stop";
  std::optional<Result<Committed>> first, second;
  std::thread a([&] { first = batcher_->commit(puts("a")); });
  EXPECT_TRUE(under_way(1));
  std::thread b([&] { second = batcher_->commit(puts("b")); });
  EXPECT_TRUE(under_way(2)) << "the second commit waited for the first request";
  cluster_.resume(0);
  a.join();
  b.join();
  ASSERT_TRUE(first->ok()) << first->status().to_string();
  ASSERT_TRUE(second->ok()) << second->status().to_string();
  EXPECT_TRUE((*first)->succeeded);
  EXPECT_TRUE((*second)->succeeded);
  EXPECT_EQ(batcher_->counts().requests, 2u);
}

// Under heavy load it does: behind a request of several members, a commit waits and goes with
// the others that came meanwhile, so that Raft rounds stay shared.
TEST_F(CommitBatcherInFlightTest, ACommitBehindAHeavyRequestWaitsForIt) {
  ASSERT_TRUE(cluster_.pause(0)) << "the member's threads did not all stop";
  std::vector<Result<Committed>> together;
  std::optional<Result<Committed>> later;
  std::thread a([&] { together = batcher_->commit_together({puts("a"), puts("b")}); });
  EXPECT_TRUE(under_way(1));
  std::thread b([&] { later = batcher_->commit(puts("c")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(batcher_->counts().under_way, 1u) << "a second request while a heavy one was under way";
  cluster_.resume(0);
  a.join();
  b.join();
  ASSERT_EQ(together.size(), 2u);
  for (const auto& r : together) ASSERT_TRUE(r.ok() && r->succeeded) << r.status().to_string();
  ASSERT_TRUE(later->ok() && (*later)->succeeded);
  EXPECT_EQ(batcher_->counts().requests, 2u);
}

// commit_async holds no thread: behind a heavy request held by a paused member, asynchronous
// commits return at once and wait in the queue; the end of the request under way sends them,
// together, from gRPC's thread, and each gets its outcome once.
TEST_F(CommitBatcherInFlightTest, AsyncCommitsReturnAtOnceAndGoTogetherWhenTheRequestUnderWayEnds) {
  ASSERT_TRUE(cluster_.pause(0)) << "the member's threads did not all stop";
  std::vector<Result<Committed>> together;
  std::thread a([&] { together = batcher_->commit_together({puts("a"), puts("b")}); });
  EXPECT_TRUE(under_way(1));
  constexpr int kAsync = 5;
  util::Mutex mu;
  util::CondVar cv;
  std::vector<Result<Committed>> outcomes;
  for (int i = 0; i < kAsync; ++i) {
    // Returns while the member is paused: nothing here waits for etcd.
    batcher_->commit_async(puts("async-" + std::to_string(i)), [&](Result<Committed> r) {
      util::MutexLock lock(mu);
      outcomes.push_back(std::move(r));
      cv.notify_all();
    });
  }
  EXPECT_EQ(batcher_->counts().under_way, 1u) << "an async commit went beside the heavy request";
  cluster_.resume(0);
  a.join();
  {
    util::MutexLock lock(mu);
    while (outcomes.size() < kAsync) {
      if (!cv.wait_for(mu, std::chrono::seconds(30))) break;
    }
    ASSERT_EQ(outcomes.size(), size_t{kAsync}) << "an async commit never got its outcome";
  }
  for (const auto& r : outcomes) ASSERT_TRUE(r.ok() && r->succeeded) << r.status().to_string();
  for (const auto& r : together) ASSERT_TRUE(r.ok() && r->succeeded) << r.status().to_string();
  const auto counts = batcher_->counts();
  EXPECT_EQ(counts.requests, 2u) << "the waiting async commits did not share one request";
  EXPECT_EQ(counts.members, 2u + kAsync);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  util::MutexLock lock(mu);
  EXPECT_EQ(outcomes.size(), size_t{kAsync}) << "an async commit got its outcome twice";
}

}  // namespace
}  // namespace kvq::kv::etcd
