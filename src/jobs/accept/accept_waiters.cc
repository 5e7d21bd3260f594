#include "jobs/accept/accept_waiters.h"

#include <algorithm>

#include "jobs/flow_control.h"
#include "jobs/job_store.h"
#include "util/thread_pool.h"

namespace kvq::jobs {
namespace {

using namespace std::chrono_literals;
constexpr auto kIdle = 1h;
// The most waiters one transaction serves: enough for a burst, small enough that a conflict
// wastes little.
constexpr size_t kMaxBatch = 64;
// Threads running batches side by side on a store whose calls wait on the network (etcd): as
// many types as this are served at once.
constexpr size_t kBlockingBatchThreads = 8;

// Converts a wall-clock instant into this process's steady clock, for waiting.
kv::Clock::time_point steady_at(int64_t wall_ms) {
  const auto delta = std::chrono::milliseconds(wall_ms - now_ms());
  return kv::Clock::now() + std::chrono::duration_cast<kv::Clock::duration>(delta);
}

Status timed_out(const std::string& type) {
  return DeadlineExceeded("no job of type '" + type + "' became due within the timeout");
}

}  // namespace

ArmWatch AcceptWaiters::arm_of(const Batch& batch) {
  return batch.arm_pending ? ArmWatch::kAlways : ArmWatch::kWhenFull;
}

AcceptWaiters::AcceptWaiters(kv::Store& store, const AcceptScope& scope)
    : store_(store), scope_(scope) {
  if (!store_.nonblocking())
    batch_pool_ = std::make_unique<util::ThreadPool>(kBlockingBatchThreads);
  {
    FireSink& sink = *sink_;
    util::MutexLock lock(sink.mu);
    sink.acceptor = this;
  }
  thread_ = std::thread([this] { run(); });
}

AcceptWaiters::~AcceptWaiters() {
  Done done;
  std::vector<kv::Watch> any_watches;
  {
    util::MutexLock lock(mu_);
    stopping_ = true;
    for (auto& [type, queue] : queues_) {
      for (auto& w : queue.waiters)
        done.emplace_back(std::move(w.callback), Cancelled("the jobs layer is closing"));
    }
    queues_.clear();
    for (auto& [ticket, w] : any_waiters_) {
      done.emplace_back(std::move(w.callback), Cancelled("the jobs layer is closing"));
      for (auto& watch : w.watches) any_watches.push_back(std::move(watch));
    }
    any_waiters_.clear();
  }
  cv_.notify_all();
  thread_.join();
  std::map<std::string, PendingWatch> watches;
  {
    // An attempt in flight reads scope_, and finishes here.
    util::MutexLock lock(mu_);
    while (in_flight_ != 0) cv_.wait(mu_);
    watches.swap(watches_);
  }
  {
    FireSink& sink = *sink_;
    util::MutexLock detach(sink.mu);
    sink.acceptor = nullptr;
  }
  watches.clear();  // cancels them, outside mu_: a cancelled watch runs its callback at once
  for (auto& watch : any_watches) watch.cancel();
  for (auto& [callback, result] : done) callback(std::move(result));
}

uint64_t AcceptWaiters::watch_generation(const std::string& type) {
  util::MutexLock lock(mu_);
  auto it = watches_.find(type);
  return it != watches_.end() && it->second.live() ? it->second.generation : 0;
}

void AcceptWaiters::on_fire(const std::string& type, uint64_t generation) {
  util::MutexLock lock(mu_);
  auto it = watches_.find(type);
  // A watch replaced since: the look that armed its successor saw everything before that.
  if (it == watches_.end() || it->second.generation != generation) return;
  auto qit = queues_.find(type);
  if (qit == queues_.end()) return;
  qit->second.attempt = true;
  cv_.notify_all();
}

uint64_t AcceptWaiters::submit(const std::string& type, const AcceptOptions& options,
                               const std::string& lock, kv::Clock::time_point deadline,
                               std::optional<uint64_t> generation, Callback callback, Commit commit,
                               uint64_t reserved, std::shared_ptr<WaitingFinish> finish) {
  util::MutexLock guard(mu_);
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
  auto it = queues_.try_emplace(type).first;
  const bool finishing = finish != nullptr;
  push_waiter(it->second,
              {ticket, options, lock, deadline, std::move(callback), commit, std::move(finish)});
  // The watch that was live before the caller's look, still live: every add since will fire
  // it. Otherwise (or when the caller made no look) the next round looks for this waiter, with
  // every waiter of its kind in one transaction.
  auto watch = watches_.find(type);
  // And no look of the caller's kind was held back by flow control since that watch was
  // armed: such a look waits for what only a round's look arranges (ArmWatch, next_due).
  const bool covered = !finishing && generation && *generation != 0 && watch != watches_.end() &&
                       watch->second.live() && watch->second.generation == *generation &&
                       watch->second.held_back_looks == scope_.local.held_back.count(type);
  if (!covered) it->second.attempt = true;
  cv_.notify_all();
  return ticket;
}

void AcceptWaiters::push_waiter(Queue& queue, Waiter waiter) {
  ++queue.kinds[kind_of(waiter.options)];
  if (RoundFinishes::pending(waiter.finish)) ++queue.finishing;
  queue.waiters.push_back(std::move(waiter));
}

std::deque<AcceptWaiters::Waiter>::iterator AcceptWaiters::erase_waiter(
    Queue& queue, std::deque<Waiter>::iterator it) {
  auto kind = queue.kinds.find(kind_of(it->options));
  if (--kind->second == 0) queue.kinds.erase(kind);
  if (RoundFinishes::pending(it->finish)) --queue.finishing;
  return queue.waiters.erase(it);
}

bool AcceptWaiters::has_waiters(const std::string& type) {
  util::MutexLock lock(mu_);
  auto it = queues_.find(type);
  return it != queues_.end() && !it->second.waiters.empty();
}

uint64_t AcceptWaiters::reserve() {
  util::MutexLock lock(mu_);
  const uint64_t ticket = next_ticket_++;
  reserved_.emplace(ticket, false);
  return ticket;
}

void AcceptWaiters::forget(uint64_t reserved) {
  util::MutexLock lock(mu_);
  reserved_.erase(reserved);
}

bool AcceptWaiters::cancel(uint64_t ticket) {
  Callback callback;
  std::vector<kv::Watch> retired;
  {
    util::MutexLock lock(mu_);
    // Still looking elsewhere: the submit that may follow ends it (a job the look took is
    // handed out all the same).
    if (auto it = reserved_.find(ticket); it != reserved_.end()) {
      it->second = true;
      return true;
    }
    // A waiter of several types; a look of its in flight hands its job back (finish_any).
    if (auto it = any_waiters_.find(ticket); it != any_waiters_.end()) {
      callback = std::move(it->second.callback);
      retired = std::move(it->second.watches);
      any_waiters_.erase(it);
    }
    for (auto qit = queues_.begin(); !callback && qit != queues_.end(); ++qit) {
      auto& waiters = qit->second.waiters;
      auto it = std::find_if(waiters.begin(), waiters.end(),
                             [&](const Waiter& w) { return w.ticket == ticket; });
      if (it == waiters.end()) continue;
      // Its finish is the worker's and waits for a round that may be committing it now: the
      // waiter stays for it, to end once that round has (a job taken for it goes back).
      if (RoundFinishes::pending(it->finish)) {
        it->cancelled = true;
        it->deadline = kv::Clock::time_point::min();
        cv_.notify_all();
        return true;
      }
      callback = std::move(it->callback);
      erase_waiter(qit->second, it);
      drop_if_empty(qit);
      break;
    }
  }
  for (auto& watch : retired) watch.cancel();
  if (!callback) return false;
  callback(Cancelled("accept cancelled"));
  return true;
}

void AcceptWaiters::drop_if_empty(std::map<std::string, Queue>::iterator it) {
  // A queue whose batch is in flight stays until that batch finishes, so the type never has
  // two attempts at once (a submit meanwhile finds the queue and waits its turn); one whose
  // last round served every waiter stays while its hold waits for them to come back.
  const Queue& queue = it->second;
  if (!queue.waiters.empty() || queue.in_flight || held(queue, kv::Clock::now())) return;
  queues_.erase(it);
}

void AcceptWaiters::expire(const std::string& type, Queue& queue, kv::Clock::time_point now,
                           Done& done) {
  for (auto it = queue.waiters.begin(); it != queue.waiters.end();) {
    if (it->deadline > now || RoundFinishes::pending(it->finish)) {
      ++it;
      continue;
    }
    done.emplace_back(std::move(it->callback), timed_out(type));
    it = erase_waiter(queue, it);
  }
}

kv::Clock::time_point AcceptWaiters::next_wake(kv::Clock::time_point now) const {
  auto wake = now + kIdle;
  for (const auto& [type, queue] : queues_) {
    for (const auto& w : queue.waiters) {
      // One whose finish waits for a round: that round's end wakes the loop.
      if (!RoundFinishes::pending(w.finish)) wake = std::min(wake, w.deadline);
    }
    if (queue.next_due) wake = std::min(wake, *queue.next_due);
    if (held(queue, now)) wake = std::min(wake, queue.hold.until());
  }
  for (const auto& [ticket, w] : any_waiters_) {
    wake = std::min(wake, w.deadline);
    if (w.next_due) wake = std::min(wake, *w.next_due);
  }
  return wake;
}

void AcceptWaiters::run() {
  util::MutexLock lock(mu_);
  while (!stopping_) {
    const auto now = kv::Clock::now();
    Done done;
    std::vector<std::pair<std::string, Batch>> to_start;
    for (auto& [type, queue] : queues_) {
      expire(type, queue, now, done);
      if (queue.waiters.empty() || queue.in_flight || held(queue, now)) continue;
      const bool due = queue.next_due && *queue.next_due <= now;
      if (queue.attempt || due) {
        queue.attempt = false;
        queue.next_due.reset();
        queue.found_nothing.clear();
        queue.round_open = true;
      }
      if (!queue.round_open) continue;
      auto batch = next_batch(type, queue);
      if (!batch) {
        queue.round_open = false;
        continue;
      }
      queue.in_flight = true;
      ++in_flight_;
      to_start.emplace_back(type, std::move(*batch));
    }
    for (auto it = queues_.begin(); it != queues_.end();) {
      auto next = std::next(it);
      drop_if_empty(it);
      it = next;
    }
    std::vector<kv::Watch> retired;
    std::vector<AnyStart> any_to_start = poll_any(now, done, retired);
    lock.unlock();
    for (auto& watch : retired) watch.cancel();
    for (auto& [callback, result] : done) callback(std::move(result));
    for (auto& start : any_to_start) {
      if (!batch_pool_) {
        start_any(std::move(start));
        continue;
      }
      batch_pool_->post(
          [this, start = std::move(start)]() mutable { start_any(std::move(start)); });
    }
    for (auto& [type, batch] : to_start) {
      if (!batch_pool_) {
        start_batch(type, std::move(batch));
        continue;
      }
      batch_pool_->post([this, type = type, batch = std::move(batch)]() mutable {
        start_batch(type, std::move(batch));
      });
    }
    lock.lock();
    const auto later = kv::Clock::now();
    // A round to start now, or a waiter of several types to look for.
    auto type_ready = [&](const auto& q) {
      const Queue& queue = q.second;
      return !queue.in_flight && !queue.waiters.empty() && !held(queue, later) &&
             (queue.attempt || queue.round_open);
    };
    auto any_ready = [](const auto& w) { return !w.second.in_flight && w.second.attempt; };
    const bool more = std::any_of(queues_.begin(), queues_.end(), type_ready) ||
                      std::any_of(any_waiters_.begin(), any_waiters_.end(), any_ready);
    if (!more && !stopping_) cv_.wait_until(mu_, next_wake(later));
  }
}

std::optional<AcceptWaiters::Batch> AcceptWaiters::next_batch(const std::string& type,
                                                              Queue& queue) {
  const auto& nothing = queue.found_nothing;
  // Every kind still waiting found nothing: done, without walking thousands of idle waiters.
  const auto untried = std::count_if(queue.kinds.begin(), queue.kinds.end(), [&](const auto& k) {
    return std::find(nothing.begin(), nothing.end(), k.first) == nothing.end();
  });
  if (untried == 0) return std::nullopt;
  auto first = std::find_if(queue.waiters.begin(), queue.waiters.end(), [&](const Waiter& w) {
    return std::find(nothing.begin(), nothing.end(), kind_of(w.options)) == nothing.end();
  });
  if (first == queue.waiters.end()) return std::nullopt;
  Batch batch{first->options, {}, {}};
  batch.started = kv::Clock::now();
  const Kind kind = kind_of(batch.options);
  // Room for the waiters of the kind whose finish waits, wherever they queue: a round that
  // took nothing for those ahead of them would otherwise leave their finishes uncommitted.
  size_t finishing_here = 0;
  for (auto it = first; queue.finishing > 0 && it != queue.waiters.end(); ++it) {
    if (kind_of(it->options) == kind && RoundFinishes::pending(it->finish)) ++finishing_here;
  }
  const size_t others = kMaxBatch - std::min(finishing_here, kMaxBatch);
  size_t other_count = 0;
  std::vector<std::shared_ptr<WaitingFinish>> finishes;
  bool finishing = false;
  for (auto it = first; it != queue.waiters.end() && batch.takers.size() < kMaxBatch; ++it) {
    if (kind_of(it->options) != kind) continue;
    if (!RoundFinishes::pending(it->finish) && other_count++ >= others) continue;
    batch.tickets.push_back(it->ticket);
    batch.takers.push_back({it->lock, it->options.worker, it->options.worker_type});
    if (it->commit == Commit::kAsync) batch.commit = Commit::kAsync;
    finishing = finishing || RoundFinishes::pending(it->finish);
    finishes.push_back(RoundFinishes::pending(it->finish) ? it->finish : nullptr);
  }
  if (finishing) batch.finishes = std::make_shared<RoundFinishes>(type, std::move(finishes));
  // No live watch: this batch's look arms the next one (one batch of a type is in flight at a
  // time, so no other is arming it). Held back by max_running, it arms one on the activity
  // token whatever watch is live.
  auto& watch = watches_[type];
  batch.arm = next_watch_generation_++;
  batch.arm_pending = !watch.live();
  batch.held_back_looks = scope_.local.held_back.count(type);
  return batch;
}

void AcceptWaiters::start_batch(const std::string& type, Batch batch) {
  if (batch.commit == Commit::kBlocking) {
    AcceptOutcome outcome{NotFound(""), std::nullopt, {}};
    outcome.jobs =
        attempt_accept_many(store_, scope_, type, batch.options, batch.takers, &outcome.next_due,
                            &outcome.watch, arm_of(batch), batch.finishes);
    return finish_batch(type, batch, std::move(outcome));
  }
  // The batch moves into the completion; the attempt gets copies of what it reads.
  auto shared = std::make_shared<Batch>(std::move(batch));
  attempt_accept_many_async(
      store_, scope_, type, shared->options, shared->takers, arm_of(*shared),
      [this, type, shared](AcceptOutcome outcome) {
        finish_batch(type, *shared, std::move(outcome));
      },
      shared->finishes);
}

void AcceptWaiters::finish_batch(const std::string& type, const Batch& batch,
                                 AcceptOutcome outcome) {
  const bool looked = outcome.jobs.ok() || outcome.jobs.status().code() == Code::kNotFound;
  if (outcome.watch.valid() && looked) {
    // Before it is installed, while this thread alone holds it; a fire before the install is
    // caught there (ready()).
    outcome.watch.on_ready([sink = sink_, type, generation = batch.arm](const Status& s) {
      if (s.code() == Code::kCancelled) return;
      FireSink& to = *sink;  // named, so that the analysis sees one mutex guard `acceptor`
      util::MutexLock lock(to.mu);
      if (to.acceptor) to.acceptor->on_fire(type, generation);
    });
  }
  Handed handed;
  kv::Watch retired;  // a replaced watch, cancelled outside mu_ (its callback runs at once)
  {
    util::MutexLock lock(mu_);
    --in_flight_;
    auto qit = queues_.find(type);
    if (qit != queues_.end()) hand_out(qit->second, batch, looked, outcome, handed);
    if (outcome.watch.valid() && looked && !stopping_) {
      auto& watch = watches_[type];
      retired = std::move(watch.watch);
      watch.watch = std::move(outcome.watch);
      watch.generation = batch.arm;
      watch.held_back_looks = batch.held_back_looks;
      // Fired before it was installed: its callback found another generation and did nothing.
      if (!watch.live() && qit != queues_.end()) qit->second.attempt = true;
    }
    if (qit != queues_.end()) drop_if_empty(qit);
    cv_.notify_all();
  }
  retired.cancel();
  outcome.watch.cancel();  // not installed (closing, or the look failed)
  for (auto& [callback, result] : handed.done) callback(std::move(result));
  for (auto& job : handed.orphans) give_back_orphan(std::move(job));
}

void AcceptWaiters::complete(Queue& queue, uint64_t ticket, Result<Job> result, Handed& handed) {
  auto it = std::find_if(queue.waiters.begin(), queue.waiters.end(),
                         [&](const Waiter& w) { return w.ticket == ticket; });
  // Cancel raced the accept itself: the job taken for that waiter goes back.
  if (it == queue.waiters.end()) {
    if (result.ok()) handed.orphans.push_back(std::move(*result));
    return;
  }
  if (it->cancelled && result.ok()) {
    handed.orphans.push_back(std::move(*result));
    result = Cancelled("accept cancelled");
  }
  handed.done.emplace_back(std::move(it->callback), std::move(result));
  erase_waiter(queue, it);
}

void AcceptWaiters::hand_out(Queue& queue, const Batch& batch, bool looked, AcceptOutcome& outcome,
                             Handed& handed) {
  auto& jobs = outcome.jobs;
  queue.in_flight = false;
  // The finishes the batch carried: committed with it, or failed on their own (those waiters
  // end with their failure and took nothing), or, after another error, left for another round.
  RoundFinishes::Settled settled;
  if (batch.finishes) settled = batch.finishes->settle(looked);
  queue.finishing -= settled.done;
  size_t takers = batch.takers.size();
  for (size_t i = 0; i < settled.failed.size(); ++i) {
    if (!settled.failed[i]) continue;
    complete(queue, batch.tickets[i], std::move(*settled.failed[i]), handed);
    --takers;
  }
  const size_t taken = jobs.ok() ? jobs->size() : 0;
  queue.hold.ended(taken, batch.started, kv::Clock::now());
  if (!looked) {
    complete(queue, batch.tickets.front(), jobs.status(), handed);  // the others: their own turn
    queue.found_nothing.clear();
    return;
  }
  // The jobs come in takers' order, a job's lock naming its taker (a taker whose finish failed
  // took none).
  size_t t = 0;
  for (size_t i = 0; i < taken; ++i) {
    Job& job = (*jobs)[i];
    while (t < batch.takers.size() && batch.takers[t].lock != job.lock) ++t;
    if (t == batch.takers.size()) {
      handed.orphans.push_back(std::move(job));  // no taker of this batch (never expected)
      continue;
    }
    complete(queue, batch.tickets[t++], std::move(job), handed);
  }
  if (taken > 0) queue.found_nothing.clear();
  // (With no taker left, the batch made no look.)
  if (taken < takers) {
    queue.found_nothing.push_back(kind_of(batch.options));
    if (outcome.next_due) {
      auto at = steady_at(*outcome.next_due + 1);
      queue.next_due = queue.next_due ? std::min(*queue.next_due, at) : at;
    }
  }
}

}  // namespace kvq::jobs
