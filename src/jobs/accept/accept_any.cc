// accept_any and accept_job: accepts that choose among several types, or name their job. Their
// looks are any_picks.h's and take_named's; a waiting accept_any is one waiter of all its types
// (accept_waiters.h).
#include <utility>

#include "jobs/accept/any_picks.h"
#include "jobs/jobs_impl.h"
#include "jobs/types.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

std::string names_of(const std::vector<std::string>& types) {
  std::string names;
  for (const std::string& type : types) names += (names.empty() ? "'" : ", '") + type + "'";
  return names;
}

// accept_any_async; `off_thread`: its look must not block this thread.
// `reserved`: as Jobs::queue_accept's.
uint64_t look_for_any(kv::Store& store, Jobs::Impl& impl, const std::vector<std::string>& types,
                      const AcceptOptions& options, std::function<void(Result<Job>)> done,
                      bool off_thread, uint64_t reserved = 0) {
  AcceptWaiters& waiters = impl.accept_waiters;
  if (Status invalid = validate_accept_any(types, options); !invalid.ok()) {
    if (reserved) waiters.forget(reserved);
    done(invalid);
    return 0;
  }
  std::vector<Taker> takers = takers_for(types, options);
  // The queue latency of the job taken counts for its type; the other takers' notes go.
  done = [stats = &impl.type_stats, latencies = &impl.local_accepts.latencies, takers,
          done = std::move(done)](Result<Job> job) {
    for (const Taker& taker : takers) {
      const auto latency = latencies->take(taker.lock);
      if (job.ok() && job->lock == taker.lock && latency)
        stats->record_accepted(job->type, *latency);
    }
    done(std::move(job));
  };
  const auto deadline = kv::Clock::now() + options.timeout;
  // A cancel before the wait is queued ends it at once when it is (AcceptWaiters::reserve).
  const uint64_t ticket = reserved ? reserved : options.timeout.count() > 0 ? waiters.reserve() : 0;
  auto look = [&store, &impl, &waiters, types, options, takers, deadline, ticket,
               done = std::move(done)]() {
    attempt_accept_any_async(
        store, impl.accept_scope, types, options, takers, /*arm=*/ticket != 0,
        [&waiters, types, options, takers, deadline, ticket, done](AnyOutcome outcome) {
          auto& job = outcome.job;
          if (!job.ok() || job->has_value() || ticket == 0) {
            if (ticket != 0) waiters.forget(ticket);
            if (!job.ok()) return done(job.status());
            if (job->has_value()) return done(std::move(**job));
            return done(DeadlineExceeded("no job of types " + names_of(types) + " is due"));
          }
          waiters.submit_any(types, options, takers, deadline, std::move(outcome.look), done,
                             ticket);
        });
  };
  if (off_thread) {
    run_look(impl, std::move(look));
  } else {
    look();
  }
  return ticket;
}

}  // namespace

uint64_t Jobs::accept_any_async(const std::vector<std::string>& types, const AcceptOptions& options,
                                std::function<void(Result<Job>)> done) {
  return queue_accept_any(types, options, std::move(done), 0);
}

uint64_t Jobs::queue_accept_any(const std::vector<std::string>& types, const AcceptOptions& options,
                                std::function<void(Result<Job>)> done, uint64_t reserved) {
  // No wait: nothing for the ticket to cancel.
  if (reserved && options.timeout.count() == 0) {
    impl_->accept_waiters.forget(reserved);
    reserved = 0;
  }
  // One type: an accept of it, which may join the type's round (joins_round).
  if (types.size() == 1 && joins_round(*store_, impl_->accept_scope, types[0], options))
    return queue_accept(types[0], options, std::move(done), /*look_async=*/false, reserved);
  return look_for_any(*store_, *impl_, types, options, std::move(done), /*off_thread=*/true,
                      reserved);
}

Result<Job> Jobs::accept_any(const std::vector<std::string>& types, const AcceptOptions& options) {
  return wait_for<Result<Job>>([&](auto done) {
    look_for_any(*store_, *impl_, types, options, std::move(done), /*off_thread=*/false);
  });
}

Result<Job> Jobs::accept_job(std::string_view type, std::string_view id,
                             const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_accept(type, options));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  const Taker taker{new_lock(type), options.worker, options.worker_type};
  std::optional<uint64_t> tried_version;
  auto job = kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<Job> {
        // After an unknown commit result, the earlier try may have taken the job: it then runs
        // under this call's lock.
        if (tried_version && txn.earlier_commit_unknown()) {
          KVQ_ASSIGN_OR_RETURN(auto found,
                               find_accepted(txn, impl_->keys, type, *tried_version, {taker}));
          if (!found.empty()) return std::move(found.front());
        }
        KVQ_RETURN_IF_ERROR(require_type(txn, impl_->keys, type));
        auto taken = take_named(txn, impl_->accept_scope, type, id, taker);
        KVQ_ASSIGN_OR_RETURN(tried_version, txn.read_version());
        return taken;
      },
      options_.retry);
  const auto latency = impl_->local_accepts.latencies.take(taker.lock);
  if (job.ok() && latency) impl_->type_stats.record_accepted(type, *latency);
  return job;
}

}  // namespace kvq::jobs
