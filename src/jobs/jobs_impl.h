// jobs/jobs_impl.h — what a Jobs is made of: its keys and its background loops.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "jobs/accept/accept.h"
#include "jobs/activity_monitor.h"
#include "jobs/job_numbers.h"
#include "jobs/notifier.h"
#include "jobs/scheduler.h"
#include "jobs/schema.h"
#include "jobs/type_stats.h"
#include "kvq/jobs.h"
#include "util/mutex.h"
#include "util/thread_pool.h"

namespace kvq::jobs {

struct Jobs::Impl {
  Impl(kv::Store& store, const JobsOptions& options)
      : keys(options.key_prefix),
        accept_scope{keys, options, local_accepts},
        notifier(store, keys, options.retry),
        accept_waiters(store, accept_scope) {
    if (options.run_activity_monitor)
      monitor = std::make_unique<ActivityMonitor>(store, keys, options, type_stats);
    if (!store.nonblocking()) blocking_looks = std::make_unique<util::ThreadPool>(2);
  }
  Keys keys;
  // What this Jobs's accepts share in this process, and the scope they run in: before the
  // loops and waiters that use them, so destroyed after them.
  LocalAccepts local_accepts;
  AcceptScope accept_scope;
  TypeStatsRecorder type_stats;  // Jobs::type_stats; before the loops that record into it
  Notifier notifier;             // subscriptions
  AcceptWaiters accept_waiters;  // waiting accepts
  JobNumbers job_numbers;        // next_job_number's block
  std::unique_ptr<ActivityMonitor> monitor;
  // Where accept_batch_async's second look runs on a store that is not nonblocking (it blocks
  // there), off the accept waiters' threads. Null elsewhere. Last: its tasks use the members above.
  std::unique_ptr<util::ThreadPool> blocking_looks;
  // The schedules' loop (JobsOptions::run_scheduler), started by Jobs once this Impl is whole,
  // as it calls the Jobs back. Declared last so that it stops first: its ticks add jobs.
  std::unique_ptr<Scheduler> scheduler;
};

inline Jobs::Impl& impl_of(Jobs& jobs) { return *jobs.impl_; }

template <typename R, typename... Params, typename... Args>
R Jobs::in_own_transaction(R (Jobs::*call)(kv::Transaction&, Params...), Args&&... args) {
  return kv::run(
      *store_, [&](kv::Transaction& txn) { return (this->*call)(txn, args...); }, options_.retry);
}

// Runs `look` — a look that commits through kv::run_async — without blocking the calling
// thread: at once on a nonblocking store (where run_async does not block), else on
// blocking_looks.
inline void run_look(Jobs::Impl& impl, std::function<void()> look) {
  if (!impl.blocking_looks) return look();
  impl.blocking_looks->post(std::move(look));
}

// A blocking entry point over an asynchronous one: calls `start` with a callback taking a T,
// and returns what that callback is given, waiting for it.
template <typename T, typename Start>
T wait_for(Start start) {
  util::Mutex mu;
  util::CondVar cv;
  std::optional<T> outcome;  // guarded by mu (a local: the analysis cannot say so)
  start([&](T result) {
    util::MutexLock lock(mu);
    outcome.emplace(std::move(result));
    cv.notify_all();
  });
  util::MutexLock lock(mu);
  while (!outcome.has_value()) cv.wait(mu);
  return std::move(*outcome);
}

}  // namespace kvq::jobs
