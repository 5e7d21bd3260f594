// What only the etcd backend has to get right: compacted history, and the URL format.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/etcd_cluster.h"
#include "support/kv_helpers.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;

// Makes etcd's history compacted up to `revision` with Debian's etcdctl. Tests share one etcd
// and run in parallel, so another may have compacted past `revision` already: etcd then refuses
// ("required revision has been compacted"), and the history is compacted all the same.
bool compact_now(const std::string& endpoint, uint64_t revision) {
  const std::string cmd = "ETCDCTL_API=3 etcdctl --endpoints=" + endpoint + " compaction " +
                          std::to_string(revision) + " 2>&1";
  std::string said;
  const int status = run_command(cmd, said);
  return status == 0 || said.find("required revision has been compacted") != std::string::npos;
}

TEST(EtcdStoreTest, AWatchWhoseHistoryWasCompactedStillSeesTheChange) {
  TempDir dir;
  auto store =
      open_etcd_store({.endpoints = {test_etcd_endpoint()}, .key_prefix = dir.path() + "/"});
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
  auto store =
      open_etcd_store({.endpoints = {test_etcd_endpoint()}, .key_prefix = dir.path() + "/"});
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
  EXPECT_EQ(stale.status().code(), Code::kAborted)
      << "retryable, so kv::run starts over: " << stale.status().to_string();
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

// A 1-member cluster of the test's own (so that pausing it or counting its calls sees this
// test alone) and a store on it.
class EtcdOneMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ready()) << "etcd did not start (logs in " << dir_.path() << ")";
    auto opened = open_etcd_store({.endpoints = {cluster_.endpoint(0)}, .key_prefix = "p/"});
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    store_ = *opened;
  }
  EtcdCluster& cluster() { return cluster_; }
  kv::Store& store() { return *store_; }
  std::shared_ptr<kv::Store> store_ptr() { return store_; }
  // Another store handle on the same member and prefix: another process's view, sharing
  // nothing this handle remembers.
  Result<std::shared_ptr<kv::Store>> other_store() {
    return open_etcd_store({.endpoints = {cluster().endpoint(0)}, .key_prefix = "p/"});
  }
  // Puts `first` at `key`, which this store handle then reads and remembers
  // (kv::ReadOptions::remembered), and changes it to `second` through another handle: what
  // this handle remembers is out of date.
  void remember_then_change_elsewhere(const std::string& key, const std::string& first,
                                      const std::string& second) {
    put(store(), key, first);
    {
      auto txn = begin(store());
      txn->allow_stale_reads();
      ASSERT_EQ(*txn->get(key, {.remembered = true}), first);  // read, and remembered
    }
    auto other = other_store();
    ASSERT_TRUE(other.ok()) << other.status().to_string();
    put(**other, key, second);
  }

 private:
  TempDir dir_;
  EtcdCluster cluster_{dir_.path(), 1};
  std::shared_ptr<kv::Store> store_;
};

// A key read twice in one transaction is fetched once: at the transaction's revision its value
// cannot differ, so the second read (get or get_many) answers from what the first fetched, and
// answers even while the member does not.
TEST_F(EtcdOneMemberTest, AKeyReadAgainInATransactionCostsNoRoundTrip) {
  put(store(), "k", "v");
  put(store(), "j", "w");
  auto txn = begin(store());
  ASSERT_EQ(*txn->get("k"), "v");
  ASSERT_EQ(*txn->get_many({"j", "absent"}), (std::vector<std::optional<std::string>>{"w", {}}));
  ASSERT_TRUE(cluster().pause(0)) << "the member's threads did not all stop";
  const auto started = kv::Clock::now();
  auto again = txn->get("k", {.snapshot = true});
  auto many = txn->get_many({"absent", "k", "j"});
  const auto took = kv::Clock::now() - started;
  cluster().resume(0);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(*again, "v");
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  EXPECT_EQ(*many, (std::vector<std::optional<std::string>>{{}, "v", "w"}));
  EXPECT_LT(took, 200ms) << "a read went to the paused member";
  txn->set("k", "v2");  // the reads still guard the commit as the first ones did
  EXPECT_TRUE(txn->commit().ok());
  EXPECT_EQ(read(store(), "k"), "v2");
}

// A range prefetched with keys is read from what the prefetch fetched: one round trip for all.
TEST_F(EtcdOneMemberTest, APrefetchedRangeCostsNoRoundTripOfItsOwn) {
  put(store(), "k", "v");
  put(store(), "q/1", "a");
  put(store(), "q/2", "b");
  auto txn = begin(store());
  txn->prefetch({"k"}, {{"q/", "q0", {.limit = 1, .snapshot = true}}});
  ASSERT_TRUE(cluster().pause(0)) << "the member's threads did not all stop";
  const auto started = kv::Clock::now();
  // Asked for again before it is read (two plans of one look): nothing more is fetched.
  txn->prefetch({"k"}, {{"q/", "q0", {.limit = 1, .snapshot = true}}});
  auto key = txn->get("k");
  auto range = txn->get_range("q/", "q0", {.limit = 1, .snapshot = true});
  const auto took = kv::Clock::now() - started;
  cluster().resume(0);
  ASSERT_TRUE(key.ok()) << key.status().to_string();
  EXPECT_EQ(*key, "v");
  ASSERT_TRUE(range.ok()) << range.status().to_string();
  ASSERT_EQ(range->size(), 1u);
  EXPECT_EQ((*range)[0].key, "q/1");
  EXPECT_LT(took, 200ms) << "a read went to the paused member";
}

// Issue 23: an accept that takes several jobs in order reads their rows in one call, not one
// Range each (the acceptor's rounds serve many waiting workers at once, and each round trip
// held them all up). Counted by the member itself; nothing else runs on this cluster, and the
// Jobs runs no background work that reads.
TEST_F(EtcdOneMemberTest, AnAcceptOfSeveralJobsReadsTheirRowsInOneCall) {
  auto jobs =
      jobs::Jobs::open(store_ptr(), {.run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  ASSERT_TRUE((*jobs)->set_type_timeout("work", 60s).ok());
  constexpr size_t kJobs = 8;
  for (size_t i = 0; i < kJobs; ++i)
    ASSERT_TRUE((*jobs)->add("work", "j" + std::to_string(i), "{}").ok());
  const long ranges_before = cluster().handled(0, "Range");
  ASSERT_GE(ranges_before, 0) << "etcd's /metrics could not be read";
  auto taken = (*jobs)->accept_many("work", kJobs, {});
  const long ranges = cluster().handled(0, "Range") - ranges_before;
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  ASSERT_EQ(taken->size(), kJobs);
  for (size_t i = 0; i < kJobs; ++i) EXPECT_EQ((*taken)[i].id, "j" + std::to_string(i));
  // The queue's head and the settings take a few reads; a read per row would be 8 more.
  EXPECT_LT(ranges, static_cast<long>(kJobs)) << ranges << " Range calls for one accept";
}

// Issue 23: an add of a new job guesses its reads (kv::ReadOptions): the type's settings as
// this store handle remembers them, the job's row as absent. So it costs etcd its commit and
// no read; the commit checks both guesses. Counted by the member itself.
TEST_F(EtcdOneMemberTest, AnAddOfANewJobMakesNoReadOfItsOwn) {
  auto jobs =
      jobs::Jobs::open(store_ptr(), {.run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  ASSERT_TRUE((*jobs)->set_type_timeout("work", 60s).ok());
  ASSERT_TRUE((*jobs)->add("work", "first", "{}").ok());  // reads the settings, remembers them
  const long ranges_before = cluster().handled(0, "Range");
  const long txns_before = cluster().handled(0, "Txn");
  ASSERT_GE(ranges_before, 0) << "etcd's /metrics could not be read";
  auto added = (*jobs)->add("work", "second", "{\"n\": 2}");
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_TRUE(added->added);
  EXPECT_EQ(cluster().handled(0, "Range") - ranges_before, 0);
  EXPECT_EQ(cluster().handled(0, "Txn") - txns_before, 1) << "the commit alone";
  auto info = (*jobs)->get("work", "second");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->data, "{\"n\":2}");
}

// An add through add_async holds no thread while etcd answers (EtcdOptions::
// async_transactions): with the member paused, a first add, whose read of the type's settings
// is deferred and fetched, and a second, which only commits, both return at once; the store
// says that their callbacks are still to come until the member resumes, and then each add
// applies once, with its reads and commit in three calls.
TEST_F(EtcdOneMemberTest, AsyncAddsHoldNoThreadWhileTheMemberIsPausedAndApplyOnceAfter) {
  {
    auto setup =
        jobs::Jobs::open(store_ptr(), {.run_activity_monitor = false, .run_scheduler = false});
    ASSERT_TRUE(setup.ok()) << setup.status().to_string();
    ASSERT_TRUE((*setup)->set_type_timeout("work", 60s).ok());
  }
  auto fresh = other_store();  // remembers nothing: the first add must read the settings
  ASSERT_TRUE(fresh.ok()) << fresh.status().to_string();
  ASSERT_TRUE((*fresh)->replays_bodies());
  auto jobs = jobs::Jobs::open(*fresh, {.run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  const long txns_before = cluster().handled(0, "Txn");
  const long ranges_before = cluster().handled(0, "Range");
  ASSERT_TRUE(cluster().pause(0)) << "the member's threads did not all stop";
  std::promise<Result<jobs::AddResult>> first, second;
  const auto started = std::chrono::steady_clock::now();
  (*jobs)->add_async("work", "a", "{}", {}, [&](Result<jobs::AddResult> r) { first.set_value(r); });
  (*jobs)->add_async("work", "b", "{}", {},
                     [&](Result<jobs::AddResult> r) { second.set_value(r); });
  EXPECT_LT(std::chrono::steady_clock::now() - started, 200ms) << "add_async waited for etcd";
  EXPECT_FALSE((*fresh)->wait_for_callbacks(kv::Clock::now() + 300ms))
      << "the store said no callback was to come while the member was paused";
  cluster().resume(0);
  EXPECT_TRUE((*fresh)->wait_for_callbacks(kv::Clock::now() + 10s));
  for (auto* added : {&first, &second}) {
    auto future = added->get_future();
    ASSERT_EQ(future.wait_for(0s), std::future_status::ready) << "a callback came after the wait";
    auto r = future.get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->added);
  }
  // Each add's body ran before either read came back: each read the settings (one call, its
  // runs after that read nothing new) and committed (one call, or one for both): four at most.
  const long calls =
      cluster().handled(0, "Txn") - txns_before + cluster().handled(0, "Range") - ranges_before;
  EXPECT_LE(calls, 4) << "the deferred reads cost more than one round trip each";
  for (const char* id : {"a", "b"}) {
    auto info = (*jobs)->get("work", id);
    ASSERT_TRUE(info.ok()) << id << ": " << info.status().to_string();
  }
}

// The guesses are checked by the commit: with the type's settings changed by another process
// (its own store handle) and the job already there, the add still replaces the job, once.
TEST_F(EtcdOneMemberTest, AnAddWhoseGuessesAreWrongStillAddsOnce) {
  auto jobs =
      jobs::Jobs::open(store_ptr(), {.run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  ASSERT_TRUE((*jobs)->set_type_timeout("work", 60s).ok());
  ASSERT_TRUE((*jobs)->add("work", "j", "{\"v\": 1}").ok());
  auto other_handle = other_store();
  ASSERT_TRUE(other_handle.ok()) << other_handle.status().to_string();
  auto other =
      jobs::Jobs::open(*other_handle, {.run_activity_monitor = false, .run_scheduler = false});
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  ASSERT_TRUE((*other)->set_type_timeout("work", 5s).ok());
  auto again = (*jobs)->add("work", "j", "{\"v\": 2}");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_TRUE(again->added);
  auto info = (*other)->get("work", "j");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->data, "{\"v\":2}");
  auto pending = (*other)->pending_count("work");
  ASSERT_TRUE(pending.ok()) << pending.status().to_string();
  EXPECT_EQ(*pending, 1u) << "the add doubled the job";
}

// A remembered value (kv::ReadOptions::remembered) answers without a call; one that another
// store handle changed since fails the commit, and is then read again.
TEST_F(EtcdOneMemberTest, ARememberedValueChangedElsewhereFailsTheCommitAndIsReadAgain) {
  put(store(), "settings", "s1");
  auto remembered = [&]() -> std::optional<std::string> {
    auto txn = begin(store());
    txn->allow_stale_reads();
    auto value = txn->get("settings", {.remembered = true});
    return value.ok() ? *value : std::optional<std::string>("error: " + value.status().to_string());
  };
  ASSERT_EQ(remembered(), "s1");  // read, and remembered
  auto other = other_store();
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  put(**other, "settings", "s2");

  const long ranges_before = cluster().handled(0, "Range");
  const long txns_before = cluster().handled(0, "Txn");
  auto txn = begin(store());
  txn->allow_stale_reads();
  auto guessed = txn->get("settings", {.remembered = true});
  ASSERT_TRUE(guessed.ok()) << guessed.status().to_string();
  EXPECT_EQ(*guessed, "s1") << "remembered, not read";
  EXPECT_EQ(cluster().handled(0, "Range") - ranges_before, 0);
  EXPECT_EQ(cluster().handled(0, "Txn") - txns_before, 0);
  txn->set("x", "1");
  Status s = txn->commit();
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  EXPECT_EQ(read(store(), "x"), std::nullopt) << "a failed commit must change nothing";
  EXPECT_EQ(remembered(), "s2") << "a failed guess is forgotten, and read again";
}

// A transaction that guessed and writes nothing still has its guesses checked when it commits:
// an answer decided on a remembered value that another handle changed since does not stand.
TEST_F(EtcdOneMemberTest, AGuessOfATransactionThatWritesNothingIsStillChecked) {
  ASSERT_NO_FATAL_FAILURE(remember_then_change_elsewhere("settings", "s1", "s2"));
  auto txn = begin(store());
  txn->allow_stale_reads();
  ASSERT_EQ(*txn->get("settings", {.remembered = true}), "s1");  // the guess
  Status s = txn->commit();
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  auto again = begin(store());
  again->allow_stale_reads();
  EXPECT_EQ(*again->get("settings", {.remembered = true}), "s2")
      << "a failed guess is forgotten, and read again";
  EXPECT_TRUE(again->commit().ok());
}

// What a commit writes to a key it assumed absent is remembered: the next transaction of the
// handle that guesses the key finds it without a call.
TEST_F(EtcdOneMemberTest, WhatACommitWritesToAKeyAssumedAbsentIsRemembered) {
  {
    auto txn = begin(store());
    txn->allow_stale_reads();
    ASSERT_EQ(*txn->get("row", {.assume_absent = true}), std::nullopt);
    txn->set("row", "v1");
    ASSERT_TRUE(txn->commit().ok());
  }
  const long ranges_before = cluster().handled(0, "Range");
  const long txns_before = cluster().handled(0, "Txn");
  ASSERT_GE(ranges_before, 0) << "etcd's /metrics could not be read";
  auto txn = begin(store());
  txn->allow_stale_reads();
  EXPECT_EQ(*txn->get("row", {.remembered = true}), "v1");
  EXPECT_EQ(cluster().handled(0, "Range") - ranges_before, 0);
  EXPECT_EQ(cluster().handled(0, "Txn") - txns_before, 0);
  txn->set("row", "v2");
  ASSERT_TRUE(txn->commit().ok()) << "the guess holds: the row is as this handle wrote it";
  EXPECT_EQ(read(store(), "row"), "v2");
}

// The jobs layer on `store`, without its background threads.
auto open_jobs(std::shared_ptr<kv::Store> store) {
  return jobs::Jobs::open(std::move(store),
                          {.run_activity_monitor = false, .run_scheduler = false});
}

// Job "j" of a type "work", added and taken through `jobs`.
Result<jobs::Job> added_and_taken(jobs::Jobs& jobs) {
  KVQ_RETURN_IF_ERROR(jobs.set_type_timeout("work", 60s));
  KVQ_RETURN_IF_ERROR(jobs.add("work", "j", "{}").status());
  return jobs.accept("work", {.timeout = 5s});
}

// A worker's finish on the store handle that added and took its job reads nothing: the row is
// as that handle's accept wrote it. Counted by the member itself.
TEST_F(EtcdOneMemberTest, AFinishOnTheHandleThatTookTheJobReadsNothing) {
  auto jobs = open_jobs(store_ptr());
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  auto job = added_and_taken(**jobs);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  const long ranges_before = cluster().handled(0, "Range");
  const long txns_before = cluster().handled(0, "Txn");
  ASSERT_GE(ranges_before, 0) << "etcd's /metrics could not be read";
  Status finished = (*jobs)->finish(*job);
  ASSERT_TRUE(finished.ok()) << finished.to_string();
  EXPECT_EQ(cluster().handled(0, "Range") - ranges_before, 0);
  EXPECT_EQ(cluster().handled(0, "Txn") - txns_before, 1) << "the commit alone";
  auto info = (*jobs)->get("work", "j");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, jobs::State::kFinished);
}

// A worker whose job another process removed meanwhile is fenced out, although its handle
// still remembers the row as its accept wrote it: the finish's commit checks the guess, fails,
// and the call reads the row again. The job stays removed.
TEST_F(EtcdOneMemberTest, AFinishOnARememberedRowChangedElsewhereIsFencedOut) {
  auto jobs = open_jobs(store_ptr());
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  auto job = added_and_taken(**jobs);
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  auto other_handle = other_store();
  ASSERT_TRUE(other_handle.ok()) << other_handle.status().to_string();
  auto other = open_jobs(*other_handle);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  ASSERT_TRUE((*other)->remove("work", "j").ok());
  Status finished = (*jobs)->finish(*job);
  EXPECT_EQ(finished.code(), Code::kFailedPrecondition) << finished.to_string();
  auto info = (*other)->get("work", "j");
  EXPECT_EQ(info.status().code(), Code::kNotFound) << "the finish brought the removed job back";
}

// A prefetch for reads that will guess (kv::ReadOptions::remembered) leaves out the keys the
// handle remembers: they are answered from its memory (here older than what etcd holds, as
// another handle changed it since; the commit then fails), the others from what it fetched.
TEST_F(EtcdOneMemberTest, APrefetchForGuessingReadsFetchesOnlyWhatIsNotRemembered) {
  put(store(), "a", "1");
  put(store(), "b", "2");
  ASSERT_NO_FATAL_FAILURE(remember_then_change_elsewhere("known", "k1", "k2"));
  const long ranges_before = cluster().handled(0, "Range");
  const long txns_before = cluster().handled(0, "Txn");
  ASSERT_GE(ranges_before, 0) << "etcd's /metrics could not be read";
  auto txn = begin(store());
  ASSERT_TRUE(txn->allow_stale_reads());
  txn->prefetch({"known", "a", "b"}, {}, {.remembered = true});
  EXPECT_EQ(*txn->get("known", {.remembered = true}), "k1") << "answered from memory, not fetched";
  EXPECT_EQ(*txn->get("a", {.remembered = true}), "1");
  EXPECT_EQ(*txn->get("b", {.remembered = true}), "2");
  EXPECT_EQ(cluster().handled(0, "Range") - ranges_before, 0);
  EXPECT_EQ(cluster().handled(0, "Txn") - txns_before, 1) << "one read of a and b together";
  txn->set("x", "1");
  EXPECT_EQ(txn->commit().code(), Code::kAborted) << "the guess of 'known' is checked";
}

// Issue 23: the round that serves a waiting accept takes the row of a job this store handle
// added as the handle remembers it (kv::ReadOptions::remembered), without a read of its own.
// Counted by the member itself.
TEST_F(EtcdOneMemberTest, AWaitingAcceptTakesAJobThisHandleAddedWithoutReadingItsRow) {
  auto jobs = open_jobs(store_ptr());
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  // A type no other test here uses, so that nothing else of the store's shapes its reads (a
  // Jobs remembers where each queue's head was, jobs/accept/index_levels.h).
  ASSERT_TRUE((*jobs)->set_type_timeout("rows", 60s).ok());
  // An add reads the type's settings once, then remembers them.
  ASSERT_TRUE((*jobs)->add("rows", "warm-up", "{}").ok());
  ASSERT_TRUE((*jobs)->remove("rows", "warm-up").ok());
  auto waiting =
      std::async(std::launch::async, [&] { return (*jobs)->accept("rows", {.timeout = 10s}); });
  // Its look found nothing, and the accept waiters' round that arms its watch is over, once the
  // member has handled no call for 300 ms (a fixed pause lost that race on a loaded machine:
  // the round's reads then counted as the add's).
  long ranges_before = -1;
  long txns_before = -1;
  for (auto give_up = kv::Clock::now() + 10s; kv::Clock::now() < give_up;) {
    const long ranges = cluster().handled(0, "Range");
    const long txns = cluster().handled(0, "Txn");
    if (ranges == ranges_before && txns == txns_before) break;
    ranges_before = ranges;
    txns_before = txns;
    std::this_thread::sleep_for(300ms);
  }
  // Counted from before the add (the waiter may be served before the add returns): the add's
  // commit, the round's first read and its commit, and no read of the row.
  ASSERT_GE(ranges_before, 0) << "etcd's /metrics could not be read";
  ASSERT_TRUE((*jobs)->add("rows", "j", "{\"v\": 1}").ok());  // remembers the row it wrote
  auto job = waiting.get();
  const long ranges = cluster().handled(0, "Range") - ranges_before;
  const long txns = cluster().handled(0, "Txn") - txns_before;
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  EXPECT_EQ(job->data, "{\"v\":1}");
  EXPECT_EQ(ranges, 0) << "the round read the row its handle had just written";
  EXPECT_EQ(txns, 3) << "the add's commit, the round's first read and its commit";
}

// A remembered row that another process changed since is not trusted: one whose index entry
// moved (a new scheduled time) is read again before the job is taken, and one that changed
// otherwise fails the round's commit, which then reads it. Either way the waiting accept gets
// the job as it is now, and takes it once.
TEST_F(EtcdOneMemberTest, AWaitingAcceptWhoseRememberedRowIsOutOfDateTakesTheJobAsItIs) {
  auto jobs = open_jobs(store_ptr());
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  ASSERT_TRUE((*jobs)->set_type_timeout("work", 60s).ok());
  auto other_handle = other_store();
  ASSERT_TRUE(other_handle.ok()) << other_handle.status().to_string();
  auto other = open_jobs(*other_handle);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t later = now + 2500;
  // Remembered by this handle as pending, due later: "moved" in an hour, "changed" at `later`.
  ASSERT_TRUE(
      (*jobs)->add("work", "moved", "{\"v\": 1}", {.scheduled_time_ms = now + 3600'000}).ok());
  ASSERT_TRUE((*jobs)->add("work", "changed", "{\"v\": 1}", {.scheduled_time_ms = later}).ok());
  auto waiting =
      std::async(std::launch::async, [&] { return (*jobs)->accept("work", {.timeout = 10s}); });
  std::this_thread::sleep_for(300ms);  // its look found nothing due: it waits
  // Elsewhere: "moved" becomes due now (its index entry is no longer where this handle's row
  // would put it); then "changed" gets new data, still due at `later` (its entry stays).
  ASSERT_TRUE((*other)->add("work", "moved", "{\"v\": 2}", {.scheduled_time_ms = now}).ok());
  auto first = waiting.get();
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->id, "moved");
  EXPECT_EQ(first->data, "{\"v\":2}");
  ASSERT_TRUE((*other)->add("work", "changed", "{\"v\": 2}", {.scheduled_time_ms = later}).ok());
  auto second = (*jobs)->accept("work", {.timeout = 10s});
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(second->id, "changed");
  EXPECT_EQ(second->data, "{\"v\":2}");
  for (const char* id : {"moved", "changed"}) {
    auto info = (*other)->get("work", id);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info->state, jobs::State::kRunning) << id;
    EXPECT_EQ(info->attempts, 1u) << id << " was taken more than once";
  }
}

// A 3-member cluster of the test's own, and the index of a follower, which cut_off() leaves
// without both other members (paused), so that it can answer nothing that needs a quorum.
class EtcdFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ready()) << "a 3-member etcd did not start (logs in " << dir_.path()
                                  << ")";
    const int leader = cluster_.leader();
    ASSERT_GE(leader, 0) << "etcdctl endpoint status named no leader";
    follower_ = leader == 0 ? 1 : 0;
  }
  void TearDown() override { reconnect(); }
  // A store that talks to the follower only.
  Result<std::shared_ptr<kv::Store>> on_follower(bool serializable_first_reads = true) {
    return open_etcd_store({.endpoints = {cluster_.endpoint(follower_)},
                            .key_prefix = dir_.path() + "/",
                            .prefer_leader = false,
                            .serializable_first_reads = serializable_first_reads});
  }
  void cut_off() {
    for (size_t i = 0; i < cluster_.size(); ++i) {
      if (i == follower_) continue;
      ASSERT_TRUE(cluster_.pause(i)) << "member " << i << " did not stop";
    }
  }
  void reconnect() {
    for (size_t i = 0; i < cluster_.size(); ++i) {
      if (i != follower_) cluster_.resume(i);
    }
  }
  EtcdCluster& cluster() { return cluster_; }
  size_t follower() const { return follower_; }

 private:
  TempDir dir_;
  EtcdCluster cluster_{dir_.path(), 3};
  size_t follower_ = 0;
};

// Issue 17: a member that stops answering (SIGSTOP: its connections stay open, nothing comes
// back) must cost kvq about member_check_after + member_check_timeout (1 s by default), not the
// 5 s request timeout — for reads, commits and watches. The followers come first in the
// endpoint list, so pausing the one kvq talks to measures kvq's own failover, not an election.
// Issue 23: a transaction that allows stale reads has its first read served by the member alone
// (serializable); any other keeps etcd's quorum round (linearizable). Shown on a follower cut
// off from both other members: only the first kind can read there.
TEST_F(EtcdFollowerTest, OnlyATransactionThatAllowsStaleReadsReadsWithoutAQuorum) {
  auto store = on_follower(true);
  auto linearizable_only = on_follower(false);
  ASSERT_TRUE(store.ok() && linearizable_only.ok());
  put(**store, "k", "1");
  EXPECT_EQ(read(**store, "k"), "1");  // the follower has applied it

  cut_off();
  auto stale_ok = begin(**store);
  EXPECT_TRUE(stale_ok->allow_stale_reads());
  auto got = stale_ok->get("k");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, "1");
  auto current = begin(**store);
  EXPECT_FALSE(current->get("k").ok()) << "a linearizable read needs a quorum";
  auto option_off = begin(**linearizable_only);
  EXPECT_FALSE(option_off->allow_stale_reads());
  EXPECT_FALSE(option_off->get("k").ok())
      << "serializable_first_reads = false keeps it linearizable";
}

// An add's reads may be served by the member alone too (its commit checks them), but an answer
// it gives without a write must come from a current read: on a follower cut off from its
// quorum, an add cannot commit (its first attempt guesses its reads; the attempts after it read,
// and the member answers those reads), and an add to a type that does not exist does not answer
// kNoTimeout from what the member alone knows.
TEST_F(EtcdFollowerTest, AnAddReadsWithoutAQuorumButAnswersWithoutAWriteOnlyOnACurrentRead) {
  auto store = on_follower();
  ASSERT_TRUE(store.ok());
  auto jobs = jobs::Jobs::open(
      *store, {.run_activity_monitor = false, .retry = {.timeout = 3s}, .run_scheduler = false});
  ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
  ASSERT_TRUE((*jobs)->set_type_timeout("work", 60s).ok());
  ASSERT_TRUE((*jobs)->add("work", "before", "{}").ok());  // the follower has the type

  cut_off();
  auto reads_served = [&] {
    return cluster().handled(follower(), "Txn", "OK") +
           cluster().handled(follower(), "Range", "OK");
  };
  const long served_before = reads_served();
  ASSERT_GE(cluster().handled(follower(), "Txn", "OK"), 0) << "etcd's /metrics could not be read";
  EXPECT_FALSE((*jobs)->add("work", "cut-off", "{}").ok()) << "a commit needs a quorum";
  EXPECT_GT(reads_served(), served_before) << "the add's reads (after its guess) needed a quorum";
  auto missing = (*jobs)->add("no-such-type", "j", "{}");
  EXPECT_NE(missing.status().code(), Code::kNoTimeout)
      << "answered from the cut-off member's view alone: " << missing.status().to_string();
  const long served_before_many = cluster().handled(follower(), "Txn", "OK");
  EXPECT_FALSE((*jobs)->add_many("work", {{"cut-off-2", "{}", {}}}).ok());
  EXPECT_GT(cluster().handled(follower(), "Txn", "OK"), served_before_many)
      << "add_many's read needed a quorum";
  auto missing_many = (*jobs)->add_many("no-such-type", {{"j", "{}", {}}});
  EXPECT_NE(missing_many.status().code(), Code::kNoTimeout)
      << "add_many answered from the cut-off member's view alone: "
      << missing_many.status().to_string();
  reconnect();
  // The cut-off member may have called elections meanwhile: the cluster takes a moment (longer
  // under a sanitizer) to serve a current read again, and this Jobs gives up after 3 s.
  Code after = Code::kDeadlineExceeded;
  for (const auto until = kv::Clock::now() + 30s;
       (after == Code::kDeadlineExceeded || after == Code::kUnavailable) &&
       kv::Clock::now() < until;) {
    after = (*jobs)->add("no-such-type", "j", "{}").status().code();
  }
  EXPECT_EQ(after, Code::kNoTimeout);
  EXPECT_EQ((*jobs)->add_many("no-such-type", {{"j", "{}", {}}}).status().code(), Code::kNoTimeout);
}

// A stale first read is never older than what its store handle has seen (kv.h,
// allow_stale_reads): a member whose answer is older than the newest revision the handle has
// seen is asked again with a quorum round. A real cluster's member is that far behind only
// after a failover it has not caught up with, which a test cannot hold still (a paused
// follower applies the leader's appends waiting in its socket when it resumes, and a restarted
// one serves nothing until a quorum has seen it rejoin). So this handle has two one-member
// clusters as its endpoints, the first far ahead of the second; with the first paused, its
// calls go to the second, whose serializable answer is below the floor: the read is made twice
// there, the second time linearizable. Without the floor, once.
TEST(EtcdFloorTest, AStaleFirstReadOlderThanWhatTheHandleSawIsReadAgainWithAQuorum) {
  TempDir ahead_dir, behind_dir;
  EtcdCluster ahead(ahead_dir.path(), 1), behind(behind_dir.path(), 1);
  ASSERT_TRUE(ahead.ready() && behind.ready()) << "etcd did not start";
  auto store = open_etcd_store({.endpoints = {ahead.endpoint(0), behind.endpoint(0)},
                                .key_prefix = "floor/",
                                .prefer_leader = false});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  for (int i = 0; i < 20; ++i) put(**store, "k", std::to_string(i));  // revisions "behind" lacks
  ASSERT_TRUE(ahead.pause(0));
  const long before = behind.handled(0, "Range", "OK");
  ASSERT_GE(before, 0) << "etcd's /metrics could not be read";
  auto stale = begin(**store);
  ASSERT_TRUE(stale->allow_stale_reads());
  auto got = stale->get("k");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_GE(behind.handled(0, "Range", "OK") - before, 2)
      << "a serializable answer older than what the handle had seen was taken as it was";
  ahead.resume(0);
}

TEST(EtcdFailoverTest, APausedMemberIsLeftWithinAboutASecondByReadsCommitsAndWatches) {
  constexpr auto kBound = 2s;  // the old behaviour took the 5 s request timeout
  TempDir dir;
  EtcdCluster cluster(dir.path(), 3);
  ASSERT_TRUE(cluster.ready()) << "a 3-member etcd did not start (logs in " << dir.path() << ")";
  const int leader = cluster.leader();
  ASSERT_GE(leader, 0) << "etcdctl endpoint status named no leader";
  std::vector<size_t> order;
  for (size_t i = 0; i < cluster.size(); ++i) {
    if (static_cast<int>(i) != leader) order.push_back(i);
  }
  order.push_back(static_cast<size_t>(leader));
  // Calls stay on the endpoints in the order given (no leader routing), so that the first
  // follower is the member kvq talks to.
  EtcdOptions options{.key_prefix = dir.path() + "/", .prefer_leader = false};
  for (size_t i : order) options.endpoints.push_back(cluster.endpoint(i));
  auto store = open_etcd_store(options);
  ASSERT_TRUE(store.ok());
  // Another process's store, straight on the leader.
  auto elsewhere =
      open_etcd_store({.endpoints = {cluster.endpoint(leader)}, .key_prefix = dir.path() + "/"});
  ASSERT_TRUE(elsewhere.ok());
  put(**store, "k", "1");
  auto reader = begin(**store);
  ASSERT_EQ(*reader->get("w"), std::nullopt);
  auto watch = reader->watch("w");  // its stream is on the first endpoint, about to be paused
  ASSERT_TRUE(watch.ok());

  ASSERT_TRUE(cluster.pause(order[0])) << "the member's threads did not all stop";
  auto started = kv::Clock::now();
  EXPECT_EQ(read(**store, "k"), "1");
  const auto read_took = kv::Clock::now() - started;
  EXPECT_LT(read_took, kBound) << "a read waited on the paused member";
  put(**elsewhere, "w", "x");
  started = kv::Clock::now();
  EXPECT_TRUE(watch->wait_until(started + kBound).ok()) << "the watch stayed on the paused member";
  const auto watch_took = kv::Clock::now() - started;
  cluster.resume(order[0]);

  // A commit sent to a member that then stops answering: it may apply when the member wakes,
  // so it must end kUnknownResult (for kv::run's re-reading retry), never be sent again here.
  auto txn = begin(**store);
  ASSERT_TRUE(txn->get("k").ok());  // from the second endpoint, where the calls went
  ASSERT_TRUE(cluster.pause(order[1])) << "the member's threads did not all stop";
  txn->set("k", "2");
  started = kv::Clock::now();
  const Status commit = txn->commit();
  const auto commit_took = kv::Clock::now() - started;
  EXPECT_EQ(commit.code(), Code::kUnknownResult) << commit.to_string();
  EXPECT_LT(commit_took, kBound);
  started = kv::Clock::now();
  put(**store, "k", "3");  // the next call starts on the next endpoint
  const auto next_took = kv::Clock::now() - started;
  EXPECT_LT(next_took, kBound);
  cluster.resume(order[1]);
  EXPECT_EQ(read(**elsewhere, "k"), "3");
  auto ms = [](kv::Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  std::printf(
      "paused member: read answered in %lld ms, watch fired %lld ms after the write, commit ended "
      "unknown in %lld ms, next commit %lld ms\n",
      static_cast<long long>(ms(read_took)), static_cast<long long>(ms(watch_took)),
      static_cast<long long>(ms(commit_took)), static_cast<long long>(ms(next_took)));
}

// A follower forwards a write to the leader it knows; when that leader is paused the request
// is lost, and etcd answers it only after its own request timeout (7 s by default) or once the
// old leader resumes. The follower itself answers kvq's check as soon as the others have
// elected a new leader, so "alive" alone would keep kvq waiting: an answer in a later raft term
// than the call's gives the call up (kUnknownResult for a commit). Found by the end-to-end test
// of a paused leader (tests/e2e/test_etcd_cluster.py), where an add waited 3 to 6 s.
TEST(EtcdFailoverTest, ACommitAFollowerForwardedToAPausedLeaderIsGivenUpAfterTheElection) {
  TempDir dir;
  EtcdCluster cluster(dir.path(), 3);
  ASSERT_TRUE(cluster.ready()) << "a 3-member etcd did not start (logs in " << dir.path() << ")";
  const int leader = cluster.leader();
  ASSERT_GE(leader, 0) << "etcdctl endpoint status named no leader";
  const size_t follower = leader == 0 ? 1 : 0;
  // The check comes after the election (about 1-2 s here), and etcd's own timeout after that.
  auto store = open_etcd_store({.endpoints = {cluster.endpoint(follower)},
                                .key_prefix = dir.path() + "/",
                                .request_timeout = 20s,
                                .member_check_after = 3s,
                                .prefer_leader = false,
                                .group_commit = false});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  put(**store, "k", "1");  // the client learns the raft term
  auto txn = begin(**store);
  ASSERT_EQ(*txn->get("k"), "1");
  txn->set("k", "2");
  ASSERT_TRUE(cluster.pause(static_cast<size_t>(leader))) << "the leader's threads did not stop";
  const auto started = kv::Clock::now();
  const Status commit = txn->commit();
  const auto took = kv::Clock::now() - started;
  cluster.resume(static_cast<size_t>(leader));
  EXPECT_EQ(commit.code(), Code::kUnknownResult) << commit.to_string();
  EXPECT_LT(took, 5s) << "the commit waited for the paused leader or etcd's own timeout";
  std::printf(
      "a commit forwarded to a paused leader ended %s after %lld ms\n", commit.to_string().c_str(),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  // The store goes on: the next commit reaches the new leader.
  put(**store, "k", "3");
  EXPECT_EQ(read(**store, "k"), "3");
}

// Issue 23: with the followers first in the endpoint list, kvq finds the leader
// (Maintenance.Status) and sends its calls there, so a paused follower costs a read nothing —
// without leader routing the same read waits out the failover (about member_check_after +
// member_check_timeout: it took 1.0 s with prefer_leader false). A stopped leader is then left like
// any member, and calls carry on once another is elected.
TEST(EtcdFailoverTest, CallsGoToTheLeaderAndLeaveAStoppedOne) {
  TempDir dir;
  EtcdCluster cluster(dir.path(), 3);
  ASSERT_TRUE(cluster.ready()) << "a 3-member etcd did not start (logs in " << dir.path() << ")";
  const int leader = cluster.leader();
  ASSERT_GE(leader, 0) << "etcdctl endpoint status named no leader";
  std::vector<size_t> followers;
  for (size_t i = 0; i < cluster.size(); ++i) {
    if (static_cast<int>(i) != leader) followers.push_back(i);
  }
  EtcdOptions options{.key_prefix = dir.path() + "/", .leader_check_period = 200ms};
  for (size_t i : followers) options.endpoints.push_back(cluster.endpoint(i));
  options.endpoints.push_back(cluster.endpoint(static_cast<size_t>(leader)));
  auto store = open_etcd_store(options);
  ASSERT_TRUE(store.ok());
  put(**store, "k", "1");  // starts the leader check
  std::this_thread::sleep_for(300ms);
  put(**store, "k", "2");

  ASSERT_TRUE(cluster.pause(followers[0])) << "the member's threads did not all stop";
  auto started = kv::Clock::now();
  EXPECT_EQ(read(**store, "k"), "2");
  put(**store, "k", "3");
  const auto took = kv::Clock::now() - started;
  cluster.resume(followers[0]);
  EXPECT_LT(took, 400ms) << "a call went to the paused follower, not the leader";

  // The leader stops: the members left elect another, and calls carry on after one failover.
  ASSERT_TRUE(cluster.pause(static_cast<size_t>(leader))) << "the leader's threads did not stop";
  const auto deadline = kv::Clock::now() + 20s;
  Status put_status;
  do {
    put_status = kv::run(**store, [](kv::Transaction& txn) -> Status {
      txn.set("k", "4");
      return Status::OK();
    });
  } while (!put_status.ok() && kv::Clock::now() < deadline);
  ASSERT_TRUE(put_status.ok()) << put_status.to_string();
  std::this_thread::sleep_for(400ms);  // a leader check after the failover
  started = kv::Clock::now();
  for (int i = 0; i < 5; ++i) put(**store, "k", std::to_string(5 + i));
  const auto five = kv::Clock::now() - started;
  // Read while the old leader is still stopped: etcd can answer a linearizable read stale
  // around a member that was paused and resumes ("Stale reads caused by process pausing", etcd
  // issue #20418, marked for backport to 3.4; fix in pull request #21386), and Debian's 3.4.23
  // predates the fix. Under load, the read made after its resume saw "4" (an ASan run here).
  EXPECT_EQ(read(**store, "k"), "9");
  cluster.resume(static_cast<size_t>(leader));
  EXPECT_LT(five, 1s) << "calls after the election still waited on a stopped member";
}

}  // namespace
}  // namespace kvq::testing
