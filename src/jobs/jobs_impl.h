// jobs/jobs_impl.h — what a Jobs is made of: its keys and its background loops.
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

}  // namespace kvq::jobs
