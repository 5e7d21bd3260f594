// accept: the entry points that hand due jobs to workers: they check their input, look once
// (pending_picks.h), and leave an accept that has to wait to the accept waiters.
#include <algorithm>

#include "jobs/jobs_impl.h"
#include "jobs/types.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

constexpr size_t kMaxAcceptMany = 1000;

// Records in the type's stats the queue latency of every job of `jobs` (an accept that
// completed) and drops the notes of the takers that got none.
void record_accepted(TypeStatsRecorder& stats, QueueLatencies& latencies, std::string_view type,
                     const std::vector<std::string>& locks, const std::vector<Job>* jobs) {
  for (const std::string& lock : locks) {
    const auto latency = latencies.take(lock);
    const bool got = jobs && std::any_of(jobs->begin(), jobs->end(),
                                         [&](const Job& job) { return job.lock == lock; });
    if (got && latency) stats.record_accepted(type, *latency);
  }
}

std::vector<std::string> locks_of(const std::vector<Taker>& takers) {
  std::vector<std::string> locks;
  for (const Taker& taker : takers) locks.push_back(taker.lock);
  return locks;
}

}  // namespace

bool looking_here(const kv::Store& store, const AcceptScope& scope, std::string_view type) {
  return !store.nonblocking() && scope.local.in_flight.under_way(type);
}

bool joins_round(const kv::Store& store, const AcceptScope& scope, std::string_view type,
                 const AcceptOptions& options) {
  return options.timeout.count() > 0 && looking_here(store, scope, type);
}

Result<Job> Jobs::accept(kv::Transaction& txn, std::string_view type,
                         const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_accept(type, options));
  const std::string lock = new_lock(type);
  auto job = try_accept(txn, impl_->accept_scope, type, options, lock, nullptr);
  // The caller's commit is not ours to see: not counted.
  impl_->local_accepts.latencies.take(lock);
  if (job.status().code() == Code::kNotFound)
    KVQ_RETURN_IF_ERROR(require_type(txn, impl_->keys, type));
  return job;
}

uint64_t Jobs::accept_async(std::string_view type, const AcceptOptions& options,
                            std::function<void(Result<Job>)> done) {
  return queue_accept(type, options, std::move(done),
                      store_->nonblocking() && options.timeout.count() > 0);
}

uint64_t Jobs::queue_accept(std::string_view type, const AcceptOptions& options,
                            std::function<void(Result<Job>)> done, bool look_async,
                            uint64_t reserved) {
  AcceptWaiters& waiters = impl_->accept_waiters;
  // Ends the call without a wait: a reserved ticket is let go first.
  auto end = [&](Result<Job> result) {
    if (reserved) waiters.forget(reserved);
    done(std::move(result));
    return uint64_t{0};
  };
  Status invalid = validate_accept(type, options);
  if (!invalid.ok()) return end(invalid);
  const auto deadline = kv::Clock::now() + options.timeout;
  const std::string type_name(type);
  const std::string lock = new_lock(type);
  done = [stats = &impl_->type_stats, latencies = &impl_->local_accepts.latencies, type_name, lock,
          done = std::move(done)](Result<Job> job) {
    std::vector<Job> got;
    if (job.ok()) got.push_back(*job);
    record_accepted(*stats, *latencies, type_name, {lock}, &got);
    done(std::move(job));
  };
  const auto commit = look_async ? AcceptWaiters::Commit::kAsync : AcceptWaiters::Commit::kBlocking;
  if (options.timeout.count() > 0 && waiters.has_waiters(type_name)) {
    return waiters.submit(type_name, options, lock, deadline, std::nullopt, std::move(done), commit,
                          reserved);
  }
  if (joins_round(*store_, impl_->accept_scope, type_name, options)) {
    // Checked first, off this thread: every accept of a type that does not exist fails at once.
    const uint64_t ticket = reserved ? reserved : waiters.reserve();
    run_look(*impl_, [this, &waiters, type_name, options, lock, deadline, ticket, commit,
                      done = std::move(done)]() mutable {
      if (Status missing = require_type(*store_, impl_->keys, type_name, options_.retry);
          !missing.ok()) {
        waiters.forget(ticket);
        return done(missing);
      }
      waiters.submit(type_name, options, lock, deadline, std::nullopt, std::move(done), commit,
                     ticket);
    });
    return ticket;
  }
  // Before looking: a watch live since before our look fires for every add it cannot see.
  const uint64_t generation = waiters.watch_generation(type_name);
  if (look_async) {
    const uint64_t ticket = reserved ? reserved : waiters.reserve();
    attempt_accept_many_async(
        *store_, impl_->accept_scope, type_name, options,
        {{lock, options.worker, options.worker_type}}, ArmWatch::kNone,
        [this, &waiters, type_name, options, lock, deadline, generation, ticket,
         done = std::move(done)](AcceptOutcome outcome) {
          auto& jobs = outcome.jobs;
          if (jobs.ok() || jobs.status().code() != Code::kNotFound) {
            waiters.forget(ticket);
            if (!jobs.ok()) return done(jobs.status());
            return done(std::move(jobs->front()));
          }
          // Nothing due: a type that does not exist fails now instead of waiting.
          if (Status missing = require_type(*store_, impl_->keys, type_name, options_.retry);
              !missing.ok()) {
            waiters.forget(ticket);
            return done(missing);
          }
          if (options.timeout.count() == 0) {
            waiters.forget(ticket);
            return done(DeadlineExceeded("no job of type '" + type_name + "' is due"));
          }
          waiters.submit(type_name, options, lock, deadline, generation, done,
                         AcceptWaiters::Commit::kAsync, ticket);
        });
    return ticket;
  }
  auto job = attempt_accept(*store_, impl_->accept_scope, type, options, lock, nullptr);
  if (job.ok() || job.status().code() != Code::kNotFound) return end(std::move(job));
  if (Status missing = require_type(*store_, impl_->keys, type, options_.retry); !missing.ok())
    return end(missing);
  if (options.timeout.count() == 0)
    return end(DeadlineExceeded("no job of type '" + type_name + "' is due"));
  return waiters.submit(type_name, options, lock, deadline, generation, std::move(done), commit,
                        reserved);
}

namespace {

// The takers of an accept of up to `max_count` jobs, after checking its input.
Result<std::vector<Taker>> many_takers(std::string_view type, size_t max_count,
                                       const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_accept(type, options));
  if (max_count < 1 || max_count > kMaxAcceptMany) {
    return InvalidArgument("accept_many wants 1.." + std::to_string(kMaxAcceptMany) + " jobs");
  }
  std::vector<Taker> takers;
  for (size_t i = 0; i < max_count; ++i)
    takers.push_back({new_lock(type), options.worker, options.worker_type});
  return takers;
}

}  // namespace

void Jobs::accept_due_async(std::string_view type, size_t max_count, const AcceptOptions& options,
                            std::function<void(Result<std::vector<Job>>)> done) {
  auto takers = many_takers(type, max_count, options);
  if (!takers.ok()) return done(takers.status());
  done = [stats = &impl_->type_stats, latencies = &impl_->local_accepts.latencies,
          type_name = std::string(type), locks = locks_of(*takers),
          done = std::move(done)](Result<std::vector<Job>> jobs) {
    record_accepted(*stats, *latencies, type_name, locks, jobs.ok() ? &*jobs : nullptr);
    done(std::move(jobs));
  };
  attempt_accept_many_async(
      *store_, impl_->accept_scope, std::string(type), options, std::move(*takers), ArmWatch::kNone,
      [this, type_name = std::string(type), done = std::move(done)](AcceptOutcome outcome) {
        if (outcome.jobs.ok() || outcome.jobs.status().code() != Code::kNotFound) {
          return done(std::move(outcome.jobs));
        }
        Status missing = require_type(*store_, impl_->keys, type_name, options_.retry);
        if (!missing.ok()) return done(missing);
        done(DeadlineExceeded("no job of type '" + type_name + "' is due"));
      });
}

Result<std::vector<Job>> Jobs::accept_many(std::string_view type, size_t max_count,
                                           const AcceptOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto takers, many_takers(type, max_count, options));
  auto jobs = attempt_accept_many(*store_, impl_->accept_scope, type, options, takers, nullptr);
  record_accepted(impl_->type_stats, impl_->local_accepts.latencies, type, locks_of(takers),
                  jobs.ok() ? &*jobs : nullptr);
  if (jobs.ok() || jobs.status().code() != Code::kNotFound) return jobs;
  KVQ_RETURN_IF_ERROR(require_type(*store_, impl_->keys, type, options_.retry));
  if (options.timeout.count() == 0)
    return DeadlineExceeded("no job of type '" + std::string(type) + "' is due");
  // Nothing due: wait for one like accept, then take the rest of what is due with it.
  KVQ_ASSIGN_OR_RETURN(auto first, accept(type, options));
  std::vector<Job> out{std::move(first)};
  if (max_count > 1) {
    takers.resize(max_count - 1);
    auto more = attempt_accept_many(*store_, impl_->accept_scope, type, options, takers, nullptr);
    record_accepted(impl_->type_stats, impl_->local_accepts.latencies, type, locks_of(takers),
                    more.ok() ? &*more : nullptr);
    if (more.ok()) std::move(more->begin(), more->end(), std::back_inserter(out));
  }
  return out;
}

bool Jobs::cancel_accept(uint64_t ticket) {
  return ticket != 0 && impl_->accept_waiters.cancel(ticket);
}

Result<Job> Jobs::accept(std::string_view type, const AcceptOptions& options) {
  return wait_for<Result<Job>>(
      [&](auto done) { queue_accept(type, options, std::move(done), /*look_async=*/false); });
}

}  // namespace kvq::jobs
