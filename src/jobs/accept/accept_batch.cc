// accept_batch_async: accept_many for an event loop, composed of the asynchronous accepts —
// what is due now (accept_due_async's look), else a waiter for the first (the accept waiters'),
// then the rest of what is due with it.
#include <iterator>

#include "jobs/jobs_impl.h"
#include "jobs/validation.h"
#include "util/thread_pool.h"

namespace kvq::jobs {
namespace {

constexpr size_t kMaxAcceptBatch = 1000;

using BatchDone = std::function<void(Result<std::vector<Job>>)>;

Status validate_batch(std::string_view type, size_t max_count, const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_accept(type, options));
  if (max_count < 1 || max_count > kMaxAcceptBatch) {
    return InvalidArgument("accept_batch_async wants 1.." + std::to_string(kMaxAcceptBatch) +
                           " jobs");
  }
  return Status::OK();
}

// The stats of a waiting accept's one job (accept.cc records the others').
void record_accepted_one(TypeStatsRecorder& stats, QueueLatencies& latencies,
                         const std::string& type, const std::string& lock,
                         const std::vector<Job>& got) {
  const auto latency = latencies.take(lock);
  if (!got.empty() && latency) stats.record_accepted(type, *latency);
}

}  // namespace

uint64_t Jobs::accept_batch_async(std::string_view type, size_t max_count,
                                  const AcceptOptions& options, BatchDone done) {
  if (Status invalid = validate_batch(type, max_count, options); !invalid.ok()) {
    done(invalid);
    return 0;
  }
  auto one = [done](Result<Job> job) {
    if (!job.ok()) return done(job.status());
    done(std::vector<Job>{std::move(*job)});
  };
  // One job with a wait is exactly accept_async, which queues behind the type's waiters.
  if (max_count == 1 && options.timeout.count() > 0)
    return accept_async(type, options, std::move(one));
  if (options.timeout.count() == 0) {
    accept_due_async(type, max_count, options, std::move(done));
    return 0;
  }
  const std::string type_name(type);
  const auto deadline = kv::Clock::now() + options.timeout;
  AcceptWaiters& waiters = impl_->accept_waiters;
  // The ticket stands for the wait that may follow the look: a cancel before it is queued ends
  // it at once when it is.
  const uint64_t ticket = waiters.reserve();
  // Before looking: a watch live since before our look fires for every add it cannot see.
  const uint64_t generation = waiters.watch_generation(type_name);
  // After the first job: the rest of what is due, never failing the call. Its look blocks on a
  // store that is not nonblocking, so it runs on the jobs layer's own threads there, not on the
  // acceptor's, which hand out other waiters' jobs.
  auto take_rest = [this, type_name, max_count, options, done](Job first) {
    auto rest = [this, type_name, max_count, options, done, first = std::move(first)]() mutable {
      accept_due_async(type_name, max_count - 1, options,
                       [done, first = std::move(first)](Result<std::vector<Job>> more) mutable {
                         std::vector<Job> all{std::move(first)};
                         if (more.ok())
                           std::move(more->begin(), more->end(), std::back_inserter(all));
                         done(std::move(all));
                       });
    };
    if (!impl_->blocking_looks) return rest();
    impl_->blocking_looks->post(std::move(rest));
  };
  const auto commit =
      store_->nonblocking() ? AcceptWaiters::Commit::kAsync : AcceptWaiters::Commit::kBlocking;
  accept_due_async(
      type_name, max_count, options,
      [&waiters, stats = &impl_->type_stats, latencies = &impl_->local_accepts.latencies,
       lock = new_lock(type_name), type_name, options, deadline, generation, ticket, commit, done,
       take_rest](Result<std::vector<Job>> due) {
        if (due.ok() || due.status().code() != Code::kDeadlineExceeded) {
          waiters.forget(ticket);
          return done(std::move(due));
        }
        waiters.submit(
            type_name, options, lock, deadline, generation,
            [stats, latencies, type_name, lock, done, take_rest](Result<Job> first) {
              std::vector<Job> got;
              if (first.ok()) got.push_back(*first);
              record_accepted_one(*stats, *latencies, type_name, lock, got);
              if (!first.ok()) return done(first.status());
              take_rest(std::move(*first));
            },
            commit, ticket);
      });
  return ticket;
}

}  // namespace kvq::jobs
