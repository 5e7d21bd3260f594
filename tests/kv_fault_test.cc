// Fault injection over a real backend: conflicts, unavailability and unknown commit results.
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kv/fault_injection.h"
#include "support/backends.h"
#include "support/kv_helpers.h"

namespace kvq::testing {
namespace {

class KvFaults : public StoreTest {
 protected:
  std::shared_ptr<kv::FaultInjectingStore> faulty(double conflict, double unavailable,
                                                  double unknown, uint64_t seed) {
    return std::make_shared<kv::FaultInjectingStore>(
        store_ptr(), kv::FaultOptions{.conflict_rate = conflict,
                                      .unavailable_rate = unavailable,
                                      .unknown_result_rate = unknown,
                                      .seed = seed});
  }
};

// The documented way: each logical operation has an id, recorded in the same transaction as
// its effect, and skipped when already present.
Status idempotent_increment(kv::Store& store, const std::string& op_id) {
  return kv::run(store, [&](kv::Transaction& txn) -> Status {
    KVQ_ASSIGN_OR_RETURN(auto done, txn.get("ops/" + op_id));
    if (done) return Status::OK();
    KVQ_ASSIGN_OR_RETURN(auto n, txn.get("n"));
    txn.set("n", std::to_string(std::stoi(n.value_or("0")) + 1));
    txn.set("ops/" + op_id, "");
    return Status::OK();
  });
}

Status naive_increment(kv::Store& store) {
  return kv::run(store, [&](kv::Transaction& txn) -> Status {
    KVQ_ASSIGN_OR_RETURN(auto n, txn.get("n"));
    txn.set("n", std::to_string(std::stoi(n.value_or("0")) + 1));
    return Status::OK();
  });
}

TEST_P(KvFaults, IdempotentIncrementIsAppliedExactlyOnceDespiteFaults) {
  auto store = faulty(0.2, 0.1, 0.2, 42);
  constexpr int kThreads = 4, kEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        Status s = idempotent_increment(*store, std::to_string(t) + "-" + std::to_string(i));
        EXPECT_TRUE(s.ok()) << s.to_string();
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto counts = store->counts();
  EXPECT_GT(counts.conflicts, 0u);
  EXPECT_GT(counts.unavailable, 0u);
  EXPECT_GT(counts.unknown_applied, 0u) << "the test must exercise commits that applied";
  EXPECT_GT(counts.unknown_not_applied, 0u);
  EXPECT_EQ(read(this->store(), "n"), std::to_string(kThreads * kEach));
}

TEST_P(KvFaults, NaiveIncrementDoubleAppliesOnUnknownResults) {
  // Shows what the idempotent form protects against: the same faults make a naive increment
  // count some operations twice.
  auto store = faulty(0, 0, 0.3, 7);
  constexpr int kOps = 100;
  for (int i = 0; i < kOps; ++i) ASSERT_TRUE(naive_increment(*store).ok());
  ASSERT_GT(store->counts().unknown_applied, 0u);
  EXPECT_EQ(read(this->store(), "n"), std::to_string(kOps + store->counts().unknown_applied));
}

TEST_P(KvFaults, InjectedConflictChangesNothing) {
  auto store = faulty(1.0, 0, 0, 1);
  auto txn = store->begin();
  ASSERT_TRUE(txn.ok());
  (*txn)->set("k", "v");
  EXPECT_EQ((*txn)->commit().code(), Code::kAborted);
  EXPECT_EQ(read(this->store(), "k"), std::nullopt);
}

TEST_P(KvFaults, ADelayedFirstReadAnswersWithWhatWasCommittedDuringTheDelay) {
  using namespace std::chrono_literals;
  auto store = faulty(0, 0, 0, 1);
  kv::FaultOptions stall;
  stall.read_latency = 300ms;
  store->set_options(stall);
  auto txn = store->begin();
  ASSERT_TRUE(txn.ok());
  const auto asked = kv::Clock::now();
  Result<uint64_t> version = Unavailable("not read yet");
  std::thread reader([&] { version = (*txn)->read_version(); });
  // Commits to the wrapped store while the read waits, each remembered with when it returned.
  // The stalled read must see one made well into its wait, as a read held up by a paused etcd
  // member answers with what the rest of the cluster committed meanwhile.
  std::vector<kv::Clock::time_point> written;
  const auto deadline = asked + 5s;
  while (store->counts().delayed_reads == 0 && kv::Clock::now() < deadline) {
    put(this->store(), "k", std::to_string(written.size()));
    written.push_back(kv::Clock::now());
    std::this_thread::sleep_for(10ms);
  }
  reader.join();
  ASSERT_TRUE(version.ok()) << version.status().to_string();
  EXPECT_GE(kv::Clock::now() - asked, 300ms);
  auto seen = (*txn)->get("k");
  ASSERT_TRUE(seen.ok() && *seen);
  const size_t index = std::stoul(**seen);
  ASSERT_LT(index, written.size());
  EXPECT_GT(written[index] - asked, 200ms) << "the read's version was fixed before its wait ended";
  EXPECT_EQ(store->counts().delayed_reads, 1u) << "only the first read of a transaction waits";
  store->set_options({});
  const auto quick = kv::Clock::now();
  ASSERT_TRUE(kv::run(*store, [](kv::Transaction& t) { return t.read_version(); }).ok());
  EXPECT_LT(kv::Clock::now() - quick, 300ms);
}

// What kv::run and kv::run_async tell each attempt (Transaction::earlier_commit_unknown):
// whether an earlier attempt's commit ended with an unknown result. Before one did it is false,
// through conflicts and bodies that failed on their own (neither applied anything); from then
// on it stays true, also after a later conflict (the attempt that looked for the unknown commit
// failed, and its look with it). The bodies only write (no read draws a fault), so the store's
// counts tell what each commit met; every third attempt's body fails on its own.
TEST_P(KvFaults, EachAttemptIsToldWhetherAnEarlierCommitEndedWithAnUnknownResult) {
  auto store = faulty(0.3, 0, 0.3, 11);
  int attempts = 0, told_unknown = 0, conflicts_after_unknown = 0, conflicts_before = 0;
  struct Run {
    std::optional<kv::FaultCounts> after_body;  // the counts when the last body returned OK
    bool expected = false;
    int attempt = 0;
  };
  // The body of every attempt of one run, `run`'s state kept across them.
  auto body = [&](Run& run, kv::Transaction& txn, const std::string& key) -> Status {
    const kv::FaultCounts now = store->counts();
    if (run.after_body) {
      const auto& was = *run.after_body;
      if (now.unknown_applied + now.unknown_not_applied >
          was.unknown_applied + was.unknown_not_applied) {
        run.expected = true;
      } else if (now.conflicts > was.conflicts) {
        ++(run.expected ? conflicts_after_unknown : conflicts_before);
      }
      run.after_body.reset();
    }
    EXPECT_EQ(txn.earlier_commit_unknown(), run.expected) << key << ", attempt " << run.attempt;
    ++attempts;
    if (run.expected) ++told_unknown;
    txn.set(key, std::to_string(run.attempt));
    if (++run.attempt % 3 == 0) return Unavailable("the body's own failure");
    run.after_body = store->counts();
    return Status::OK();
  };
  const kv::RetryOptions retry{.timeout = std::chrono::seconds(30),
                               .initial_backoff = std::chrono::microseconds(100)};
  for (int op = 0; op < 150; ++op) {
    Run run;
    const std::string key = "sync/" + std::to_string(op);
    Status s = kv::run(
        *store, [&](kv::Transaction& txn) { return body(run, txn, key); }, retry);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  for (int op = 0; op < 150; ++op) {
    Run run;
    const std::string key = "async/" + std::to_string(op);
    std::promise<Status> settled;
    kv::run_async(
        *store, [&](kv::Transaction& txn) { return body(run, txn, key); },
        [&](Status s) { settled.set_value(std::move(s)); }, retry);
    Status s = settled.get_future().get();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_GT(told_unknown, 20) << "the test must exercise unknown results";
  EXPECT_GT(conflicts_before, 10) << "the test must exercise conflicts before an unknown result";
  EXPECT_GT(conflicts_after_unknown, 5) << "and after one";
  EXPECT_GT(attempts, 300);
}

KVQ_INSTANTIATE_FOR_BACKENDS(KvFaults);

}  // namespace
}  // namespace kvq::testing
