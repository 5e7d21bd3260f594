// tests/support/lmdb_jobs_white_box.h — the fixture of the jobs layer's white-box tests: a
// Jobs on a fresh relaxed LMDB store, with type "work" (a 60-s timeout), and the options, Keys
// and accept scope its internals (src/jobs) are called with. The scope's LocalAccepts is the
// test's own, not the Jobs's: accepts made through it share nothing with the Jobs's.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "jobs/accept/pending_picks.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "support/temp_dir.h"

namespace kvq::testing {

class LmdbJobsWhiteBox : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = open_lmdb_store({.path = dir_.path(), .durability = Durability::kNoSync});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    store_ = *store;
    auto opened = jobs::Jobs::open(store_, options_);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    jobs_ = std::move(*opened);
    ASSERT_TRUE(jobs_->set_type_timeout("work", std::chrono::seconds(60)).ok());
  }

  TempDir dir_;
  jobs::JobsOptions options_{.key_prefix = "t"};
  jobs::Keys keys_{options_.key_prefix};
  jobs::LocalAccepts local_;
  jobs::AcceptScope scope_{keys_, options_, local_};
  std::shared_ptr<kv::Store> store_;
  std::unique_ptr<jobs::Jobs> jobs_;
};

}  // namespace kvq::testing
