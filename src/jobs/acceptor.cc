#include "jobs/acceptor.h"

#include <algorithm>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"

namespace kvq::jobs {
namespace {

using namespace std::chrono_literals;
constexpr auto kIdle = 1h;
// The most waiters one transaction serves: enough for a burst, small enough that a conflict
// wastes little.
constexpr size_t kMaxBatch = 64;

// Converts a wall-clock instant into this process's steady clock, for waiting.
kv::Clock::time_point steady_at(int64_t wall_ms) {
  const auto delta = std::chrono::milliseconds(wall_ms - now_ms());
  return kv::Clock::now() + std::chrono::duration_cast<kv::Clock::duration>(delta);
}

Status timed_out(const std::string& type) {
  return DeadlineExceeded("no job of type '" + type + "' became due within the timeout");
}

}  // namespace

namespace {

// One attempt of an accept. An earlier attempt's commit result may have been unknown: it may
// have taken jobs already, which `attempt_version` (its read version) finds.
Result<std::vector<Job>> accept_attempt(kv::Transaction& txn, const Keys& keys, const JobsOptions& options,
                                        std::string_view type, const AcceptOptions& accept,
                                        const std::vector<Taker>& takers, std::optional<int64_t>* next_due,
                                        std::optional<uint64_t>& attempt_version) {
  if (attempt_version) {
    KVQ_ASSIGN_OR_RETURN(auto taken, find_accepted(txn, keys, type, *attempt_version, takers));
    if (!taken.empty()) return taken;
  }
  KVQ_ASSIGN_OR_RETURN(attempt_version, txn.read_version());
  if (next_due) next_due->reset();
  return try_accept_many(txn, keys, options, type, accept, takers, next_due);
}

}  // namespace

Result<std::vector<Job>> attempt_accept_many(kv::Store& store, const Keys& keys, const JobsOptions& options,
                                             std::string_view type, const AcceptOptions& accept,
                                             const std::vector<Taker>& takers, std::optional<int64_t>* next_due) {
  std::optional<uint64_t> attempt_version;
  return kv::run(store, [&](kv::Transaction& txn) {
    return accept_attempt(txn, keys, options, type, accept, takers, next_due, attempt_version);
  }, options.retry);
}

void attempt_accept_many_async(kv::Store& store, const Keys& keys, const JobsOptions& options, std::string type,
                               AcceptOptions accept, std::vector<Taker> takers,
                               std::function<void(Result<std::vector<Job>>)> done) {
  struct Attempt {
    std::string type;
    AcceptOptions accept;
    std::vector<Taker> takers;
    std::optional<uint64_t> attempt_version;
  };
  auto a = std::make_shared<Attempt>(Attempt{std::move(type), std::move(accept), std::move(takers), {}});
  kv::run_async(store, [a, &keys, &options](kv::Transaction& txn) {
    return accept_attempt(txn, keys, options, a->type, a->accept, a->takers, nullptr, a->attempt_version);
  }, std::move(done), options.retry);
}

Result<Job> attempt_accept(kv::Store& store, const Keys& keys, const JobsOptions& options, std::string_view type,
                           const AcceptOptions& accept, const std::string& lock, std::optional<int64_t>* next_due) {
  KVQ_ASSIGN_OR_RETURN(auto jobs,
                       attempt_accept_many(store, keys, options, type, accept, {{lock, accept.worker}}, next_due));
  return std::move(jobs.front());
}

Acceptor::Acceptor(kv::Store& store, const Keys& keys, const JobsOptions& options, Notifier& notifier)
    : store_(store), keys_(keys), options_(options), notifier_(notifier) {
  notifier_.set_pending_listener([this](const std::string& type) {
    std::lock_guard lock(mu_);
    auto it = queues_.find(type);
    if (it == queues_.end()) return;
    it->second.attempt = true;
    cv_.notify_all();
  });
  thread_ = std::thread([this] { run(); });
}

Acceptor::~Acceptor() {
  Done done;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [type, queue] : queues_) {
      for (auto& w : queue.waiters) done.emplace_back(std::move(w.callback), Cancelled("the jobs layer is closing"));
    }
    queues_.clear();
  }
  cv_.notify_all();
  thread_.join();
  notifier_.set_pending_listener(nullptr);
  for (auto& [callback, result] : done) callback(std::move(result));
}

uint64_t Acceptor::submit(const std::string& type, const AcceptOptions& options, const std::string& lock,
                          kv::Clock::time_point deadline, std::optional<uint64_t> generation,
                          Callback callback, uint64_t reserved) {
  std::unique_lock guard(mu_);
  const uint64_t ticket = reserved ? reserved : next_ticket_++;
  if (reserved) {
    auto it = reserved_.find(reserved);
    const bool cancelled = it != reserved_.end() && it->second;
    if (it != reserved_.end()) reserved_.erase(it);
    if (cancelled) {
      guard.unlock();
      callback(Cancelled("accept cancelled"));
      return ticket;
    }
  }
  auto [it, created] = queues_.try_emplace(type);
  // A queue holds the type's pending interest for as long as it exists (lock order: ours, then
  // the notifier's; the notifier never calls us holding its own).
  if (created) {
    notifier_.hold_pending_interest(type);
    it->second.seen_generation = generation.value_or(0);
  }
  push_waiter(it->second, {ticket, options, lock, deadline, std::move(callback)});
  // Anything that moved since the caller's own attempt shows as a newer generation; a caller
  // that made none is looked for in the next round (with every waiter of its kind, in one
  // transaction).
  if (!generation || notifier_.pending_generation(type) != it->second.seen_generation) it->second.attempt = true;
  cv_.notify_all();
  return ticket;
}

void Acceptor::push_waiter(Queue& queue, Waiter waiter) {
  ++queue.kinds[kind_of(waiter.options)];
  queue.waiters.push_back(std::move(waiter));
}

std::deque<Acceptor::Waiter>::iterator Acceptor::erase_waiter(Queue& queue, std::deque<Waiter>::iterator it) {
  auto kind = queue.kinds.find(kind_of(it->options));
  if (--kind->second == 0) queue.kinds.erase(kind);
  return queue.waiters.erase(it);
}

bool Acceptor::has_waiters(const std::string& type) {
  std::lock_guard lock(mu_);
  auto it = queues_.find(type);
  return it != queues_.end() && !it->second.waiters.empty();
}

uint64_t Acceptor::reserve() {
  std::lock_guard lock(mu_);
  const uint64_t ticket = next_ticket_++;
  reserved_.emplace(ticket, false);
  return ticket;
}

void Acceptor::forget(uint64_t reserved) {
  std::lock_guard lock(mu_);
  reserved_.erase(reserved);
}

bool Acceptor::cancel(uint64_t ticket) {
  Callback callback;
  {
    std::lock_guard lock(mu_);
    // Still looking elsewhere: the submit that may follow ends it (a job the look took is
    // handed out all the same).
    if (auto it = reserved_.find(ticket); it != reserved_.end()) {
      it->second = true;
      return true;
    }
    for (auto qit = queues_.begin(); qit != queues_.end(); ++qit) {
      auto& waiters = qit->second.waiters;
      auto it = std::find_if(waiters.begin(), waiters.end(), [&](const Waiter& w) { return w.ticket == ticket; });
      if (it == waiters.end()) continue;
      callback = std::move(it->callback);
      erase_waiter(qit->second, it);
      drop_if_empty(qit);
      break;
    }
  }
  if (!callback) return false;
  callback(Cancelled("accept cancelled"));
  return true;
}

void Acceptor::drop_if_empty(std::map<std::string, Queue>::iterator it) {
  if (!it->second.waiters.empty()) return;
  notifier_.release_pending_interest(it->first);
  queues_.erase(it);
}

void Acceptor::expire(const std::string& type, Queue& queue, kv::Clock::time_point now, Done& done) {
  for (auto it = queue.waiters.begin(); it != queue.waiters.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    done.emplace_back(std::move(it->callback), timed_out(type));
    it = erase_waiter(queue, it);
  }
}

kv::Clock::time_point Acceptor::next_wake(kv::Clock::time_point now) const {
  auto wake = now + kIdle;
  for (const auto& [type, queue] : queues_) {
    for (const auto& w : queue.waiters) wake = std::min(wake, w.deadline);
    if (queue.next_due) wake = std::min(wake, *queue.next_due);
  }
  return wake;
}

void Acceptor::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto now = kv::Clock::now();
    Done done;
    std::vector<std::string> to_attempt;
    for (auto& [type, queue] : queues_) {
      expire(type, queue, now, done);
      const bool due = queue.next_due && *queue.next_due <= now;
      if (!queue.waiters.empty() && (queue.attempt || due)) {
        queue.attempt = false;
        queue.next_due.reset();
        to_attempt.push_back(type);
      }
    }
    // By name: a round releases the lock, and the map may change meanwhile.
    for (const auto& type : to_attempt) round(type, lock, done);
    for (auto it = queues_.begin(); it != queues_.end();) {
      auto next = std::next(it);
      drop_if_empty(it);
      it = next;
    }
    lock.unlock();
    for (auto& [callback, result] : done) callback(std::move(result));
    lock.lock();
    const bool more = std::any_of(queues_.begin(), queues_.end(), [](const auto& q) { return q.second.attempt; });
    if (!more && !stopping_) cv_.wait_until(lock, next_wake(kv::Clock::now()));
  }
}

// One round for `type`: serve waiters in order while jobs are due, each batch of waiters with
// the same options in one transaction. REQUIRES: `lock` held; it is released around store access.
void Acceptor::round(const std::string& type, std::unique_lock<std::mutex>& lock, Done& done) {
  std::vector<Kind> found_nothing;
  for (;;) {
    auto qit = queues_.find(type);
    if (qit == queues_.end()) return;
    auto& queue = qit->second;
    if (found_nothing.empty()) queue.seen_generation = notifier_.pending_generation(type);
    // Every kind still waiting found nothing: done, without walking thousands of idle waiters.
    const auto untried = std::count_if(queue.kinds.begin(), queue.kinds.end(), [&](const auto& k) {
      return std::find(found_nothing.begin(), found_nothing.end(), k.first) == found_nothing.end();
    });
    if (untried == 0) return;
    auto first = std::find_if(queue.waiters.begin(), queue.waiters.end(), [&](const Waiter& w) {
      return std::find(found_nothing.begin(), found_nothing.end(), kind_of(w.options)) == found_nothing.end();
    });
    if (first == queue.waiters.end()) return;
    const AcceptOptions options = first->options;
    const Kind kind = kind_of(options);
    std::vector<uint64_t> tickets;
    std::vector<Taker> takers;
    for (auto it = first; it != queue.waiters.end() && takers.size() < kMaxBatch; ++it) {
      if (kind_of(it->options) != kind) continue;
      tickets.push_back(it->ticket);
      takers.push_back({it->lock, it->options.worker});
    }
    std::optional<int64_t> next_due;
    lock.unlock();
    auto jobs = attempt_accept_many(store_, keys_, options_, type, options, takers, &next_due);
    lock.lock();
    qit = queues_.find(type);
    if (qit == queues_.end()) return;  // every waiter was cancelled meanwhile
    auto& waiters = qit->second.waiters;
    auto complete = [&](uint64_t ticket, Result<Job> result) {
      auto it = std::find_if(waiters.begin(), waiters.end(), [&](const Waiter& w) { return w.ticket == ticket; });
      // A job taken for a waiter cancelled meanwhile stays running until its activity timeout
      // (or its worker's departure) returns it: cancel raced the accept itself.
      if (it == waiters.end()) return;
      done.emplace_back(std::move(it->callback), std::move(result));
      erase_waiter(qit->second, it);
    };
    if (!jobs.ok() && jobs.status().code() != Code::kNotFound) {
      complete(tickets.front(), jobs.status());  // the others try again in their own turn
      found_nothing.clear();
      continue;
    }
    // The i-th job taken is takers[i]'s (attempt_accept_many keeps their order).
    const size_t taken = jobs.ok() ? jobs->size() : 0;
    for (size_t i = 0; i < taken; ++i) complete(tickets[i], std::move((*jobs)[i]));
    if (taken > 0) found_nothing.clear();
    if (taken == takers.size()) continue;
    found_nothing.push_back(kind);
    if (next_due) {
      auto at = steady_at(*next_due + 1);
      qit->second.next_due = qit->second.next_due ? std::min(*qit->second.next_due, at) : at;
    }
  }
}

}  // namespace kvq::jobs
