// The accept waiters' part for waiters of several types (accept_waiters.h, submit_any): each
// makes its own looks and holds its own watches.
#include <algorithm>

#include "jobs/accept/accept_waiters.h"
#include "jobs/job_store.h"
#include "util/thread_pool.h"

namespace kvq::jobs {
namespace {

kv::Clock::time_point steady_at(int64_t wall_ms) {
  const auto delta = std::chrono::milliseconds(wall_ms - now_ms());
  return kv::Clock::now() + std::chrono::duration_cast<kv::Clock::duration>(delta);
}

Status timed_out(const std::vector<std::string>& types) {
  std::string names;
  for (const std::string& type : types) names += (names.empty() ? "'" : ", '") + type + "'";
  return DeadlineExceeded("no job of types " + names + " became due within the timeout");
}

}  // namespace

uint64_t AcceptWaiters::submit_any(std::vector<std::string> types, const AcceptOptions& options,
                                   std::vector<Taker> takers, kv::Clock::time_point deadline,
                                   AnyLook look, Callback callback, uint64_t reserved) {
  uint64_t ticket = reserved;
  if (!ticket) {
    util::MutexLock guard(mu_);
    ticket = next_ticket_++;
  }
  const uint64_t generation = next_any_generation_++;
  arm_any(look, ticket, generation);
  std::vector<kv::Watch> retired;
  bool cancelled = false;
  {
    util::MutexLock guard(mu_);
    if (reserved) {
      auto it = reserved_.find(reserved);
      cancelled = it != reserved_.end() && it->second;
      if (it != reserved_.end()) reserved_.erase(it);
    }
    if (!cancelled) {
      AnyWaiter& waiter = any_waiters_[ticket];
      waiter.types = std::move(types);
      waiter.options = options;
      waiter.takers = std::move(takers);
      waiter.deadline = deadline;
      waiter.callback = std::move(callback);
      install_any(waiter, generation, std::move(look), retired);
      cv_.notify_all();
    }
  }
  for (auto& watch : retired) watch.cancel();
  for (auto& watch : look.watches) watch.cancel();  // not installed (cancelled)
  if (cancelled) callback(Cancelled("accept cancelled"));
  return ticket;
}

void AcceptWaiters::arm_any(AnyLook& look, uint64_t ticket, uint64_t generation) {
  for (auto& watch : look.watches) {
    watch.on_ready([sink = sink_, ticket, generation](const Status& s) {
      if (s.code() == Code::kCancelled) return;
      FireSink& to = *sink;
      util::MutexLock lock(to.mu);
      if (to.acceptor) to.acceptor->on_any_fire(ticket, generation);
    });
  }
}

void AcceptWaiters::install_any(AnyWaiter& waiter, uint64_t generation, AnyLook look,
                                std::vector<kv::Watch>& retired) {
  for (auto& watch : waiter.watches) retired.push_back(std::move(watch));
  waiter.watches = std::move(look.watches);
  look.watches.clear();
  waiter.generation = generation;
  waiter.next_due.reset();
  if (look.next_due) waiter.next_due = steady_at(*look.next_due + 1);
  // Fired before it was installed: its callback found another generation and did nothing. A
  // look that armed nothing (it was not asked to) is looked for again at once.
  const bool fired = waiter.watches.empty() ||
                     std::any_of(waiter.watches.begin(), waiter.watches.end(),
                                 [](const kv::Watch& w) { return !w.valid() || w.ready(); });
  if (fired) waiter.attempt = true;
}

void AcceptWaiters::on_any_fire(uint64_t ticket, uint64_t generation) {
  util::MutexLock lock(mu_);
  auto it = any_waiters_.find(ticket);
  if (it == any_waiters_.end() || it->second.generation != generation) return;
  it->second.attempt = true;
  cv_.notify_all();
}

std::vector<AcceptWaiters::AnyStart> AcceptWaiters::poll_any(kv::Clock::time_point now, Done& done,
                                                             std::vector<kv::Watch>& retired) {
  std::vector<AnyStart> starts;
  for (auto it = any_waiters_.begin(); it != any_waiters_.end();) {
    AnyWaiter& waiter = it->second;
    if (waiter.deadline <= now) {
      done.emplace_back(std::move(waiter.callback), timed_out(waiter.types));
      for (auto& watch : waiter.watches) retired.push_back(std::move(watch));
      it = any_waiters_.erase(it);  // a look in flight hands its job back (finish_any)
      continue;
    }
    const bool due = waiter.next_due && *waiter.next_due <= now;
    if (!waiter.in_flight && (waiter.attempt || due)) {
      waiter.attempt = false;
      waiter.next_due.reset();
      waiter.in_flight = true;
      ++in_flight_;
      starts.push_back({it->first, waiter.types, waiter.options, waiter.takers});
    }
    ++it;
  }
  return starts;
}

void AcceptWaiters::start_any(AnyStart start) {
  const uint64_t ticket = start.ticket;
  attempt_accept_any_async(
      store_, scope_, std::move(start.types), std::move(start.options), std::move(start.takers),
      /*arm=*/true, [this, ticket](AnyOutcome outcome) { finish_any(ticket, std::move(outcome)); });
}

void AcceptWaiters::finish_any(uint64_t ticket, AnyOutcome outcome) {
  const uint64_t generation = next_any_generation_++;
  const bool nothing_due = outcome.job.ok() && !outcome.job->has_value();
  if (nothing_due) arm_any(outcome.look, ticket, generation);
  Callback callback;
  std::optional<Result<Job>> result;
  std::optional<Job> orphan;
  std::vector<kv::Watch> retired;
  {
    util::MutexLock lock(mu_);
    --in_flight_;
    auto it = any_waiters_.find(ticket);
    if (it == any_waiters_.end()) {
      // Cancelled or expired meanwhile: a job taken for it goes back.
      if (outcome.job.ok() && outcome.job->has_value()) orphan = std::move(**outcome.job);
    } else if (nothing_due && !stopping_) {
      it->second.in_flight = false;
      install_any(it->second, generation, std::move(outcome.look), retired);
    } else {
      callback = std::move(it->second.callback);
      if (!outcome.job.ok()) {
        result.emplace(outcome.job.status());
      } else if (outcome.job->has_value()) {
        result.emplace(std::move(**outcome.job));
      } else {
        result.emplace(Cancelled("the jobs layer is closing"));
      }
      for (auto& watch : it->second.watches) retired.push_back(std::move(watch));
      any_waiters_.erase(it);
    }
    cv_.notify_all();
  }
  for (auto& watch : retired) watch.cancel();
  for (auto& watch : outcome.look.watches) watch.cancel();  // not installed
  if (callback) callback(std::move(*result));
  if (orphan) give_back_orphan(std::move(*orphan));
}

void AcceptWaiters::give_back_orphan(Job job) {
  scope_.local.latencies.take(job.lock).reset();  // never handed out: not an accept to count
  // Best effort: should it fail, the activity monitor returns the job at its timeout.
  kv::run_async(
      // A copy of the keys: the commit may settle after this AcceptWaiters is gone.
      store_,
      [keys = scope_.keys, job = std::move(job)](kv::Transaction& txn) {
        return give_back(txn, keys, job);
      },
      [](Status) {}, scope_.options.retry);
}

}  // namespace kvq::jobs
