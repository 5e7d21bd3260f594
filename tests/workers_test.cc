// The workers conformance suite (kvq/workers.h), on every backend, joined to the jobs layer.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "kvq/workers.h"
#include "support/backends.h"
#include "support/child_process.h"
#include "support/kv_helpers.h"
#include "support/read_stalls.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::State;
using workers::Membership;
using workers::Workers;

class WorkersTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    auto j = jobs::Jobs::open(store_ptr());
    ASSERT_TRUE(j.ok());
    jobs_ = std::move(*j);
    ASSERT_TRUE(jobs_->set_type_timeout("work", 60s).ok());
    workers_ = open_workers();
  }
  void TearDown() override {
    workers_.reset();
    jobs_.reset();
  }

  // A Workers as another process would have: its own registrations and loops, same store.
  std::unique_ptr<Workers> open_workers() {
    auto w = Workers::open(store_ptr(),
                           {.on_departure = [this](kv::Transaction& txn, const std::string& type,
                                                   const std::string& id) {
                             return jobs_->release_worker(txn, type, id).status();
                           }});
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    return w.ok() ? std::move(*w) : nullptr;
  }

  std::set<std::string> ids(const std::string& type = "w") {
    auto m = workers_->workers(type);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    std::set<std::string> out;
    if (m.ok())
      for (auto& w : m->workers) out.insert(w.id);
    return out;
  }
  uint64_t version(const std::string& type = "w") { return workers_->workers(type)->version; }

  // Waits (on a job subscription, not a sleep) until the job is pending again.
  kv::Clock::duration time_until_pending(const std::string& id, kv::Clock::duration limit) {
    auto sub = jobs_->subscribe("work", id);
    EXPECT_TRUE(sub.ok());
    const auto start = kv::Clock::now();
    auto e = (*sub)->wait(State::kPending, start + limit);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return kv::Clock::now() - start;
  }

  std::unique_ptr<jobs::Jobs> jobs_;
  std::unique_ptr<Workers> workers_;
};

TEST_P(WorkersTest, RegisteredWorkerIsListedWithItsInfoUntilItUnregisters) {
  auto reg =
      workers_->register_worker("w", "a", {.info = R"({"host": "h1"})", .health_timeout = 2s});
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  auto m = workers_->workers("w");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->workers.size(), 1u);
  EXPECT_EQ(m->workers[0].id, "a");
  EXPECT_EQ(m->workers[0].info, R"({"host":"h1"})");
  EXPECT_EQ(m->workers[0].health_timeout, 2s);
  EXPECT_GT(m->workers[0].registered_at_ms, 0);
  ASSERT_TRUE((*reg)->unregister().ok());
  EXPECT_TRUE(ids().empty());
  EXPECT_TRUE((*reg)->unregister().ok()) << "idempotent";
}

TEST_P(WorkersTest, DestroyingTheLastHandleUnregisters) {
  {
    auto reg = workers_->register_worker("w", "a");
    ASSERT_TRUE(reg.ok());
    EXPECT_EQ(ids(), (std::set<std::string>{"a"}));
  }
  EXPECT_TRUE(ids().empty());
}

TEST_P(WorkersTest, VersionChangesOnJoinAndLeaveButNotOnHeartbeat) {
  auto a = workers_->register_worker("w", "a");
  ASSERT_TRUE(a.ok());
  const uint64_t v1 = version();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*a)->heartbeat().ok());
  EXPECT_EQ(version(), v1);
  auto b = workers_->register_worker("w", "b");
  ASSERT_TRUE(b.ok());
  const uint64_t v2 = version();
  EXPECT_GT(v2, v1);
  ASSERT_TRUE((*a)->unregister().ok());
  EXPECT_GT(version(), v2);
  EXPECT_EQ(ids(), (std::set<std::string>{"b"}));
  EXPECT_GE(workers_->stats().heartbeats, 3u);
}

TEST_P(WorkersTest, RegisteringAgainFromTheSameProcessIsIdempotent) {
  auto a = workers_->register_worker("w", "a");
  ASSERT_TRUE(a.ok());
  const uint64_t v = version();
  auto again = workers_->register_worker("w", "a");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(a->get(), again->get());
  EXPECT_EQ(version(), v);
}

TEST_P(WorkersTest, AnIdAliveElsewhereIsAlreadyExistsUnlessTakenOver) {
  auto mine = workers_->register_worker("w", "a");
  ASSERT_TRUE(mine.ok());
  auto elsewhere = open_workers();
  EXPECT_EQ(elsewhere->register_worker("w", "a").status().code(), Code::kAlreadyExists);
  const uint64_t v = version();
  auto taken = elsewhere->register_worker("w", "a", {.take_over = true});
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  EXPECT_GT(version(), v);
  EXPECT_EQ((*mine)->heartbeat().code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*mine)->lost());
  EXPECT_TRUE((*mine)->unregister().ok());
  EXPECT_EQ(ids(), (std::set<std::string>{"a"}))
      << "a lost registration must not remove its successor";
}

TEST_P(WorkersTest, BackgroundHeartbeatsMarkATakenOverRegistrationLostAndKeepTheRestAlive) {
  std::vector<std::shared_ptr<workers::Registration>> mine;
  for (auto id : {"a", "b", "c"}) {
    auto r = workers_->register_worker("w", id, {.health_timeout = 300ms});
    ASSERT_TRUE(r.ok());
    mine.push_back(*r);
  }
  auto elsewhere = open_workers();
  auto taken = elsewhere->register_worker("w", "b", {.health_timeout = 300ms, .take_over = true});
  ASSERT_TRUE(taken.ok());
  const auto deadline = kv::Clock::now() + 5s;  // heartbeats go out every ~100 ms
  while (!mine[1]->lost() && kv::Clock::now() < deadline) std::this_thread::yield();
  EXPECT_TRUE(mine[1]->lost());
  const uint64_t beats = workers_->stats().heartbeats;
  while (workers_->stats().heartbeats < beats + 4 && kv::Clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_GE(workers_->stats().heartbeats, beats + 4) << "the others kept heartbeating";
  EXPECT_FALSE(mine[0]->lost());
  EXPECT_FALSE(mine[2]->lost());
  EXPECT_EQ(ids(), (std::set<std::string>{"a", "b", "c"}));
}

TEST_P(WorkersTest, AWorkerWhoseHeartbeatsStopIsDeclaredDeadWithinItsTimeoutAndACheck) {
  auto quiet = open_workers();
  auto reg = quiet->register_worker("w", "q", {.health_timeout = 400ms});
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE((*reg)->heartbeat().ok());
  const auto last_beat = kv::Clock::now();
  quiet.reset();  // its heartbeats stop; the handle stays, so nobody unregisters it

  std::mutex mu;
  std::condition_variable cv;
  bool gone = false;
  auto sub = workers_->subscribe("w", [&](const Membership& m) {
    std::lock_guard lock(mu);
    gone = m.workers.empty();
    cv.notify_all();
  });
  ASSERT_TRUE(sub.ok());
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return gone; })) << "never declared dead";
  const auto after = kv::Clock::now() - last_beat;
  EXPECT_GE(after, 400ms) << "declared dead before its timeout";
  EXPECT_LT(after, 400ms + 100ms + 1500ms)
      << "timeout + one check period, with slack for a loaded machine";
  lock.unlock();
  // The membership callback may run before the monitor that removed the worker counts it.
  const auto counted_by = kv::Clock::now() + 5s;
  while (workers_->stats().declared_dead < 1 && kv::Clock::now() < counted_by)
    std::this_thread::yield();
  EXPECT_GE(workers_->stats().declared_dead, 1u);
}

TEST_P(WorkersTest, ADeadWorkersJobsGoBackToPendingAtOnceAndItsCallsHalt) {
  ASSERT_TRUE(jobs_->add("work", "j", "{}").ok());
  auto quiet = open_workers();
  auto reg = quiet->register_worker("w", "dies", {.health_timeout = 300ms});
  ASSERT_TRUE(reg.ok());
  auto job = jobs_->accept("work", {.worker = "dies"});
  ASSERT_TRUE(job.ok());
  quiet.reset();
  // The job's own activity timeout is 60 s: it can only come back this fast through the worker.
  EXPECT_LT(time_until_pending("j", 10s), 5s);
  EXPECT_EQ(jobs_->update(*job).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(jobs_->finish(*job).code(), Code::kFailedPrecondition);
}

TEST_P(WorkersTest, UnregisteringReenqueuesItsJobsButNotOthers) {
  ASSERT_TRUE(jobs_->add("work", "mine", "{}", {.priority = 0}).ok());
  ASSERT_TRUE(jobs_->add("work", "anon", "{}", {.priority = 1}).ok());
  auto reg = workers_->register_worker("w", "leaver");
  ASSERT_TRUE(reg.ok());
  auto mine = jobs_->accept("work", {.worker = "leaver"});
  auto anon = jobs_->accept("work");
  ASSERT_TRUE(mine.ok() && anon.ok());
  ASSERT_EQ(mine->id, "mine");
  ASSERT_TRUE((*reg)->unregister().ok());
  EXPECT_EQ(jobs_->get("work", "mine")->state, State::kPending);
  EXPECT_EQ(jobs_->get("work", "anon")->state, State::kRunning)
      << "a job accepted without a worker keeps running";
  EXPECT_TRUE(jobs_->finish(*anon).ok());
}

TEST_P(WorkersTest, AWorkerLeavingReleasesOnlyItsOwnJobsWhenAnotherTypeHasAWorkerOfTheSameId) {
  ASSERT_TRUE(jobs_->add("work", "a-job", "{}", {.priority = 0}).ok());
  ASSERT_TRUE(jobs_->add("work", "b-job", "{}", {.priority = 1}).ok());
  auto reg_a = workers_->register_worker("wtA", "shared-id");
  auto reg_b = workers_->register_worker("wtB", "shared-id");
  ASSERT_TRUE(reg_a.ok() && reg_b.ok());
  auto a = jobs_->accept("work", {.worker = "shared-id", .worker_type = "wtA"});
  auto b = jobs_->accept("work", {.worker = "shared-id", .worker_type = "wtB"});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->id, "a-job");
  EXPECT_EQ(b->worker_type, "wtB");
  EXPECT_EQ(jobs_->get("work", "b-job")->worker_type, "wtB");
  auto by_b = jobs_->list("work", {.worker = "shared-id", .worker_type = "wtB"});
  ASSERT_TRUE(by_b.ok());
  EXPECT_EQ(by_b->jobs.size(), 1u);
  EXPECT_TRUE(!by_b->jobs.empty() && by_b->jobs[0].id == "b-job");
  ASSERT_TRUE((*reg_a)->unregister().ok());
  EXPECT_EQ(jobs_->get("work", "a-job")->state, State::kPending);
  EXPECT_EQ(jobs_->get("work", "b-job")->state, State::kRunning) << "wtB's shared-id is alive";
  EXPECT_TRUE(jobs_->update(*b).ok());
  EXPECT_TRUE(jobs_->finish(*b).ok());
  EXPECT_EQ(jobs_->update(*a).status().code(), Code::kFailedPrecondition);
}

TEST_P(WorkersTest, AJobAcceptedUnderABareNameIsReleasedByTheDepartureOfAnyWorkerWithThatId) {
  ASSERT_TRUE(jobs_->add("work", "bare", "{}").ok());
  auto reg = workers_->register_worker("wtA", "plain");
  ASSERT_TRUE(reg.ok());
  auto bare = jobs_->accept("work", {.worker = "plain"});
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->worker_type, "");
  ASSERT_TRUE((*reg)->unregister().ok());
  EXPECT_EQ(jobs_->get("work", "bare")->state, State::kPending) << "as before worker types";
}

TEST_P(WorkersTest, SubscriptionDeliversEveryChangeInVersionOrderOnce) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Membership> seen;
  auto sub = workers_->subscribe("w", [&](const Membership& m) {
    std::lock_guard lock(mu);
    seen.push_back(m);
    cv.notify_all();
  });
  ASSERT_TRUE(sub.ok());
  auto wait_for_ids = [&](std::set<std::string> want) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 5s, [&] {
      if (seen.empty()) return false;
      std::set<std::string> got;
      for (auto& w : seen.back().workers) got.insert(w.id);
      return got == want;
    });
  };
  ASSERT_TRUE(wait_for_ids({}));
  auto a = workers_->register_worker("w", "a");
  ASSERT_TRUE(wait_for_ids({"a"}));
  auto b = workers_->register_worker("w", "b");
  ASSERT_TRUE(wait_for_ids({"a", "b"}));
  ASSERT_TRUE((*a)->unregister().ok());
  ASSERT_TRUE(wait_for_ids({"b"}));
  std::lock_guard lock(mu);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i].version, seen[i - 1].version);
}

TEST_P(WorkersTest, ACallbackThatThrowsDoesNotStopDeliveryToOthers) {
  std::mutex mu;
  std::condition_variable cv;
  int bad_calls = 0;
  std::set<std::string> good_sees;
  auto bad = workers_->subscribe("w", [&](const Membership&) {
    {
      std::lock_guard lock(mu);
      ++bad_calls;
    }
    throw std::runtime_error("subscriber bug");
  });
  auto good = workers_->subscribe("w", [&](const Membership& m) {
    std::lock_guard lock(mu);
    good_sees.clear();
    for (auto& w : m.workers) good_sees.insert(w.id);
    cv.notify_all();
  });
  ASSERT_TRUE(bad.ok() && good.ok());
  // Changes that land together may arrive as one delivery, so wait for states, not counts.
  auto a = workers_->register_worker("w", "a");
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return good_sees == std::set<std::string>{"a"}; }));
  const int bad_before = bad_calls;
  EXPECT_GE(bad_before, 1);
  lock.unlock();
  auto b = workers_->register_worker("w", "b");
  lock.lock();
  EXPECT_TRUE(cv.wait_for(lock, 5s, [&] {
    return good_sees == std::set<std::string>{"a", "b"};
  })) << "delivery stopped after a callback threw";
  EXPECT_GT(bad_calls, bad_before) << "the throwing subscriber is still called";
}

TEST_P(WorkersTest, ARemoteRegistrationLivesOnItsOwnHeartbeatsFromAnyProcess) {
  auto token = workers_->register_remote("w", "http-1", {.health_timeout = 400ms});
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  auto other = open_workers();  // another server process taking the heartbeats
  const auto until = kv::Clock::now() + 1200ms;
  while (kv::Clock::now() < until) {
    ASSERT_TRUE(other->heartbeat("w", "http-1", *token).ok()) << "declared dead while heartbeating";
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(ids(), (std::set<std::string>{"http-1"}));
  EXPECT_EQ(other->heartbeat("w", "http-1", "not-the-token").code(), Code::kPermissionDenied);
  ASSERT_TRUE(other->unregister("w", "http-1", *token).ok());
  EXPECT_TRUE(ids().empty());
  EXPECT_EQ(workers_->heartbeat("w", "http-1", *token).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(workers_->unregister("w", "http-1", *token).ok()) << "idempotent";
}

TEST_P(WorkersTest, ARemoteRegistrationThatStopsHeartbeatingIsDeclaredDead) {
  auto token = workers_->register_remote("w", "http-2", {.health_timeout = 300ms});
  ASSERT_TRUE(token.ok());
  const auto deadline = kv::Clock::now() + 5s;
  while (!ids().empty() && kv::Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(ids().empty()) << "nothing heartbeats a remote registration but its owner";
}

// Issue 17, for the health monitor: it has the activity monitor's shape (a check's version
// against a check a timeout old), so a read that stalls for longer than the health timeout must
// not make the heartbeats committed during the stall look a timeout old. The heartbeats go
// through a store that answers at once; only the monitor's store stalls.
TEST_P(WorkersTest, AMonitorWhoseReadsStallNeverDeclaresAWorkerThatHeartbeatsOnTimeDead) {
  constexpr std::chrono::milliseconds kTimeout = 1s, kBeat = 200ms, kStall = 1500ms;
  constexpr int kStalls = 2;
  auto stalling = std::make_shared<kv::FaultInjectingStore>(store_ptr(), kv::FaultOptions{});
  // Another key prefix, so the fixture's own (unstalled) monitor does not watch these workers.
  auto heartbeating_side =
      Workers::open(store_ptr(), {.key_prefix = "s", .run_health_monitor = false});
  ASSERT_TRUE(heartbeating_side.ok());
  auto monitor_side = Workers::open(stalling, {.key_prefix = "s"});
  ASSERT_TRUE(monitor_side.ok());
  Workers& side = **heartbeating_side;
  auto beating = side.register_remote("stall", "beating", {.health_timeout = kTimeout});
  auto quiet = side.register_remote("stall", "quiet", {.health_timeout = kTimeout});
  ASSERT_TRUE(beating.ok() && quiet.ok());
  const auto registered = kv::Clock::now();

  std::atomic<bool> stop{false};
  Status halted = Status::OK();
  std::thread heartbeats([&] {
    while (!stop.load()) {
      if (Status s = side.heartbeat("stall", "beating", *beating); !s.ok()) {
        halted = s;
        return;
      }
      std::this_thread::sleep_for(kBeat);
    }
  });
  auto checks = [&] { return (*monitor_side)->stats().monitor_checks; };
  for (int i = 0; i < kStalls; ++i) {
    EXPECT_TRUE(stall_one_read(*stalling, kStall, checks, 2, 10s))
        << "the monitor never read through stall " << i;
  }
  // The quiet one is still declared dead: once the store answers promptly again, within
  // 1 + 2.4/4 timeouts of watched time (the monitor does not count the stalls, nor the part of
  // any gap between two checks past 1.5 periods), plus slack for a loaded machine, whose late
  // checks are not counted in full either.
  const auto limit = kv::Clock::now() + 1600ms + 2s;
  auto members = [&] {
    std::set<std::string> out;
    auto m = side.workers("stall");
    if (m.ok())
      for (auto& w : m->workers) out.insert(w.id);
    return out;
  };
  while (members().contains("quiet") && kv::Clock::now() < limit) std::this_thread::sleep_for(20ms);
  const auto idle = kv::Clock::now() - registered;
  stop = true;
  heartbeats.join();
  EXPECT_TRUE(halted.ok()) << "declared dead while heartbeating every " << kBeat.count()
                           << " ms: " << halted.to_string() << " ("
                           << std::chrono::duration_cast<std::chrono::milliseconds>(idle).count()
                           << " ms after registering)";
  EXPECT_EQ(members(), (std::set<std::string>{"beating"}))
      << "the quiet worker outlived its bound: still there "
      << std::chrono::duration_cast<std::chrono::milliseconds>(idle).count()
      << " ms after registering, after " << (*monitor_side)->stats().monitor_checks << " checks";
  EXPECT_GE(idle, kTimeout);
}

TEST_P(WorkersTest, TypesListsEveryTypeThatHasHadAWorkerInNameOrder) {
  auto none = workers_->types();
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_TRUE(none->empty());
  auto b = workers_->register_worker("wb", "x");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(workers_->register_remote("wa", "y").ok());
  ASSERT_TRUE(workers_->register_remote("wa", "z").ok());
  EXPECT_EQ(*workers_->types(), (std::vector<std::string>{"wa", "wb"}));
  ASSERT_TRUE((*b)->unregister().ok());
  EXPECT_EQ(*open_workers()->types(), (std::vector<std::string>{"wa", "wb"}))
      << "kept after the last worker left";
}

TEST_P(WorkersTest, BadInputGetsANamedErrorAndChangesNothing) {
  EXPECT_EQ(workers_->register_worker("", "a").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(workers_->register_worker("w", "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(workers_->register_worker("w w", "a").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(workers_->register_worker("w", "a", {.health_timeout = 0ms}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(workers_->register_worker("w", "a", {.health_timeout = -5ms}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(workers_->register_worker("w", "a", {.info = "[1]"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(workers_->register_worker("w", "a", {.info = "{oops"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(workers_->subscribe("w", nullptr).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(ids().empty());
  EXPECT_EQ(version(), 0u);
  EXPECT_TRUE(workers_->types()->empty());
}

KVQ_INSTANTIATE_FOR_BACKENDS(WorkersTest);

// Real processes sharing one LMDB directory.
TEST(WorkersProcessTest, ProcessesSeeEachOtherAndAKilledOnesJobsAreRescued) {
  TempDir dir;
  auto store = open_lmdb_store({.path = dir.path(), .durability = Durability::kNoSync});
  ASSERT_TRUE(store.ok());
  auto j = jobs::Jobs::open(*store);
  ASSERT_TRUE(j.ok());
  jobs::Jobs& jobs = **j;
  auto w = Workers::open(*store, {.on_departure = [&](kv::Transaction& txn, const std::string& type,
                                                      const std::string& id) {
    return jobs.release_worker(txn, type, id).status();
  }});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(jobs.set_type_timeout("work", 60s).ok());
  ASSERT_TRUE(jobs.add("work", "held", "{}").ok());
  auto me = (*w)->register_worker("w", "parent");
  ASSERT_TRUE(me.ok());

  ChildProcess child({KVQ_WORKERS_TEST_PROCESS, dir.path(), "child", "500"});
  ASSERT_TRUE(child.started());
  std::string line;
  ASSERT_TRUE(child.read_line(line));
  EXPECT_EQ(line, "members child,parent") << "the child sees this process's worker";
  ASSERT_TRUE(child.read_line(line));
  ASSERT_EQ(line.rfind("ready held ", 0), 0u) << line;
  const jobs::Job stolen{"work", "held", line.substr(std::string("ready held ").size()), "{}",
                         "child"};
  auto members = (*w)->workers("w");
  ASSERT_TRUE(members.ok());
  EXPECT_EQ(members->workers.size(), 2u) << "this process sees the child";

  child.kill_hard();
  child.wait();
  const auto killed = kv::Clock::now();
  auto sub = jobs.subscribe("work", "held");
  ASSERT_TRUE(sub.ok());
  auto back = (*sub)->wait(State::kPending, killed + 10s);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_LT(kv::Clock::now() - killed, 500ms + 125ms + 2000ms)
      << "health timeout + one check, with slack";
  jobs::Job copy = stolen;
  EXPECT_EQ(jobs.update(copy).status().code(), Code::kFailedPrecondition)
      << "the dead worker's calls halt";
  EXPECT_EQ((*w)->workers("w")->workers.size(), 1u);
}

// ---- Tokens are secrets: only the right one acts ----

TEST_P(WorkersTest, AWrongTokenNeitherUnregistersNorHeartbeatsTheWorker) {
  auto token = workers_->register_remote("w", "r1", {.health_timeout = 60s});
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  const uint64_t v = version();
  const int64_t beat_before = workers_->workers("w")->workers.at(0).last_heartbeat_ms;
  std::string wrong = *token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';  // differs in the last digit only
  for (const std::string& bad : {wrong, std::string("x"), *token + "0"}) {
    EXPECT_EQ(workers_->unregister("w", "r1", bad).code(), Code::kPermissionDenied) << bad;
    EXPECT_EQ(workers_->heartbeat("w", "r1", bad).code(), Code::kPermissionDenied) << bad;
  }
  EXPECT_EQ(ids(), (std::set<std::string>{"r1"})) << "a wrong token must not unregister";
  EXPECT_EQ(version(), v);
  EXPECT_EQ(workers_->workers("w")->workers.at(0).last_heartbeat_ms, beat_before)
      << "nor heartbeat";
  EXPECT_EQ(workers_->stats().heartbeats, 0u);
  ASSERT_TRUE(workers_->unregister("w", "r1", *token).ok()) << "the right token unregisters";
  EXPECT_TRUE(ids().empty());
  EXPECT_TRUE(workers_->unregister("w", "r1", wrong).ok())
      << "a worker that is gone is gone for anyone";
}

TEST_P(WorkersTest, TheTokenATakeOverReplacedIsToldTakenOverNotWrongToken) {
  auto first = workers_->register_remote("w", "r2");
  ASSERT_TRUE(first.ok());
  auto second = workers_->register_remote("w", "r2", {.take_over = true});
  ASSERT_TRUE(second.ok());
  Status beat = workers_->heartbeat("w", "r2", *first);
  EXPECT_EQ(beat.code(), Code::kFailedPrecondition) << beat.to_string();
  EXPECT_NE(beat.message().find("taken over"), std::string::npos) << beat.to_string();
  EXPECT_TRUE(workers_->unregister("w", "r2", *first).ok()) << "gone for the replaced registration";
  EXPECT_EQ(ids(), (std::set<std::string>{"r2"})) << "without removing its successor";
  EXPECT_TRUE(workers_->heartbeat("w", "r2", *second).ok());
  EXPECT_EQ(workers_->heartbeat("w", "r2", *first + "0").code(), Code::kPermissionDenied);
}

TEST_P(WorkersTest, AHandleTakenOverTwiceIsLostAndItsUnregisterLeavesTheSuccessor) {
  auto mine = workers_->register_worker("w", "r3");
  ASSERT_TRUE(mine.ok());
  ASSERT_TRUE(workers_->register_remote("w", "r3", {.take_over = true}).ok());
  ASSERT_TRUE(workers_->register_remote("w", "r3", {.take_over = true}).ok());
  EXPECT_EQ((*mine)->heartbeat().code(), Code::kFailedPrecondition)
      << "its token held the worker once";
  EXPECT_TRUE((*mine)->lost());
  EXPECT_TRUE((*mine)->unregister().ok());
  EXPECT_EQ(ids(), (std::set<std::string>{"r3"}));
}

TEST_P(WorkersTest, WorkerTokensAndJobLocksCarry128RandomBits) {
  const auto is_hex = [](std::string_view s) {
    return s.find_first_not_of("0123456789abcdef") == std::string::npos;
  };
  auto a = workers_->register_remote("w", "t1");
  auto b = workers_->register_remote("w", "t2");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u) << *a;
  EXPECT_TRUE(is_hex(*a)) << *a;
  EXPECT_NE(*a, *b);
  ASSERT_TRUE(jobs_->add("work", "j", "{}").ok());
  auto job = jobs_->accept("work");
  ASSERT_TRUE(job.ok()) << job.status().to_string();
  const auto dash = job->lock.rfind('-');
  ASSERT_NE(dash, std::string::npos) << job->lock;
  EXPECT_EQ(dash, 32u) << "32 hex digits, then the type tag: " << job->lock;
  EXPECT_TRUE(is_hex(job->lock.substr(0, dash))) << job->lock;
}

}  // namespace
}  // namespace kvq::testing
