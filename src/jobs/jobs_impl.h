// jobs/jobs_impl.h — what a Jobs is made of: the keys, the background loops, and the helper
// that runs an operation in its own transaction or the caller's.
#pragma once

#include <memory>

#include "jobs/acceptor.h"
#include "jobs/activity_monitor.h"
#include "jobs/notifier.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

struct Jobs::Impl {
  Impl(kv::Store& store, const JobsOptions& options)
      : keys(options.key_prefix), notifier(store, keys, options.retry), acceptor(store, keys, options, notifier) {
    if (options.run_activity_monitor) monitor = std::make_unique<ActivityMonitor>(store, keys, options);
  }
  Keys keys;
  Notifier notifier;
  Acceptor acceptor;  // after the notifier: it is destroyed first
  std::unique_ptr<ActivityMonitor> monitor;
};

// A fresh random lock. Its suffix tags the type, so a handle used with another type is caught
// as invalid input rather than reported as a fenced-out worker.
std::string new_lock(std::string_view type);
std::string type_tag(std::string_view type);

// The non-blocking heart of accept, in the caller's transaction. On nothing due: kNotFound,
// and *next_due (if given) receives the earliest scheduled time of a pending job not yet due.
Result<Job> try_accept(kv::Transaction& txn, const Keys& keys, const JobsOptions& options, std::string_view type,
                       const AcceptOptions& accept, const std::string& lock, std::optional<int64_t>* next_due);
// After an unknown commit result: the job an earlier attempt (at read version `version`) took
// with `lock`, if that attempt did commit.
Result<std::optional<Job>> find_accepted(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                         uint64_t version, const std::string& lock);

}  // namespace kvq::jobs
