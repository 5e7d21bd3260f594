// accept: handing a due job to a worker.
#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "jobs/acceptor.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"
#include "util/random.h"

namespace kvq::jobs {
namespace {

// Priority levels examined per attempt; beyond it a caller sees "nothing due" (and is woken by
// the next change). Priorities are meant to be a handful of levels.
constexpr int kMaxPriorityLevels = 64;
constexpr size_t kLockBytes = 12;

}  // namespace

std::string type_tag(std::string_view type) {
  uint32_t h = 2166136261u;  // FNV-1a: a stable tag, not a secret
  for (unsigned char c : type) h = (h ^ c) * 16777619u;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string tag(8, '0');
  for (int i = 7; i >= 0; --i, h >>= 4) tag[i] = kHex[h & 15];
  return tag;
}

std::string new_lock(std::string_view type) { return util::random_hex(kLockBytes) + "-" + type_tag(type); }

Result<Job> try_accept(kv::Transaction& txn, const Keys& keys, const JobsOptions& options, std::string_view type,
                       const AcceptOptions& accept, const std::string& lock, std::optional<int64_t>* next_due) {
  const int64_t max_time = accept.max_scheduled_time_ms.value_or(now_ms());
  const auto end = keys.pending_of(type).second;
  std::string from = keys.pending_of(type).first;
  for (int level = 0; level < kMaxPriorityLevels; ++level) {
    // Snapshot reads: only the job finally picked adds a conflict, so acceptors that pick
    // different jobs never collide.
    KVQ_ASSIGN_OR_RETURN(auto first, txn.get_range(from, end, {.limit = 1, .snapshot = true}));
    if (first.empty()) break;
    KVQ_ASSIGN_OR_RETURN(auto head, keys.parse_pending(first[0].key));
    if (accept.max_priority && head.priority > *accept.max_priority) break;
    auto [lo, hi] = keys.pending_due(type, head.priority, max_time);
    KVQ_ASSIGN_OR_RETURN(auto due, txn.get_range(lo, hi, {.limit = options.accept_spread, .snapshot = true}));
    if (due.empty()) {
      if (next_due && (!*next_due || head.scheduled < **next_due)) *next_due = head.scheduled;
      if (head.priority == INT64_MAX) break;
      from = keys.pending_from_priority(type, head.priority + 1);
      continue;
    }
    const auto& pick = due[util::random_below(due.size())];
    KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_pending(pick.key));
    KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, keys, type, entry.id));
    if (!before || state_of(*before) != State::kPending || before->priority != entry.priority ||
        before->scheduled != entry.scheduled) {
      return Internal("pending index entry for job '" + entry.id + "' does not match its row");
    }
    JobRow after = *before;
    after.lock = lock;
    after.worker = accept.worker;
    after.attempts += 1;
    KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, entry.id, before, after));
    return Job{std::string(type), entry.id, lock, after.data, accept.worker};
  }
  return NotFound("no job of type '" + std::string(type) + "' is due");
}

Result<std::optional<Job>> find_accepted(kv::Transaction& txn, const Keys& keys, std::string_view type,
                                         uint64_t version, const std::string& lock) {
  auto [begin, end] = keys.activity_at(type, version);
  KVQ_ASSIGN_OR_RETURN(auto entries, txn.get_range(begin, end));
  for (const auto& kv : entries) {
    KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_activity(kv.key));
    KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, entry.id));
    if (row && row->lock == lock) {
      return std::optional<Job>(Job{std::string(type), entry.id, lock, row->data, row->worker});
    }
  }
  return std::optional<Job>();
}

Result<Job> Jobs::accept(kv::Transaction& txn, std::string_view type, const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_worker(options.worker));
  if (options.timeout.count() < 0) return InvalidArgument("accept timeout must not be negative");
  return try_accept(txn, impl_->keys, options_, type, options, new_lock(type), nullptr);
}

uint64_t Jobs::accept_async(std::string_view type, const AcceptOptions& options,
                            std::function<void(Result<Job>)> done) {
  Status invalid = validate_type(type);
  if (invalid.ok()) invalid = validate_worker(options.worker);
  if (invalid.ok() && options.timeout.count() < 0) invalid = InvalidArgument("accept timeout must not be negative");
  if (!invalid.ok()) {
    done(invalid);
    return 0;
  }
  const auto deadline = kv::Clock::now() + options.timeout;
  const std::string type_name(type);
  const std::string lock = new_lock(type);
  // Read the generation before looking, so an add after our look always shows as a newer one.
  const uint64_t generation = impl_->notifier.pending_generation(type_name);
  auto job = attempt_accept(*store_, impl_->keys, options_, type, options, lock, nullptr);
  if (job.ok() || job.status().code() != Code::kNotFound) {
    done(std::move(job));
    return 0;
  }
  if (options.timeout.count() == 0) {
    done(DeadlineExceeded("no job of type '" + type_name + "' is due"));
    return 0;
  }
  return impl_->acceptor.submit(type_name, options, lock, deadline, generation, std::move(done));
}

bool Jobs::cancel_accept(uint64_t ticket) { return ticket != 0 && impl_->acceptor.cancel(ticket); }

Result<Job> Jobs::accept(std::string_view type, const AcceptOptions& options) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<Job>> outcome;
  accept_async(type, options, [&](Result<Job> r) {
    std::lock_guard lock(mu);
    outcome.emplace(std::move(r));
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return outcome.has_value(); });
  return std::move(*outcome);
}

}  // namespace kvq::jobs
