// accept: handing a due job to a worker.
#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "jobs/accept_waiters.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"
#include "util/random.h"
#include "util/secret.h"

namespace kvq::jobs {
namespace {

// Priority levels examined per attempt; beyond it a caller sees "nothing due" (and is woken by
// the next change). Priorities are meant to be a handful of levels.
constexpr int kMaxPriorityLevels = 64;
// A lock is what lets a worker change its job, so it is a secret: 128 random bits from the
// kernel, then the type tag. Rows keep the locks of earlier builds (24 hex digits), which still
// compare as they did.
constexpr size_t kLockBytes = util::kMinSecretBytes;
constexpr size_t kMaxAcceptMany = 1000;

// The checks every accept entry point makes on its input before touching the store.
Status validate_accept(std::string_view type, const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_worker(options.worker));
  if (options.timeout.count() < 0) return InvalidArgument("accept timeout must not be negative");
  return Status::OK();
}

}  // namespace

std::string type_tag(std::string_view type) {
  uint32_t h = 2166136261u;  // FNV-1a: a stable tag, not a secret
  for (unsigned char c : type) h = (h ^ c) * 16777619u;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string tag(8, '0');
  for (int i = 7; i >= 0; --i, h >>= 4) tag[i] = kHex[h & 15];
  return tag;
}

std::string new_lock(std::string_view type) { return util::secret_hex(kLockBytes) + "-" + type_tag(type); }

Result<std::vector<Job>> try_accept_many(kv::Transaction& txn, const Keys& keys, const JobsOptions& options,
                                         std::string_view type, const AcceptOptions& accept,
                                         const std::vector<Taker>& takers, std::optional<int64_t>* next_due) {
  const int64_t max_time = accept.max_scheduled_time_ms.value_or(now_ms());
  const auto end = keys.pending_of(type).second;
  std::string from = keys.pending_of(type).first;
  std::vector<Job> taken;
  const size_t spread = std::max(options.accept_spread, takers.size());
  // Each priority level costs one look, or two when it held fewer due jobs than wanted.
  for (int look = 0; look < 2 * kMaxPriorityLevels && taken.size() < takers.size(); ++look) {
    // Snapshot reads: only the jobs finally picked add conflicts, so acceptors that pick
    // different jobs never collide. One read per level: the index orders a level's entries by
    // scheduled time, so its due jobs are the first entries read, up to the level's due bound
    // (on etcd each read is a round trip).
    KVQ_ASSIGN_OR_RETURN(auto due, txn.get_range(from, end, {.limit = spread, .snapshot = true}));
    if (due.empty()) break;
    KVQ_ASSIGN_OR_RETURN(auto head, keys.parse_pending(due[0].key));
    if (accept.max_priority && head.priority > *accept.max_priority) break;
    const std::string due_end = keys.pending_due(type, head.priority, max_time).second;
    due.erase(std::find_if(due.begin(), due.end(), [&](const kv::KeyValue& kv) { return kv.key >= due_end; }),
              due.end());
    if (due.empty()) {
      if (next_due && (!*next_due || head.scheduled < **next_due)) *next_due = head.scheduled;
      if (head.priority == INT64_MAX) break;
      from = keys.pending_from_priority(type, head.priority + 1);
      continue;
    }
    // A random choice among the first `spread` due jobs, so that acceptors in other processes
    // reading the same snapshot seldom pick the same ones.
    const size_t want = std::min(due.size(), takers.size() - taken.size());
    for (size_t i = 0; i < want; ++i) {
      std::swap(due[i], due[i + util::random_below(due.size() - i)]);
      KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_pending(due[i].key));
      KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, entry.id));
      if (!before || state_of(*before) != State::kPending || before->priority != entry.priority ||
          before->scheduled != entry.scheduled) {
        return Internal("pending index entry for job '" + entry.id + "' does not match its row");
      }
      const Taker& taker = takers[taken.size()];
      JobRow after = *before;
      after.lock = taker.lock;
      after.worker = taker.worker;
      after.attempts += 1;
      KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, entry.id, before, after));
      taken.push_back(Job{std::string(type), entry.id, taker.lock, std::move(after.data), taker.worker});
    }
    // Still short: look again from the same place. The jobs just taken are gone from this
    // transaction's view, so the next look sees what is left of this level (not yet due, or
    // nothing) and moves on from there.
  }
  if (taken.empty()) return NotFound("no job of type '" + std::string(type) + "' is due");
  return taken;
}

Result<Job> try_accept(kv::Transaction& txn, const Keys& keys, const JobsOptions& options, std::string_view type,
                       const AcceptOptions& accept, const std::string& lock, std::optional<int64_t>* next_due) {
  KVQ_ASSIGN_OR_RETURN(auto jobs, try_accept_many(txn, keys, options, type, accept, {{lock, accept.worker}}, next_due));
  return std::move(jobs.front());
}

Result<std::vector<Job>> find_accepted(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                       uint64_t version, const std::vector<Taker>& takers) {
  std::vector<std::optional<Job>> by_taker(takers.size());
  auto [begin, end] = keys.activity_at(type, version);
  KVQ_ASSIGN_OR_RETURN(auto entries, txn.get_range(begin, end));
  for (const auto& kv : entries) {
    KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_activity(kv.key));
    KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, entry.id));
    for (size_t i = 0; row && i < takers.size(); ++i) {
      if (util::secret_equal(row->lock, takers[i].lock)) {
        by_taker[i] = Job{std::string(type), entry.id, takers[i].lock, row->data, row->worker};
      }
    }
  }
  std::vector<Job> found;  // in takers' order, as try_accept_many returns them
  for (auto& job : by_taker) {
    if (job) found.push_back(std::move(*job));
  }
  return found;
}

Result<Job> Jobs::accept(kv::Transaction& txn, std::string_view type, const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_accept(type, options));
  return try_accept(txn, impl_->keys, options_, type, options, new_lock(type), nullptr);
}

uint64_t Jobs::accept_async(std::string_view type, const AcceptOptions& options,
                            std::function<void(Result<Job>)> done) {
  return queue_accept(type, options, std::move(done), store_->nonblocking() && options.timeout.count() > 0);
}

uint64_t Jobs::queue_accept(std::string_view type, const AcceptOptions& options,
                            std::function<void(Result<Job>)> done, bool look_async) {
  Status invalid = validate_accept(type, options);
  if (!invalid.ok()) {
    done(invalid);
    return 0;
  }
  const auto deadline = kv::Clock::now() + options.timeout;
  const std::string type_name(type);
  const std::string lock = new_lock(type);
  AcceptWaiters& waiters = impl_->accept_waiters;
  const auto commit = look_async ? AcceptWaiters::Commit::kAsync : AcceptWaiters::Commit::kBlocking;
  if (options.timeout.count() > 0 && waiters.has_waiters(type_name)) {
    return waiters.submit(type_name, options, lock, deadline, std::nullopt, std::move(done), commit);
  }
  // Before looking: a watch live since before our look fires for every add it cannot see.
  const uint64_t generation = waiters.watch_generation(type_name);
  if (look_async) {
    const uint64_t ticket = waiters.reserve();
    attempt_accept_many_async(
        *store_, impl_->keys, options_, type_name, options, {{lock, options.worker}}, /*arm_watch=*/false,
        [&waiters, type_name, options, lock, deadline, generation, ticket, done = std::move(done)](
            AcceptOutcome outcome) {
          auto& jobs = outcome.jobs;
          if (jobs.ok() || jobs.status().code() != Code::kNotFound) {
            waiters.forget(ticket);
            if (!jobs.ok()) return done(jobs.status());
            return done(std::move(jobs->front()));
          }
          waiters.submit(type_name, options, lock, deadline, generation, done, AcceptWaiters::Commit::kAsync, ticket);
        });
    return ticket;
  }
  auto job = attempt_accept(*store_, impl_->keys, options_, type, options, lock, nullptr);
  if (job.ok() || job.status().code() != Code::kNotFound) {
    done(std::move(job));
    return 0;
  }
  if (options.timeout.count() == 0) {
    done(DeadlineExceeded("no job of type '" + type_name + "' is due"));
    return 0;
  }
  return waiters.submit(type_name, options, lock, deadline, generation, std::move(done), commit);
}

namespace {

// The takers of an accept of up to `max_count` jobs, after checking its input.
Result<std::vector<Taker>> many_takers(std::string_view type, size_t max_count, const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_accept(type, options));
  if (max_count < 1 || max_count > kMaxAcceptMany) {
    return InvalidArgument("accept_many wants 1.." + std::to_string(kMaxAcceptMany) + " jobs");
  }
  std::vector<Taker> takers;
  for (size_t i = 0; i < max_count; ++i) takers.push_back({new_lock(type), options.worker});
  return takers;
}

}  // namespace

void Jobs::accept_due_async(std::string_view type, size_t max_count, const AcceptOptions& options,
                            std::function<void(Result<std::vector<Job>>)> done) {
  auto takers = many_takers(type, max_count, options);
  if (!takers.ok()) return done(takers.status());
  attempt_accept_many_async(*store_, impl_->keys, options_, std::string(type), options, std::move(*takers),
                            /*arm_watch=*/false, [type_name = std::string(type), done = std::move(done)](AcceptOutcome outcome) {
                              if (outcome.jobs.ok() || outcome.jobs.status().code() != Code::kNotFound) {
                                return done(std::move(outcome.jobs));
                              }
                              done(DeadlineExceeded("no job of type '" + type_name + "' is due"));
                            });
}

Result<std::vector<Job>> Jobs::accept_many(std::string_view type, size_t max_count, const AcceptOptions& options) {
  KVQ_ASSIGN_OR_RETURN(auto takers, many_takers(type, max_count, options));
  auto jobs = attempt_accept_many(*store_, impl_->keys, options_, type, options, takers, nullptr);
  if (jobs.ok() || jobs.status().code() != Code::kNotFound) return jobs;
  if (options.timeout.count() == 0) return DeadlineExceeded("no job of type '" + std::string(type) + "' is due");
  // Nothing due: wait for one like accept, then take the rest of what is due with it.
  KVQ_ASSIGN_OR_RETURN(auto first, accept(type, options));
  std::vector<Job> out{std::move(first)};
  if (max_count > 1) {
    takers.resize(max_count - 1);
    auto more = attempt_accept_many(*store_, impl_->keys, options_, type, options, takers, nullptr);
    if (more.ok()) std::move(more->begin(), more->end(), std::back_inserter(out));
  }
  return out;
}

bool Jobs::cancel_accept(uint64_t ticket) { return ticket != 0 && impl_->accept_waiters.cancel(ticket); }

Result<Job> Jobs::accept(std::string_view type, const AcceptOptions& options) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<Job>> outcome;
  queue_accept(type, options, [&](Result<Job> r) {
    std::lock_guard lock(mu);
    outcome.emplace(std::move(r));
    cv.notify_all();
  }, /*look_async=*/false);
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return outcome.has_value(); });
  return std::move(*outcome);
}

}  // namespace kvq::jobs
