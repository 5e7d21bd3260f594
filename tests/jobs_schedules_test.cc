// Schedules (kvq/jobs.h, "Schedules"), on every backend and through the fault injector: the
// operations, each occurrence enqueued exactly once by several schedulers at once, and what
// catch_up does with occurrences missed while no scheduler ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "kvq/tuple.h"
#include "support/jobs_fixture.h"

namespace kvq::testing {
namespace {

using namespace std::chrono_literals;
using jobs::CatchUp;
using jobs::Jobs;
using jobs::ScheduleInfo;
using jobs::ScheduleSpec;
using jobs::State;

constexpr char kPrefix[] = "s";
constexpr int64_t kSecond = 1000;

class SchedulesTest : public JobsFixture {
 protected:
  // The store this test's Jobs use: the fixture's, through its faults when it has them.
  std::shared_ptr<kv::Store> store() {
    if (faulty_) return faulty_;
    return raw_;
  }
  // The same state opened again, as another process would (on LMDB the same directory, on etcd
  // another client), with faults of its own when the test has them.
  std::shared_ptr<kv::Store> open_store_again(uint64_t seed) {
    auto opened = GetParam().backend.open(dir_.path());
    EXPECT_TRUE(opened.ok()) << opened.status().to_string();
    if (!opened.ok()) return nullptr;
    if (!GetParam().faults) return *opened;
    return std::make_shared<kv::FaultInjectingStore>(*opened,
                                                     kv::FaultOptions{.conflict_rate = 0.05,
                                                                      .unavailable_rate = 0.02,
                                                                      .unknown_result_rate = 0.05,
                                                                      .seed = seed});
  }
  // A Jobs under this suite's own prefix (the fixture's Jobs, which runs a scheduler, never sees
  // its schedules), with type "tick".
  std::unique_ptr<Jobs> open_jobs(std::shared_ptr<kv::Store> on, bool run_scheduler) {
    auto j = Jobs::open(std::move(on), {.key_prefix = kPrefix, .run_scheduler = run_scheduler});
    EXPECT_TRUE(j.ok()) << j.status().to_string();
    if (!j.ok()) return nullptr;
    EXPECT_TRUE((*j)->set_type_timeout("tick", 60s).ok());
    return std::move(*j);
  }
  std::vector<jobs::JobInfo> all_jobs(Jobs& j, const std::string& type) {
    auto page = j.list(type, {.limit = 10'000});
    EXPECT_TRUE(page.ok()) << page.status().to_string();
    return page.ok() ? page->jobs : std::vector<jobs::JobInfo>{};
  }
  // Waits for the wall clock to pass `wall` (the test waits for time itself, not an event).
  static void wait_for_wall_time(int64_t wall) {
    while (wall_ms() <= wall) std::this_thread::sleep_for(20ms);
  }
  // Moves a stored schedule's next run back by `by_ms`, as if no scheduler had run since: the
  // downtime a test cannot wait for. The row is Tuple(format, ..., next_run_ms at 7, ...).
  void move_next_run_back(const std::string& name, int64_t by_ms) {
    const jobs::Keys keys(kPrefix);
    Status moved = kv::run(raw(), [&](kv::Transaction& txn) -> Status {
      KVQ_ASSIGN_OR_RETURN(auto stored, txn.get(keys.schedule(name)));
      if (!stored) return NotFound(name);
      KVQ_ASSIGN_OR_RETURN(Tuple row, Tuple::unpack(*stored));
      std::vector<Element> elements = row.elements();
      elements.at(7) = elements.at(7).as_int() - by_ms;
      txn.set(keys.schedule(name), Tuple(std::move(elements)).pack());
      return Status::OK();
    });
    ASSERT_TRUE(moved.ok()) << moved.to_string();
  }
  static std::string id_at(const std::string& name, int64_t ms) {
    return Jobs::occurrence_job_id(name, ms);
  }
};

ScheduleSpec every_second(CatchUp catch_up = CatchUp::kOne) {
  return {.type = "tick", .cron = "* * * * * *", .catch_up = catch_up};
}

// ---- The operations ----

TEST_P(SchedulesTest, ScheduleIsPutReadListedReplacedAndRemoved) {
  auto j = open_jobs(store(), false);
  const int64_t before = wall_ms();
  auto put = j->put_schedule("nightly", {.type = "tick",
                                         .cron = "0 2 * * *",
                                         .timezone = "Europe/Paris",
                                         .data = R"({ "report" : true })",
                                         .priority = 5,
                                         .catch_up = CatchUp::kAll});
  ASSERT_TRUE(put.ok()) << put.status().to_string();
  EXPECT_EQ(put->name, "nightly");
  EXPECT_EQ(put->spec.data, R"({"report":true})") << "data is kept compact";
  EXPECT_EQ(put->spec.timezone, "Europe/Paris");
  EXPECT_EQ(put->spec.priority, 5);
  EXPECT_EQ(put->spec.catch_up, CatchUp::kAll);
  EXPECT_GT(put->next_run_ms, before);
  EXPECT_LE(put->next_run_ms, before + 25 * 3600 * kSecond);
  EXPECT_EQ(put->last_run_ms, 0);
  EXPECT_EQ(put->enqueued, 0u);
  EXPECT_GE(put->created_at_ms, before);

  auto got = j->get_schedule("nightly");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->spec.cron, "0 2 * * *");
  EXPECT_EQ(got->next_run_ms, put->next_run_ms);
  auto previewed = Jobs::next_runs(put->spec, before, 1);
  ASSERT_TRUE(previewed.ok()) << previewed.status().to_string();
  EXPECT_EQ(previewed->at(0), put->next_run_ms) << "the first occurrence is the first after now";

  ASSERT_TRUE(j->put_schedule("hourly", {.type = "tick", .cron = "@hourly"}).ok());
  auto all = j->schedules();
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "hourly");
  EXPECT_EQ((*all)[1].name, "nightly");

  auto replaced = j->put_schedule("nightly", {.type = "tick", .cron = "30 3 * * *"});
  ASSERT_TRUE(replaced.ok()) << replaced.status().to_string();
  EXPECT_EQ(replaced->created_at_ms, put->created_at_ms);
  EXPECT_EQ(replaced->spec.cron, "30 3 * * *");
  EXPECT_EQ(replaced->spec.catch_up, CatchUp::kOne);

  ASSERT_TRUE(j->remove_schedule("nightly").ok());
  EXPECT_EQ(j->get_schedule("nightly").status().code(), Code::kNotFound);
  EXPECT_EQ(j->remove_schedule("nightly").code(), Code::kNotFound);
  EXPECT_EQ(j->schedules()->size(), 1u);
  EXPECT_TRUE(all_jobs(*j, "tick").empty()) << "nothing was due";
}

TEST_P(SchedulesTest, BadSchedulesAreRefusedAndChangeNothing) {
  auto j = open_jobs(store(), false);
  auto code_of = [&](std::string_view name, const ScheduleSpec& spec) {
    return j->put_schedule(name, spec).status().code();
  };
  const ScheduleSpec good{.type = "tick", .cron = "*/5 * * * *"};
  EXPECT_EQ(code_of("", good), Code::kInvalidArgument);
  EXPECT_EQ(code_of(std::string(jobs::kMaxScheduleNameBytes + 1, 'n'), good),
            Code::kInvalidArgument);
  EXPECT_EQ(code_of("a/b", good), Code::kInvalidArgument);
  EXPECT_TRUE(j->put_schedule(std::string(jobs::kMaxScheduleNameBytes, 'n'), good).ok());

  auto with = [&](auto change) {
    ScheduleSpec spec = good;
    change(spec);
    return spec;
  };
  EXPECT_EQ(code_of("x", with([](ScheduleSpec& s) { s.cron = "61 * * * *"; })),
            Code::kInvalidArgument);
  EXPECT_EQ(code_of("x", with([](ScheduleSpec& s) { s.cron = "0 0 30 2 *"; })),
            Code::kInvalidArgument)
      << "an expression that never matches";
  EXPECT_EQ(code_of("x", with([](ScheduleSpec& s) { s.timezone = "Mars/Olympus_Mons"; })),
            Code::kInvalidArgument);
  EXPECT_EQ(code_of("x", with([](ScheduleSpec& s) { s.data = "[1]"; })), Code::kInvalidArgument);
  EXPECT_EQ(code_of("x", with([](ScheduleSpec& s) { s.data = "{"; })), Code::kInvalidArgument);
  EXPECT_EQ(code_of("x", with([&](ScheduleSpec& s) {
                      s.data =
                          R"({"a":")" + std::string(j->options().max_data_bytes, 'x') + R"("})";
                    })),
            Code::kInvalidArgument);
  EXPECT_EQ(code_of("x", with([](ScheduleSpec& s) { s.type = "no such type"; })),
            Code::kInvalidArgument);
  EXPECT_EQ(code_of("x", with([](ScheduleSpec& s) { s.type = "absent"; })), Code::kNotFound);
  EXPECT_EQ(j->get_schedule("x").status().code(), Code::kNotFound);
  EXPECT_EQ(j->schedules()->size(), 1u);
  EXPECT_EQ(j->get_schedule("a/b").status().code(), Code::kInvalidArgument);

  EXPECT_EQ(Jobs::next_runs(good, 0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Jobs::next_runs(good, 0, 1001).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Jobs::next_runs(with([](ScheduleSpec& s) { s.cron = "x"; }), 0, 1).status().code(),
            Code::kInvalidArgument);
}

TEST_P(SchedulesTest, CatchUpNamesParseAndPrint) {
  for (CatchUp c : {CatchUp::kNone, CatchUp::kOne, CatchUp::kAll})
    EXPECT_EQ(*jobs::parse_catch_up(jobs::catch_up_name(c)), c);
  EXPECT_EQ(jobs::catch_up_name(CatchUp::kOne), "one");
  EXPECT_EQ(jobs::parse_catch_up("some").status().code(), Code::kInvalidArgument);
}

TEST_P(SchedulesTest, NextRunsFollowTheExpressionInItsTimezone) {
  const int64_t dec1 = 1796090400000;  // 2026-12-01T02:00:00Z
  auto utc = Jobs::next_runs({.type = "tick", .cron = "0 2 * * *"}, dec1 - kSecond, 3);
  ASSERT_TRUE(utc.ok()) << utc.status().to_string();
  EXPECT_EQ(*utc, (std::vector<int64_t>{dec1, dec1 + 86'400'000, dec1 + 2 * 86'400'000}));
  auto strictly_after = Jobs::next_runs({.type = "tick", .cron = "0 2 * * *"}, dec1, 1);
  EXPECT_EQ(strictly_after->at(0), dec1 + 86'400'000);
  // Paris is UTC+1 in December: 02:00 there is 01:00Z.
  auto paris = Jobs::next_runs({.type = "tick", .cron = "0 2 * * *", .timezone = "Europe/Paris"},
                               dec1 - 2 * 3600 * kSecond, 1);
  ASSERT_TRUE(paris.ok()) << paris.status().to_string();
  EXPECT_EQ(paris->at(0), dec1 - 3600 * kSecond);
  auto seconds = Jobs::next_runs(every_second(), dec1 + 1, 3);
  EXPECT_EQ(*seconds,
            (std::vector<int64_t>{dec1 + kSecond, dec1 + 2 * kSecond, dec1 + 3 * kSecond}));
}

TEST_P(SchedulesTest, AnOccurrencesJobIdIsTheNameAndItsUtcSecond) {
  EXPECT_EQ(Jobs::occurrence_job_id("nightly", 1796090400000), "nightly@2026-12-01T02:00:00Z");
  EXPECT_EQ(Jobs::occurrence_job_id("n", 1796090400999), "n@2026-12-01T02:00:00Z");
  EXPECT_EQ(Jobs::occurrence_job_id("n", 0), "n@1970-01-01T00:00:00Z");
}

// ---- Exactly once ----

// Three schedulers on `stores` (one Jobs each) run a per-second schedule while a worker takes
// and finishes its jobs; then every occurrence from the first to the last has exactly one job,
// run once, and the schedule counted each.
void expect_each_occurrence_once(const std::vector<std::shared_ptr<kv::Store>>& stores,
                                 Jobs& checker) {
  std::vector<std::unique_ptr<Jobs>> schedulers;
  for (const auto& s : stores) {
    auto j = Jobs::open(s, {.key_prefix = kPrefix});
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    schedulers.push_back(std::move(*j));
  }
  // The schedulers are already asleep on the token: the put must wake them.
  ASSERT_TRUE(schedulers[0]->put_schedule("beat", every_second()).ok());
  constexpr size_t kOccurrences = 8;
  std::set<std::string> accepted;
  while (accepted.size() < kOccurrences) {
    auto job = schedulers[accepted.size() % 3]->accept("tick", {.timeout = 10s});
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_TRUE(accepted.insert(job->id).second) << job->id << " was run twice";
    ASSERT_TRUE(schedulers[0]->finish(*job).ok());
  }
  schedulers.clear();  // every scheduler stopped: nothing more is enqueued

  auto info = checker.get_schedule("beat");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  auto page = checker.list("tick", {.limit = 10'000});
  ASSERT_TRUE(page.ok()) << page.status().to_string();
  std::vector<jobs::JobInfo> found = page->jobs;
  ASSERT_GE(found.size(), kOccurrences);
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.scheduled_time_ms < b.scheduled_time_ms; });
  EXPECT_EQ(info->enqueued, found.size()) << "each job counted once";
  EXPECT_EQ(info->skipped, 0u);
  for (size_t i = 0; i < found.size(); ++i) {
    const int64_t at = found[0].scheduled_time_ms + static_cast<int64_t>(i) * kSecond;
    EXPECT_EQ(found[i].scheduled_time_ms, at) << "occurrence " << i << " missing or doubled";
    EXPECT_EQ(found[i].id, Jobs::occurrence_job_id("beat", at));
    if (accepted.contains(found[i].id)) {
      EXPECT_EQ(found[i].state, State::kFinished) << found[i].id;
      EXPECT_EQ(found[i].attempts, 1u) << found[i].id << " was enqueued again after it ran";
    }
  }
  EXPECT_EQ(info->last_job_id, found.back().id);
}

TEST_P(SchedulesTest, ThreeSchedulersOnOneStoreEnqueueEachOccurrenceOnce) {
  auto checker = open_jobs(store(), false);
  expect_each_occurrence_once({store(), store(), store()}, *checker);
}

TEST_P(SchedulesTest, ThreeSchedulersOnThreeOpenedStoresEnqueueEachOccurrenceOnce) {
  auto checker = open_jobs(store(), false);
  std::vector<std::shared_ptr<kv::Store>> stores{store(), open_store_again(11),
                                                 open_store_again(12)};
  ASSERT_TRUE(stores[1] && stores[2]);
  expect_each_occurrence_once(stores, *checker);
}

// ---- Downtime and catch_up ----

// Three per-second schedules, and about four seconds with no scheduler: catch_up all enqueues
// every missed occurrence, one only the latest, and none the latest as well, since it is
// within its grace (the second to the next occurrence).
TEST_P(SchedulesTest, MissedOccurrencesAreCaughtUpAsCatchUpSays) {
  auto j = open_jobs(store(), false);
  auto all = j->put_schedule("all", every_second(CatchUp::kAll));
  auto one = j->put_schedule("one", every_second(CatchUp::kOne));
  auto none = j->put_schedule("none", every_second(CatchUp::kNone));
  ASSERT_TRUE(all.ok() && one.ok() && none.ok());
  const int64_t first = std::max({all->next_run_ms, one->next_run_ms, none->next_run_ms});
  wait_for_wall_time(first + 3 * kSecond);
  EXPECT_TRUE(all_jobs(*j, "tick").empty()) << "no scheduler runs in this Jobs";

  auto enqueued = j->run_due_schedules();
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().to_string();
  auto jobs_of = [&](const std::string& name) {
    std::vector<std::string> ids;
    for (const auto& job : all_jobs(*j, "tick"))
      if (job.id.starts_with(name + "@")) ids.push_back(job.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  };

  auto all_after = *j->get_schedule("all");
  const size_t all_count =
      static_cast<size_t>((all_after.last_run_ms - all->next_run_ms) / kSecond) + 1;
  EXPECT_GE(all_count, 4u);
  std::vector<std::string> expected;
  for (size_t i = 0; i < all_count; ++i)
    expected.push_back(id_at("all", all->next_run_ms + static_cast<int64_t>(i) * kSecond));
  EXPECT_EQ(jobs_of("all"), expected);
  EXPECT_EQ(all_after.enqueued, all_count);
  EXPECT_EQ(all_after.skipped, 0u);
  EXPECT_GT(all_after.next_run_ms, all_after.last_run_ms);

  auto one_after = *j->get_schedule("one");
  EXPECT_GE(one_after.last_run_ms, first + 3 * kSecond);
  EXPECT_EQ(jobs_of("one"), std::vector<std::string>{id_at("one", one_after.last_run_ms)});
  EXPECT_EQ(one_after.enqueued, 1u);
  EXPECT_EQ(one_after.skipped,
            static_cast<uint64_t>((one_after.last_run_ms - one->next_run_ms) / kSecond));
  EXPECT_EQ(one_after.last_job_id, id_at("one", one_after.last_run_ms));

  auto none_after = *j->get_schedule("none");
  EXPECT_EQ(jobs_of("none"), std::vector<std::string>{id_at("none", none_after.last_run_ms)});
  EXPECT_EQ(none_after.skipped,
            static_cast<uint64_t>((none_after.last_run_ms - none->next_run_ms) / kSecond));
  if (!a_commit_result_was_hidden()) {
    EXPECT_EQ(*enqueued, all_count + 2);
  }

  auto again = j->run_due_schedules();
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  // Whatever came due since is enqueued as catch_up says, never an occurrence a second time.
  EXPECT_EQ(j->get_schedule("all")->enqueued, jobs_of("all").size());
}

// An hourly schedule whose last occurrence is five minutes gone (and the one before): past
// kNone's grace of a minute, so it enqueues nothing; kOne the latest; kAll both.
TEST_P(SchedulesTest, AfterALongDowntimeCatchUpNoneEnqueuesNothingLate) {
  auto j = open_jobs(store(), false);
  const int64_t five_minutes_ago = wall_ms() - 5 * 60 * kSecond;
  const int64_t minute = (five_minutes_ago / (60 * kSecond)) % 60;
  const std::string cron = std::to_string(minute) + " * * * *";
  for (auto [name, catch_up] : {std::pair{"none", CatchUp::kNone}, std::pair{"one", CatchUp::kOne},
                                std::pair{"all", CatchUp::kAll}}) {
    ASSERT_TRUE(j->put_schedule(name, {.type = "tick", .cron = cron, .catch_up = catch_up}).ok());
    move_next_run_back(name, 2 * 3600 * kSecond);
  }
  const int64_t next = j->get_schedule("one")->next_run_ms + 2 * 3600 * kSecond;
  const int64_t late = next - 3600 * kSecond;  // about five minutes ago
  const int64_t later = next - 2 * 3600 * kSecond;
  ASSERT_LT(late, wall_ms() - 60 * kSecond);

  auto enqueued = j->run_due_schedules();
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().to_string();
  if (!a_commit_result_was_hidden()) {
    EXPECT_EQ(*enqueued, 3u);
  }
  std::set<std::string> ids;
  for (const auto& job : all_jobs(*j, "tick")) ids.insert(job.id);
  EXPECT_EQ(ids,
            (std::set<std::string>{id_at("one", late), id_at("all", later), id_at("all", late)}));
  auto none = *j->get_schedule("none");
  EXPECT_EQ(none.skipped, 2u);
  EXPECT_EQ(none.enqueued, 0u);
  EXPECT_EQ(none.next_run_ms, next);
  EXPECT_EQ(j->get_schedule("one")->skipped, 1u);
  EXPECT_EQ(j->get_schedule("all")->next_run_ms, next);
}

// More missed occurrences than one transaction takes: kAll enqueues them all, in batches, and
// kOne counts them all as skipped but the latest.
TEST_P(SchedulesTest, ALongBacklogIsCaughtUpOverSeveralTransactions) {
  auto j = open_jobs(store(), false);
  ASSERT_TRUE(j->put_schedule("all", every_second(CatchUp::kAll)).ok());
  ASSERT_TRUE(j->put_schedule("one", every_second(CatchUp::kOne)).ok());
  move_next_run_back("all", 250 * kSecond);
  move_next_run_back("one", 12'000 * kSecond);
  const int64_t all_first = j->get_schedule("all")->next_run_ms;
  const int64_t one_first = j->get_schedule("one")->next_run_ms;

  auto enqueued = j->run_due_schedules();
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().to_string();
  auto all = *j->get_schedule("all");
  auto one = *j->get_schedule("one");
  EXPECT_GE(all.enqueued, 250u);
  EXPECT_EQ(all.enqueued, static_cast<uint64_t>((all.last_run_ms - all_first) / kSecond) + 1);
  EXPECT_EQ(one.enqueued, 1u);
  EXPECT_GE(one.skipped, 11'999u) << "more than one transaction counts";
  EXPECT_EQ(one.skipped, static_cast<uint64_t>((one.last_run_ms - one_first) / kSecond));
  if (!a_commit_result_was_hidden()) {
    EXPECT_EQ(*enqueued, all.enqueued + 1);
  }
  EXPECT_EQ(all_jobs(*j, "tick").size(), all.enqueued + 1);
}

TEST_P(SchedulesTest, ReplacingAScheduleKeepsItsCountsAndNeverGoesBack) {
  auto j = open_jobs(store(), false);
  ASSERT_TRUE(j->put_schedule("beat", every_second(CatchUp::kAll)).ok());
  move_next_run_back("beat", 3 * kSecond);
  ASSERT_TRUE(j->run_due_schedules().ok());
  auto ran = *j->get_schedule("beat");
  ASSERT_GE(ran.enqueued, 3u);

  auto replaced = j->put_schedule("beat", every_second(CatchUp::kAll));
  ASSERT_TRUE(replaced.ok()) << replaced.status().to_string();
  EXPECT_EQ(replaced->enqueued, ran.enqueued);
  EXPECT_EQ(replaced->last_run_ms, ran.last_run_ms);
  EXPECT_EQ(replaced->last_job_id, ran.last_job_id);
  EXPECT_EQ(replaced->created_at_ms, ran.created_at_ms);
  EXPECT_GT(replaced->next_run_ms, ran.last_run_ms);
}

// A paused schedule enqueues nothing, however long it stays due, and a resumed one goes on from
// its first occurrence after the resume: what came due while paused is never enqueued.
TEST_P(SchedulesTest, APausedScheduleEnqueuesNothingUntilResumed) {
  auto j = open_jobs(store(), false);
  ASSERT_TRUE(j->put_schedule("beat", every_second(CatchUp::kAll)).ok());
  EXPECT_EQ(j->pause_schedule("absent").status().code(), Code::kNotFound);
  EXPECT_EQ(j->resume_schedule("absent").status().code(), Code::kNotFound);
  auto paused = j->pause_schedule("beat");
  ASSERT_TRUE(paused.ok()) << paused.status().to_string();
  EXPECT_TRUE(paused->paused);
  EXPECT_TRUE(j->pause_schedule("beat")->paused) << "pausing again changes nothing";
  move_next_run_back("beat", 5 * kSecond);
  auto ran = j->run_due_schedules();
  ASSERT_TRUE(ran.ok()) << ran.status().to_string();
  EXPECT_EQ(*ran, 0u);
  EXPECT_TRUE(all_jobs(*j, "tick").empty());
  // Replacing it keeps it paused.
  auto replaced = j->put_schedule("beat", every_second(CatchUp::kAll));
  ASSERT_TRUE(replaced.ok()) << replaced.status().to_string();
  EXPECT_TRUE(replaced->paused);
  EXPECT_TRUE(j->get_schedule("beat")->paused);
  EXPECT_TRUE((*j->schedules())[0].paused);

  const int64_t resumed_at = wall_ms();
  auto resumed = j->resume_schedule("beat");
  ASSERT_TRUE(resumed.ok()) << resumed.status().to_string();
  EXPECT_FALSE(resumed->paused);
  EXPECT_GT(resumed->next_run_ms, resumed_at - kSecond);
  EXPECT_EQ(resumed->enqueued, 0u);
  EXPECT_EQ(resumed->skipped, 0u) << "what a pause left out is not skipped by catch_up";
  wait_for_wall_time(resumed->next_run_ms);
  ASSERT_TRUE(j->run_due_schedules().ok());
  const auto jobs = all_jobs(*j, "tick");
  ASSERT_FALSE(jobs.empty());
  for (const auto& job : jobs) {
    EXPECT_GE(job.scheduled_time_ms, resumed->next_run_ms) << job.id;
  }
  // A schedule never paused, and one resumed, have rows as before pauses existed.
  const jobs::Keys keys(kPrefix);
  auto row = kv::run(raw(), [&](kv::Transaction& txn) { return txn.get(keys.schedule("beat")); });
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ(Tuple::unpack(**row)->size(), 15u);
}

// The scheduler thread sleeps through a paused schedule (it does not spin on its past time) and
// takes it up at once when it is resumed.
TEST_P(SchedulesTest, TheRunningSchedulerWaitsOutAPauseAndWakesOnTheResume) {
  auto j = open_jobs(store(), true);
  ASSERT_TRUE(j->put_schedule("beat", every_second()).ok());
  ASSERT_TRUE(j->pause_schedule("beat").ok());
  const size_t before = all_jobs(*j, "tick").size();  // at most one, enqueued before the pause
  wait_for_wall_time(wall_ms() + 2 * kSecond);
  EXPECT_EQ(all_jobs(*j, "tick").size(), before);
  EXPECT_EQ(j->get_schedule("beat")->enqueued, before);
  ASSERT_TRUE(j->resume_schedule("beat").ok());
  const auto deadline = kv::Clock::now() + 10s;
  while (all_jobs(*j, "tick").size() == before && kv::Clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_GT(all_jobs(*j, "tick").size(), before);
}

// ---- Failures ----

// The type of one schedule is deleted: its occurrence is recorded as an error and skipped, it
// moves on, and the other schedules are enqueued as ever; once the type is back, so is it.
TEST_P(SchedulesTest, AScheduleWhoseTypeWasDeletedRecordsTheErrorAndTheSchedulerGoesOn) {
  auto j = open_jobs(store(), false);
  ASSERT_TRUE(j->set_type_timeout("gone", 60s).ok());
  ASSERT_TRUE(j->put_schedule("a-gone", {.type = "gone", .cron = "* * * * * *"}).ok());
  ASSERT_TRUE(j->put_schedule("b-fine", every_second()).ok());
  ASSERT_TRUE(j->clear_type_timeout("gone").ok());
  const int64_t due = j->get_schedule("a-gone")->next_run_ms;
  wait_for_wall_time(due);

  auto enqueued = j->run_due_schedules();
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().to_string();
  if (!a_commit_result_was_hidden()) {
    EXPECT_EQ(*enqueued, 1u) << "b-fine's";
  }
  auto gone = *j->get_schedule("a-gone");
  EXPECT_NE(gone.last_error.find("timeout"), std::string::npos) << gone.last_error;
  EXPECT_EQ(gone.enqueued, 0u);
  EXPECT_GE(gone.skipped, 1u);
  EXPECT_GT(gone.next_run_ms, due) << "it moved on";
  EXPECT_EQ(j->get_schedule("b-fine")->enqueued, 1u);

  ASSERT_TRUE(j->set_type_timeout("gone", 60s).ok());
  wait_for_wall_time(gone.next_run_ms);
  ASSERT_TRUE(j->run_due_schedules().ok());
  auto back = *j->get_schedule("a-gone");
  EXPECT_EQ(back.enqueued, 1u);
  EXPECT_EQ(back.last_error, "");
  EXPECT_TRUE(j->get("gone", back.last_job_id).ok());
}

// The same with the scheduler running by itself: the failing schedule does not stop it.
TEST_P(SchedulesTest, TheRunningSchedulerGoesOnPastAFailingSchedule) {
  auto j = open_jobs(store(), true);
  ASSERT_TRUE(j->set_type_timeout("gone", 60s).ok());
  ASSERT_TRUE(j->put_schedule("a-gone", {.type = "gone", .cron = "* * * * * *"}).ok());
  ASSERT_TRUE(j->clear_type_timeout("gone").ok());
  ASSERT_TRUE(j->put_schedule("b-fine", every_second()).ok());
  for (int i = 0; i < 2; ++i) {
    auto job = j->accept("tick", {.timeout = 10s});
    ASSERT_TRUE(job.ok()) << job.status().to_string();
  }
  // a-gone sorts first, so the tick that enqueued b-fine's second job had already failed it.
  auto gone = *j->get_schedule("a-gone");
  EXPECT_NE(gone.last_error, "");
  EXPECT_GE(gone.skipped, 1u);
  EXPECT_EQ(gone.enqueued, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, SchedulesTest, ::testing::ValuesIn(jobs_params()),
                         jobs_param_name);

}  // namespace
}  // namespace kvq::testing
