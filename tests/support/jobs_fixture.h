// The fixture the jobs suites share: every backend (and lmdb_nosync again through the fault
// injector), a fresh store per test, and a Jobs on it with type "work" (timeout 60 s).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "support/backends.h"
#include "support/temp_dir.h"

namespace kvq::testing {

inline int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct JobsParam {
  Backend backend;
  bool faults;
};

inline void PrintTo(const JobsParam& p, std::ostream* os) {
  *os << p.backend.name << (p.faults ? "_faults" : "");
}

inline std::vector<JobsParam> jobs_params() {
  std::vector<JobsParam> out;
  for (auto& b : all_backends()) out.push_back({b, false});
  for (auto& b : all_backends()) {
    if (b.name == "lmdb_nosync") out.push_back({b, true});
  }
  return out;
}

inline std::string jobs_param_name(const ::testing::TestParamInfo<JobsParam>& info) {
  return info.param.backend.name + (info.param.faults ? "_faults" : "");
}

class JobsFixture : public ::testing::TestWithParam<JobsParam> {
 protected:
  void SetUp() override {
    using namespace std::chrono_literals;
    auto opened = GetParam().backend.open(dir_.path());
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    raw_ = *opened;
    std::shared_ptr<kv::Store> store = raw_;
    if (GetParam().faults) {
      faulty_ = std::make_shared<kv::FaultInjectingStore>(
          raw_, kv::FaultOptions{.conflict_rate = 0.05,
                                 .unavailable_rate = 0.02,
                                 .unknown_result_rate = 0.05,
                                 .seed = 1234});
      store = faulty_;
    }
    // No scheduler: its reads would take rolls of the fault injector's seeded sequence at times
    // of their own. The schedules suite opens Jobs that run one.
    auto j = jobs::Jobs::open(
        store, {.key_prefix = "t", .monitor_checks_per_timeout = 4, .run_scheduler = false});
    ASSERT_TRUE(j.ok()) << j.status().to_string();
    jobs_ = std::move(*j);
    ASSERT_TRUE(jobs_->set_type_timeout("work", 60s).ok());
  }
  void TearDown() override { jobs_.reset(); }

  jobs::Jobs& jobs() { return *jobs_; }
  kv::Store& raw() { return *raw_; }
  // The store the Jobs runs on: raw(), or the fault injector around it.
  kv::Store& store() { return faulty_ ? static_cast<kv::Store&>(*faulty_) : *raw_; }
  std::shared_ptr<kv::Store> raw_ptr() { return raw_; }
  // Whether the fault injector has reported a commit's result as unknown after applying it.
  bool a_commit_result_was_hidden() const {
    return faulty_ && faulty_->counts().unknown_applied > 0;
  }

  TempDir dir_;
  std::shared_ptr<kv::Store> raw_;
  std::shared_ptr<kv::FaultInjectingStore> faulty_;  // null unless GetParam().faults
  std::unique_ptr<jobs::Jobs> jobs_;
};

}  // namespace kvq::testing
