// Groups (kvq/jobs.h AddOptions::group): round-robin turns between groups, max_running_per_group
// and the invariants I6–I8 of src/jobs/schema.h, on every backend, with several Jobs on one
// store standing for several processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "kvq/tuple.h"
#include "support/delivered.h"
#include "support/jobs_fixture.h"
#include "util/mutex.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::AddOptions;
using jobs::Job;
using jobs::Jobs;
using jobs::State;

constexpr int kAcceptors = 64;

// The group a test job belongs to: its id is "<group>/<n>".
std::string group_of(const std::string& id) { return id.substr(0, id.find('/')); }

class GroupsTest : public JobsFixture {
 protected:
  bool etcd() const { return GetParam().backend.name == "etcd"; }
  bool faults() const { return GetParam().faults; }

  // A second Jobs on the same store (and the same faults), as another process would open.
  std::unique_ptr<Jobs> open_another() {
    std::shared_ptr<kv::Store> store = raw_;
    if (faulty_) store = faulty_;
    auto j = Jobs::open(
        store, {.key_prefix = "t", .monitor_checks_per_timeout = 4, .run_scheduler = false});
    EXPECT_TRUE(j.ok()) << j.status().to_string();
    return j.ok() ? std::move(*j) : nullptr;
  }
  // A Jobs on the store without injected faults: setting up is not what is tested.
  Jobs& producer() {
    if (!producer_) {
      auto j = Jobs::open(
          raw_, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
      EXPECT_TRUE(j.ok()) << j.status().to_string();
      producer_ = std::move(*j);
    }
    return *producer_;
  }
  // Adds "<group>/<first>".."<group>/<first + n - 1>" (ids zero-padded, so they sort in
  // order), in batches of 1000.
  void add_group(const std::string& type, const std::string& group, int n, int first = 0,
                 AddOptions options = {}) {
    options.group = group;
    std::vector<jobs::NewJob> batch;
    for (int i = first; i < first + n; ++i) {
      char id[32];
      std::snprintf(id, sizeof id, "%06d", i);
      batch.push_back({group + "/" + id, "{}", options});
      if (batch.size() == 1000 || i == first + n - 1) {
        auto added = producer().add_many(type, batch);
        ASSERT_TRUE(added.ok()) << added.status().to_string();
        batch.clear();
      }
    }
  }
  // The group of the job an accept took.
  std::string accept_group(Jobs& j, const std::string& type = "work") {
    auto job = j.accept(type);
    EXPECT_TRUE(job.ok()) << job.status().to_string();
    return job.ok() ? group_of(job->id) : "";
  }

  // Every key of subspace `space` of `type` under the prefix "t" (src/jobs/schema.h).
  std::vector<kv::KeyValue> space_of(int64_t space, const std::string& type) {
    auto range = Subspace(std::string("t")).range(Tuple{space, type});
    auto rows = kv::run(
        raw(), [&](kv::Transaction& txn) { return txn.get_range(range.first, range.second); });
    EXPECT_TRUE(rows.ok()) << rows.status().to_string();
    return rows.ok() ? *rows : std::vector<kv::KeyValue>{};
  }

  // Checks I1 and I6–I8 of src/jobs/schema.h by walking the job rows and subspaces 2, 15, 16
  // and 17 of `type`.
  void check_invariants(const std::string& type) {
    const jobs::Keys keys("t");
    struct Place {
      int64_t priority, scheduled;
      std::string group;
    };
    std::map<std::string, Place> pending;     // by id
    std::map<std::string, uint32_t> running;  // by group
    std::set<std::string> with_pending;       // groups
    for (const auto& kv : space_of(1, type)) {
      auto id = keys.parse_job_id(kv.key);
      auto row = jobs::decode_row(kv.value);
      ASSERT_TRUE(id.ok() && row.ok());
      const State state = jobs::state_of(*row);
      if (state == State::kPending) {
        pending[*id] = {row->priority, row->scheduled, row->group};
        if (!row->group.empty()) with_pending.insert(row->group);
      }
      if (state == State::kRunning && !row->group.empty()) ++running[row->group];
    }
    // I1 and I6: one entry per pending job, in (2) without a group, in (15) with one.
    std::map<std::string, Place> indexed;
    for (const auto& kv : space_of(2, type)) {
      auto e = keys.parse_pending(kv.key);
      ASSERT_TRUE(e.ok());
      ASSERT_TRUE(indexed.emplace(e->id, Place{e->priority, e->scheduled, ""}).second);
    }
    std::map<std::string, std::pair<int64_t, int64_t>> first;  // a group's first (15) entry
    for (const auto& kv : space_of(15, type)) {
      auto t = Subspace(std::string("t")).unpack(kv.key);
      ASSERT_TRUE(t.ok() && t->size() == 6);
      const std::string group = (*t)[2].as_string();
      const std::string id = (*t)[5].as_string();
      ASSERT_TRUE(indexed.emplace(id, Place{(*t)[3].as_int(), (*t)[4].as_int(), group}).second)
          << id << " indexed twice";
      first.try_emplace(group, (*t)[3].as_int(), (*t)[4].as_int());
    }
    ASSERT_EQ(indexed.size(), pending.size());
    for (const auto& [id, place] : pending) {
      auto it = indexed.find(id);
      ASSERT_NE(it, indexed.end()) << "pending job " << id << " has no index entry";
      EXPECT_EQ(it->second.priority, place.priority) << id;
      EXPECT_EQ(it->second.scheduled, place.scheduled) << id;
      EXPECT_EQ(it->second.group, place.group) << id;
    }
    // I7: a row exactly for each group with pending or running jobs, counting the running.
    std::map<std::string, jobs::GroupRow> rows;
    for (const auto& kv : space_of(17, type)) {
      auto group = keys.parse_group_name(kv.key);
      auto row = jobs::decode_group(kv.value);
      ASSERT_TRUE(group.ok() && row.ok());
      rows[*group] = *row;
    }
    std::set<std::string> live = with_pending;
    for (const auto& [group, n] : running) live.insert(group);
    std::set<std::string> stored;
    for (const auto& [group, row] : rows) stored.insert(group);
    EXPECT_EQ(stored, live);
    for (const auto& [group, row] : rows) {
      EXPECT_EQ(row.running, running[group]) << group;
      // I8: queued exactly when it has pending jobs and is not full, at its first job's turn.
      const bool queued = with_pending.count(group) && !row.full;
      ASSERT_EQ(row.queued.has_value(), queued) << group;
      if (!queued) continue;
      EXPECT_EQ(row.queued->first, first[group].first) << group;
      EXPECT_EQ(row.queued->second, std::max(first[group].second * 1000, row.last_accept_us))
          << group;
    }
    std::map<std::string, std::pair<int64_t, int64_t>> queue;
    for (const auto& kv : space_of(16, type)) {
      auto t = Subspace(std::string("t")).unpack(kv.key);
      ASSERT_TRUE(t.ok() && t->size() == 5);
      ASSERT_TRUE(
          queue.emplace((*t)[4].as_string(), std::pair{(*t)[2].as_int(), (*t)[3].as_int()}).second);
    }
    size_t queued_rows = 0;
    for (const auto& [group, row] : rows) {
      if (!row.queued) continue;
      ++queued_rows;
      ASSERT_TRUE(queue.count(group)) << group << " has no queue entry";
      EXPECT_EQ(queue[group], *row.queued) << group;
    }
    EXPECT_EQ(queue.size(), queued_rows);
  }

  std::unique_ptr<Jobs> producer_;
  std::vector<std::unique_ptr<Jobs>> others_;
};

TEST_P(GroupsTest, GroupsTakeTurnsInsteadOfTheFirstBeingDrained) {
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 20));
  ASSERT_NO_FATAL_FAILURE(add_group("work", "B", 3));
  ASSERT_NO_FATAL_FAILURE(add_group("work", "C", 3));
  std::vector<std::string> order;
  for (int i = 0; i < 26; ++i) order.push_back(accept_group(jobs()));
  std::string seen;
  for (const auto& g : order) seen += g;
  if (!faults()) {
    // One acceptor, in order: each group in turn while all have jobs, then what is left.
    EXPECT_EQ(seen, "ABCABCABC" + std::string(17, 'A'));
  } else {
    // A retry after an injected fault picks at random among the groups in turn: B and C are
    // still done long before A.
    const size_t last_small = seen.find_last_not_of('A');
    EXPECT_LT(last_small, 14u) << seen;
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 'A'), 20);
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
}

TEST_P(GroupsTest, PriorityComesBeforeTurns) {
  const int64_t now = wall_ms();
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 2, 0, {.scheduled_time_ms = now - 5000}));
  ASSERT_NO_FATAL_FAILURE(add_group("work", "B", 1, 0, {.priority = -1}));
  ASSERT_TRUE(producer().add("work", "u", "{}", {.priority = -2}).ok());
  auto first = jobs().accept("work");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->id, "u");
  EXPECT_EQ(accept_group(jobs()), "B");
  EXPECT_EQ(accept_group(jobs()), "A");
  // Only priorities up to max_priority: none left.
  EXPECT_EQ(jobs().accept("work", {.max_priority = -1}).status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(accept_group(jobs()), "A");
}

TEST_P(GroupsTest, AGroupNotYetDueIsPassedOver) {
  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 1, 0, {.scheduled_time_ms = later}));
  ASSERT_NO_FATAL_FAILURE(add_group("work", "B", 1));
  EXPECT_EQ(accept_group(jobs()), "B");
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  // Due by a later time, it is taken.
  auto early = jobs().accept("work", {.max_scheduled_time_ms = later});
  ASSERT_TRUE(early.ok()) << early.status().to_string();
  EXPECT_EQ(group_of(early->id), "A");
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->running, 2u);
  EXPECT_EQ(counts->pending, 0u);
  // A waiting accept wakes when a group's turn comes, as for a delayed job.
  const int64_t soon = wall_ms() + 700;
  ASSERT_NO_FATAL_FAILURE(add_group("work", "C", 1, 0, {.scheduled_time_ms = soon}));
  auto waited = open_another()->accept("work", {.timeout = 30s});
  ASSERT_TRUE(waited.ok()) << waited.status().to_string();
  EXPECT_EQ(group_of(waited->id), "C");
  EXPECT_GE(wall_ms(), soon);
  EXPECT_LT(wall_ms(), soon + 5000);
}

TEST_P(GroupsTest, JobsWithAndWithoutAGroupShareATypeByTime) {
  const int64_t now = wall_ms();
  // Without a group a job stands at its scheduled time; a group at its turn (its first job's
  // time, or its last accept's if later): a group just served goes behind a job without a
  // group that was already due.
  ASSERT_TRUE(producer().add("work", "old", "{}", {.scheduled_time_ms = now - 3000}).ok());
  ASSERT_NO_FATAL_FAILURE(add_group("work", "G", 2, 0, {.scheduled_time_ms = now - 2000}));
  ASSERT_TRUE(producer().add("work", "mid", "{}", {.scheduled_time_ms = now - 1000}).ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    auto job = jobs().accept("work");
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ids.push_back(job->id);
  }
  if (!faults()) {
    EXPECT_EQ(ids, (std::vector<std::string>{"old", "G/000000", "mid", "G/000001"}));
  } else {
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<std::string>{"G/000000", "G/000001", "mid", "old"}));
  }
  EXPECT_EQ(jobs().count("work")->running, 4u);
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
}

// The fairness measurement of issue 21: a group with 100,000 pending jobs and 99 groups of 10
// added after it. With one acceptor, every small group's jobs are accepted within the first
// 1,100 accepts. On etcd the big group has 10,000 jobs: this test takes about 13 s there with
// them (each add is a few round trips), so 100,000 would take most of ctest's 300 s timeout.
TEST_P(GroupsTest, ASmallGroupIsServedAmidOneWithAHundredThousandJobs) {
  const int big = etcd() ? 10'000 : 100'000;
  ASSERT_NO_FATAL_FAILURE(add_group("work", "big", big));
  for (int g = 0; g < 99; ++g) {
    char name[16];
    std::snprintf(name, sizeof name, "s%02d", g);
    ASSERT_NO_FATAL_FAILURE(add_group("work", name, 10));
  }
  int small_left = 990;
  int accepts = 0;
  int big_taken = 0;
  while (small_left > 0 && accepts < 5000) {
    auto job = jobs().accept("work");
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ++accepts;
    if (group_of(job->id) == "big") {
      ++big_taken;
    } else {
      --small_left;
    }
  }
  std::printf(
      "fairness (%s): the 990 jobs of 99 small groups were accepted within %d accepts, "
      "beside %d of the group of %d\n",
      GetParam().backend.name.c_str(), accepts, big_taken, big);
  RecordProperty("accepts_to_serve_small_groups", std::to_string(accepts));
  EXPECT_EQ(small_left, 0);
  EXPECT_LE(accepts, 1100);
}

// kAcceptors threads over three Jobs, each looping accept -> hold -> finish, with `per_group`
// the limit: the running jobs of a group never exceed it, and reach it.
void run_limited(std::vector<Jobs*> servers, uint32_t per_group, int groups, int per_group_jobs) {
  const int total = groups * per_group_jobs;
  util::Mutex mu;
  util::CondVar cv;
  std::map<std::string, int> running;  // guarded by mu
  std::map<std::string, int> most;     // guarded by mu
  std::atomic<int> finished{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  const auto give_up = kv::Clock::now() + 120s;
  for (int i = 0; i < kAcceptors; ++i) {
    threads.emplace_back([&, server = servers[i % servers.size()]] {
      while (finished.load() < total && kv::Clock::now() < give_up) {
        auto job = server->accept("work", {.timeout = 1s});
        if (!job.ok()) {
          if (job.status().code() != Code::kDeadlineExceeded) ++errors;
          continue;
        }
        const std::string group = group_of(job->id);
        {
          // Until the group was seen with every slot taken, each job is held until it is (or a
          // while passes), so that reaching the limit does not depend on how fast the store
          // is; from then on the group's jobs are held briefly and churn through its slots.
          util::MutexLock lock(mu);
          most[group] = std::max(most[group], ++running[group]);
          cv.notify_all();
          const auto until = kv::Clock::now() + 5s;
          while (most[group] < static_cast<int>(per_group) && kv::Clock::now() < until)
            cv.wait_until(mu, until);
        }
        std::this_thread::sleep_for(2ms);  // holding the slot: the work
        {
          util::MutexLock lock(mu);
          --running[group];  // before finish: never counts a slot already freed
        }
        if (Status s = server->finish(*job); !s.ok()) {
          ADD_FAILURE() << s.to_string();
          ++errors;
        }
        ++finished;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(finished.load(), total);
  util::MutexLock lock(mu);
  int reached = 0;
  for (const auto& [group, n] : most) {
    EXPECT_LE(n, static_cast<int>(per_group)) << group;
    if (n == static_cast<int>(per_group)) ++reached;
  }
  std::printf("max_running_per_group %u: %d of %d groups reached it\n", per_group, reached, groups);
  EXPECT_EQ(reached, groups) << "the limit was not reached by every group";
}

TEST_P(GroupsTest, MaxRunningPerGroupHoldsAcrossServersUnder64Acceptors) {
  const int per_group_jobs = etcd() ? 12 : 40;
  for (uint32_t limit : {1u, 3u}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    const std::string tag = "L" + std::to_string(limit) + "g";
    ASSERT_TRUE(jobs().set_max_running_per_group("work", limit).ok());
    for (int g = 0; g < 8; ++g)
      ASSERT_NO_FATAL_FAILURE(add_group("work", tag + std::to_string(g), per_group_jobs));
    others_.clear();
    others_.push_back(open_another());
    others_.push_back(open_another());
    run_limited({&jobs(), others_[0].get(), others_[1].get()}, limit, 8, per_group_jobs);
    ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
    EXPECT_TRUE(space_of(17, "work").empty());  // every group done: no rows left (I7)
  }
}

TEST_P(GroupsTest, AFullGroupDoesNotHoldUpOtherGroups) {
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 1).ok());
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 3));
  ASSERT_NO_FATAL_FAILURE(add_group("work", "B", 2));
  // A first, in turn (or B first when a retry after an injected fault spread its pick), then
  // the other: A is full after one.
  std::set<std::string> taken{accept_group(jobs()), accept_group(jobs())};
  EXPECT_EQ(taken, (std::set<std::string>{"A", "B"}));
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  auto listed = jobs().groups("work");
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].group, "A");
  EXPECT_EQ((*listed)[0].running, 1u);
  EXPECT_EQ((*listed)[0].pending, 2u);
  EXPECT_TRUE((*listed)[0].full);
  EXPECT_FALSE((*listed)[0].in_turn_at_ms);
  EXPECT_EQ((*listed)[1].group, "B");
  EXPECT_TRUE((*listed)[1].full);
  // Jobs without a group are not limited by it.
  ASSERT_TRUE(producer().add("work", "free", "{}").ok());
  auto free = jobs().accept("work");
  ASSERT_TRUE(free.ok());
  EXPECT_EQ(free->id, "free");
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
}

enum class RunEnd { kFinish, kFail, kLost };

// A run of a full group ends (finished, failed, or lost to its worker's silence): a waiting
// accept of another process takes the group's next job at once, woken by the store (it waits
// a minute otherwise).
void check_freed_slot_wakes_a_waiter(Jobs& jobs, Jobs& waiter_jobs, RunEnd end,
                                     const std::string& type) {
  auto a = jobs.accept(type);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(jobs.accept(type).status().code(), Code::kDeadlineExceeded);
  auto waiting = std::make_shared<Delivered<Result<Job>>>();
  waiter_jobs.accept_async(type, {.timeout = 60s}, deliver_to(waiting));
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(waiting->values().empty()) << "taken while the group was full";
  const auto ended = kv::Clock::now();
  switch (end) {
    case RunEnd::kFinish: ASSERT_TRUE(jobs.finish(*a).ok()); break;
    case RunEnd::kFail: ASSERT_TRUE(jobs.fail(*a, {.message = "no", .retry_in = 1h}).ok()); break;
    case RunEnd::kLost: break;  // its worker goes silent: the activity monitor ends the run
  }
  ASSERT_TRUE(waiting->wait_for(1, 30s));
  const auto took = kv::Clock::now() - ended;
  ASSERT_TRUE(waiting->values()[0].ok()) << waiting->values()[0].status().to_string();
  EXPECT_EQ(group_of(waiting->values()[0]->id), "A");
  if (end != RunEnd::kLost) {
    EXPECT_LT(took, 5s) << "the waiter was not woken by the run's end";
  }
}

TEST_P(GroupsTest, AnEndedRunFreesItsGroupsSlotAndWakesAWaitingAccept) {
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 1).ok());
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 3));
  auto other = open_another();
  {
    SCOPED_TRACE("finish");
    check_freed_slot_wakes_a_waiter(jobs(), *other, RunEnd::kFinish, "work");
  }
  // The waiter holds A's slot now; fail it, then take the last one.
  auto running = other->accept("work");
  EXPECT_EQ(running.status().code(), Code::kDeadlineExceeded);
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));

  ASSERT_TRUE(jobs().set_type_timeout("short", 1s).ok());
  ASSERT_TRUE(jobs().set_max_running_per_group("short", 1).ok());
  ASSERT_NO_FATAL_FAILURE(add_group("short", "A", 2));
  {
    SCOPED_TRACE("fail");
    check_freed_slot_wakes_a_waiter(jobs(), *other, RunEnd::kFail, "short");
  }
  ASSERT_NO_FATAL_FAILURE(add_group("short", "A", 1, 10));
  {
    // The waiter's job (of the fail above) is never updated: it is lost at the timeout, which
    // frees the slot for the job just added.
    SCOPED_TRACE("lost");
    auto waiting = std::make_shared<Delivered<Result<Job>>>();
    other->accept_async("short", {.timeout = 60s}, deliver_to(waiting));
    ASSERT_TRUE(waiting->wait_for(1, 30s));
    ASSERT_TRUE(waiting->values()[0].ok()) << waiting->values()[0].status().to_string();
    EXPECT_EQ(group_of(waiting->values()[0]->id), "A");
  }
  ASSERT_NO_FATAL_FAILURE(check_invariants("short"));
}

TEST_P(GroupsTest, RaisingOrRemovingTheLimitRequeuesFullGroups) {
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 1).ok());
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 4));
  EXPECT_EQ(accept_group(jobs()), "A");
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  auto other = open_another();
  auto waiting = std::make_shared<Delivered<Result<Job>>>();
  other->accept_async("work", {.timeout = 60s}, deliver_to(waiting));
  const auto raised = kv::Clock::now();
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 2).ok());
  ASSERT_TRUE(waiting->wait_for(1, 30s));
  EXPECT_LT(kv::Clock::now() - raised, 5s);
  ASSERT_TRUE(waiting->values()[0].ok()) << waiting->values()[0].status().to_string();
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  EXPECT_TRUE((*jobs().groups("work"))[0].full);
  ASSERT_TRUE(jobs().set_max_running_per_group("work", std::nullopt).ok());
  EXPECT_FALSE((*jobs().groups("work"))[0].full);
  EXPECT_EQ(accept_group(jobs()), "A");
  EXPECT_EQ(accept_group(jobs()), "A");
  EXPECT_EQ(jobs().count("work")->running, 4u);
  // Lowering marks the groups over it full at once.
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 1, 10));
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 3).ok());
  EXPECT_TRUE((*jobs().groups("work"))[0].full);
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
}

// Lowered below what a group runs, the limit holds until enough of its runs end; the run end
// that makes room wakes a waiting accept, though the accepts that found the group over the
// limit in between took nothing (so their marking it full did not commit).
TEST_P(GroupsTest, ALoweredLimitHoldsUntilEnoughRunsEnd) {
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 2).ok());
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 4));
  auto a = jobs().accept("work");
  auto b = jobs().accept("work");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 1).ok());
  EXPECT_TRUE((*jobs().groups("work"))[0].full);
  ASSERT_TRUE(jobs().finish(*a).ok());
  // One still runs: at the limit, though the end of a run put the group back in line.
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  auto other = open_another();
  auto waiting = std::make_shared<Delivered<Result<Job>>>();
  other->accept_async("work", {.timeout = 60s}, deliver_to(waiting));
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(waiting->values().empty()) << "taken over the limit";
  const auto ended = kv::Clock::now();
  ASSERT_TRUE(jobs().finish(*b).ok());
  ASSERT_TRUE(waiting->wait_for(1, 30s));
  EXPECT_LT(kv::Clock::now() - ended, 5s);
  ASSERT_TRUE(waiting->values()[0].ok()) << waiting->values()[0].status().to_string();
  EXPECT_EQ(group_of(waiting->values()[0]->id), "A");
  EXPECT_EQ(jobs().count("work")->running, 1u);
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
}

TEST_P(GroupsTest, InvariantsHoldAfterARandomMixOfEverything) {
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 2).ok());
  ASSERT_TRUE(jobs().set_retry_policy("work", {.max_attempts = 3}).ok());
  std::mt19937 rng(21);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<std::string> groups{"", "g1", "g2", "g3", "g4"};
  std::vector<Job> held;
  size_t accepted = 0;
  const int ops = etcd() ? 300 : 1000;
  for (int op = 0; op < ops; ++op) {
    const std::string id = "j" + std::to_string(pick(40));
    switch (pick(9)) {
      case 0:
      case 1: {
        AddOptions o{.priority = pick(3), .group = groups[pick(5)]};
        if (pick(4) == 0) o.scheduled_time_ms = wall_ms() + (pick(2) ? 3'600'000 : -1000);
        auto added = jobs().add("work", id, "{\"n\":" + std::to_string(op) + "}", o);
        ASSERT_TRUE(added.ok()) << added.status().to_string();
        break;
      }
      case 2:
      case 3: {
        auto taken = jobs().accept_many("work", 1 + pick(3), {.worker = pick(2) ? "w" : ""});
        if (taken.ok()) {
          held.insert(held.end(), taken->begin(), taken->end());
          accepted += taken->size();
        }
        break;
      }
      case 4:
      case 5:
        if (!held.empty()) {
          const size_t i = pick(static_cast<int>(held.size()));
          Job job = held[i];
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
          const int how = pick(3);
          Status s = how == 0   ? jobs().finish(job)
                     : how == 1 ? jobs().fail(job, {.message = "x", .retry_in = 0ms}).status()
                                : jobs().snooze(job, {.delay = 0ms});
          // Halted: the job was removed, cancelled or released meanwhile.
          EXPECT_TRUE(s.ok() || s.code() == Code::kFailedPrecondition) << s.to_string();
        }
        break;
      case 6: {
        const int how = pick(3);
        Status s = how == 0   ? jobs().remove("work", id)
                   : how == 1 ? jobs().cancel("work", id)
                              : jobs().rerun("work", id);
        // Absent, or (cancel) already finished, or (rerun) not finished.
        EXPECT_TRUE(s.ok() || s.code() == Code::kNotFound || s.code() == Code::kWrongState)
            << s.to_string();
        break;
      }
      case 7: {
        auto released = jobs().release_worker("", "w");
        ASSERT_TRUE(released.ok()) << released.status().to_string();
        break;
      }
      case 8:
        if (pick(4) == 0) {
          ASSERT_TRUE(jobs()
                          .set_max_running_per_group(
                              "work", pick(2) ? std::optional<uint32_t>(1 + pick(3)) : std::nullopt)
                          .ok());
        }
        break;
    }
    if (op % 100 == 99) {
      ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
    }
  }
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  std::printf("random mix: %zu accepted; at the end %llu pending, %llu running, %llu finished\n",
              accepted, static_cast<unsigned long long>(counts->pending),
              static_cast<unsigned long long>(counts->running),
              static_cast<unsigned long long>(counts->finished));
  EXPECT_GT(accepted, static_cast<size_t>(ops / 20));
  // Drained and removed, nothing of the groups is left.
  ASSERT_TRUE(jobs().remove_all_jobs("work").ok());
  EXPECT_TRUE(space_of(15, "work").empty());
  EXPECT_TRUE(space_of(16, "work").empty());
  EXPECT_TRUE(space_of(17, "work").empty());
  EXPECT_TRUE(jobs().clear_type_timeout("work").ok());
}

TEST_P(GroupsTest, ATypeWithoutGroupsWritesNoGroupKeys) {
  ASSERT_TRUE(jobs().set_max_running("work", 5).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(jobs().add("work", "j" + std::to_string(i), "{}").ok());
  auto taken = jobs().accept_many("work", 4);
  ASSERT_TRUE(taken.ok());
  for (auto& job : *taken) ASSERT_TRUE(jobs().finish(job).ok());
  auto one = jobs().accept("work");
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(jobs().fail(*one, {.message = "x"}).ok());  // pending again, due in a second
  // Not the failed one: an accept retried after an injected fault spreads its pick
  // (pending_picks.h), so it may have taken any of the first due jobs, j9 included.
  ASSERT_TRUE(jobs().remove("work", one->id == "j9" ? "j8" : "j9").ok());
  EXPECT_EQ(*jobs().pending_count("work"), 4u);
  EXPECT_TRUE(space_of(15, "work").empty());
  EXPECT_TRUE(space_of(16, "work").empty());
  EXPECT_TRUE(space_of(17, "work").empty());
  EXPECT_FALSE(jobs().get_type("work")->has_groups);
  EXPECT_TRUE(jobs().groups("work")->empty());
  EXPECT_EQ(jobs().get("work", "j0")->group, "");
}

TEST_P(GroupsTest, GroupsAreValidatedStoredCountedAndListed) {
  EXPECT_EQ(jobs()
                .add("work", "x", "{}", {.group = std::string(jobs::kMaxGroupBytes + 1, 'g')})
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().add("work", "x", "{}", {.group = "a\nb"}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().add_many("work", {{"x", "{}", {.group = "a\tb"}}}).status().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(
      jobs().add("work", "x", "{}", {.group = std::string(jobs::kMaxGroupBytes, 'g')}).ok());
  EXPECT_TRUE(jobs().get_type("work")->has_groups);
  EXPECT_EQ(jobs().get("work", "x")->group, std::string(jobs::kMaxGroupBytes, 'g'));

  const int64_t later = wall_ms() + 3'600'000;
  ASSERT_TRUE(jobs().add("work", "p", "{}", {.group = "a"}).ok());
  ASSERT_TRUE(jobs().add("work", "q", "{}", {.scheduled_time_ms = later, .group = "a"}).ok());
  ASSERT_TRUE(jobs().add("work", "r", "{}", {.group = "b"}).ok());
  ASSERT_TRUE(jobs().add("work", "u", "{}").ok());
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->pending, 5u);
  EXPECT_EQ(counts->scheduled, 1u);
  EXPECT_EQ(*jobs().pending_count("work"), 4u);
  EXPECT_EQ(*jobs().pending_count("work", {.max_scheduled_time_ms = later}), 5u);
  EXPECT_EQ(*jobs().pending_count("work", {.limit = 2}), 2u);
  auto pending = jobs().list("work", {.state = State::kPending});
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->jobs.size(), 5u);

  // An add to a pending job moves it to the group it names ("" for none).
  ASSERT_TRUE(jobs().add("work", "r", "{}", {.group = "a"}).ok());
  EXPECT_EQ(jobs().get("work", "r")->group, "a");
  ASSERT_TRUE(jobs().add("work", "u", "{}", {.group = "b"}).ok());
  ASSERT_TRUE(jobs().add("work", "x", "{}").ok());
  EXPECT_EQ(jobs().get("work", "x")->group, "");
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));

  auto listed = jobs().groups("work");
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].group, "a");
  EXPECT_EQ((*listed)[0].pending, 3u);
  EXPECT_EQ((*listed)[0].running, 0u);
  EXPECT_FALSE((*listed)[0].full);
  ASSERT_TRUE((*listed)[0].in_turn_at_ms);
  EXPECT_LE(*(*listed)[0].in_turn_at_ms, wall_ms());
  auto page = jobs().groups("work", 1, "a");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].group, "b");
  EXPECT_TRUE(jobs().groups("work", 10, "b")->empty());

  // A running job keeps its group when an add resubmits it.
  auto taken = jobs().accept_many("work", 10);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->size(), 4u);  // q is not due
  for (const auto& job : *taken) {
    ASSERT_TRUE(jobs().add("work", job.id, "{}", {.group = "c"}).ok());
    EXPECT_NE(jobs().get("work", job.id)->group, "c");
  }
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));

  EXPECT_EQ(jobs().groups("nope").status().code(), Code::kNotFound);
  EXPECT_EQ(jobs().groups("work", 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().groups("work", 1001).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().groups("work", 10, "a\x01").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_max_running_per_group("work", 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_max_running_per_group("work", jobs::kMaxRunningLimit + 1).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(jobs().set_max_running_per_group("nope", 1).code(), Code::kNotFound);
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 2).ok());
  EXPECT_EQ(jobs().get_type("work")->max_running_per_group, 2u);
}

// accept_job takes a grouped job out of turn; the group's row, its (15) entries and its place
// in the queue (16) follow, and a group it fills leaves the queue as an accept's would.
TEST_P(GroupsTest, AcceptJobKeepsGroupsAndLimitsTrue) {
  ASSERT_TRUE(jobs().set_max_running_per_group("work", 2).ok());
  ASSERT_NO_FATAL_FAILURE(add_group("work", "A", 4));
  ASSERT_NO_FATAL_FAILURE(add_group("work", "B", 2));
  auto third = jobs().accept_job("work", "A/000002");
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
  auto fourth = jobs().accept_job("work", "A/000003");
  ASSERT_TRUE(fourth.ok()) << fourth.status().to_string();
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
  // A is full (two running): accepts pass it over for B, and accept_any does too.
  auto groups = jobs().groups("work");
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_TRUE((*groups)[0].full);
  EXPECT_EQ((*groups)[0].running, 2u);
  EXPECT_EQ(accept_group(jobs()), "B");
  auto any = jobs().accept_any({"work"});
  ASSERT_TRUE(any.ok()) << any.status().to_string();
  EXPECT_EQ(group_of(any->id), "B");
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  // Past the limit, flow control notwithstanding: A runs three.
  auto over = jobs().accept_job("work", "A/000000");
  ASSERT_TRUE(over.ok()) << over.status().to_string();
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
  // Finishing two of A's runs brings it back below the limit, into the queue.
  ASSERT_TRUE(jobs().finish(*third).ok());
  ASSERT_TRUE(jobs().finish(*fourth).ok());
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
  EXPECT_EQ(accept_group(jobs()), "A");
  // A dead grouped job is rerun into its group and taken.
  ASSERT_TRUE(jobs().finish(*over).ok());
  jobs::FailOptions fail;
  fail.message = "boom";
  fail.retry = false;
  ASSERT_NO_FATAL_FAILURE(add_group("work", "C", 1));
  auto c = jobs().accept_job("work", "C/000000");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(jobs().fail(*c, fail).ok());
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
  auto again = jobs().accept_job("work", "C/000000");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->attempt, 1u);
  ASSERT_NO_FATAL_FAILURE(check_invariants("work"));
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->dead, 0u);
  EXPECT_EQ(counts->running, 4u);  // A/000001, B's two, C
  EXPECT_EQ(counts->pending, 0u);
}

// accept_job counts in the rate window and in max_running as an accept does.
TEST_P(GroupsTest, AcceptJobCountsInTheTypesFlowControl) {
  ASSERT_TRUE(jobs().set_rate_limit("work", jobs::RateLimit{2, 3'600'000ms}).ok());
  // Priorities of their own: a retry after an injected fault spreads its pick within one.
  for (int64_t i = 0; i < 3; ++i) {
    const std::string id(1, static_cast<char>('a' + i));
    ASSERT_TRUE(producer().add("work", id, "{}", {.priority = i}).ok());
  }
  ASSERT_TRUE(jobs().accept_job("work", "c").ok());
  ASSERT_TRUE(jobs().accept("work").ok());
  // Two accepts in the window: the limit holds the third, accept's and accept_any's alike.
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(jobs().accept_any({"work"}).status().code(), Code::kDeadlineExceeded);
  ASSERT_TRUE(jobs().set_rate_limit("work", std::nullopt).ok());
  ASSERT_TRUE(jobs().set_max_running("work", 2).ok());
  EXPECT_EQ(jobs().accept("work").status().code(), Code::kDeadlineExceeded);
  ASSERT_TRUE(jobs().accept_job("work", "b").ok());  // over max_running, named
  auto counts = jobs().count("work");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->running, 3u);
  EXPECT_EQ(counts->pending, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, GroupsTest, ::testing::ValuesIn(jobs_params()), jobs_param_name);

}  // namespace
}  // namespace kvq::testing
