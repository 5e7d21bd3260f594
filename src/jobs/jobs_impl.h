// jobs/jobs_impl.h — what a Jobs is made of: the keys, the background loops, and the helper
// that runs an operation in its own transaction or the caller's.
#pragma once

#include <memory>

#include "jobs/accept_waiters.h"
#include "jobs/activity_monitor.h"
#include "jobs/notifier.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

struct Jobs::Impl {
  Impl(kv::Store& store, const JobsOptions& options)
      : keys(options.key_prefix), notifier(store, keys, options.retry), accept_waiters(store, keys, options) {
    if (options.run_activity_monitor) monitor = std::make_unique<ActivityMonitor>(store, keys, options);
  }
  Keys keys;
  Notifier notifier;  // subscriptions
  AcceptWaiters accept_waiters;  // waiting accepts
  std::unique_ptr<ActivityMonitor> monitor;
};

// A fresh random lock. Its suffix tags the type, so a handle used with another type is caught
// as invalid input rather than reported as a fenced-out worker.
std::string new_lock(std::string_view type);
std::string type_tag(std::string_view type);

// The non-blocking heart of accept, in the caller's transaction: takes up to takers.size()
// distinct due jobs (highest priority first), the i-th for takers[i]. On nothing due:
// kNotFound. When fewer jobs than takers were due, *next_due (if given) receives the earliest
// scheduled time of a pending job not yet due, if any.
Result<std::vector<Job>> try_accept_many(kv::Transaction& txn, const Keys& keys, const JobsOptions& options,
                                         std::string_view type, const AcceptOptions& accept,
                                         const std::vector<Taker>& takers, std::optional<int64_t>* next_due);
// try_accept_many for one taker: `lock` and accept.worker.
Result<Job> try_accept(kv::Transaction& txn, const Keys& keys, const JobsOptions& options, std::string_view type,
                       const AcceptOptions& accept, const std::string& lock, std::optional<int64_t>* next_due);
// After an unknown commit result: the jobs an earlier attempt (at read version `version`) took
// for `takers`, if that attempt did commit (all of them, or none).
Result<std::vector<Job>> find_accepted(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                       uint64_t version, const std::vector<Taker>& takers);

}  // namespace kvq::jobs
