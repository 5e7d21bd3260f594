// tests/support/unknown_commit_once.h — a Jobs on a test's raw store whose first commit that
// applies is reported to it as unknown, after which nothing more is injected: for a call
// retried after a commit that did apply (it must recognise its own commit, not apply twice).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "kv/fault_injection.h"
#include "kvq/jobs.h"
#include "support/hooked_store.h"

namespace kvq::testing {

class UnknownCommitOnce {
 public:
  UnknownCommitOnce(std::shared_ptr<kv::Store> raw, uint64_t seed)
      : faulty_(std::make_shared<kv::FaultInjectingStore>(
            std::move(raw), kv::FaultOptions{.unknown_result_rate = 1, .seed = seed})) {
    auto hooked = std::make_shared<HookedStore>(faulty_, [this] {
      std::lock_guard lock(mu_);
      if (happened_ || faulty_->counts().unknown_applied == 0) return;
      faulty_->set_options({});
      happened_ = true;
    });
    auto opened = jobs::Jobs::open(
        hooked, {.key_prefix = "t", .run_activity_monitor = false, .run_scheduler = false});
    if (opened.ok()) jobs_ = std::move(*opened);
  }
  UnknownCommitOnce(const UnknownCommitOnce&) = delete;
  UnknownCommitOnce& operator=(const UnknownCommitOnce&) = delete;

  // nullptr if it could not be opened.
  jobs::Jobs* jobs() { return jobs_.get(); }
  // Whether a commit was reported unknown after applying (and the injecting stopped).
  bool happened() {
    std::lock_guard lock(mu_);
    return happened_;
  }

 private:
  std::shared_ptr<kv::FaultInjectingStore> faulty_;
  std::mutex mu_;
  bool happened_ = false;
  std::unique_ptr<jobs::Jobs> jobs_;  // last: destroyed first, as its loops use the hook
};

}  // namespace kvq::testing
