// accept: handing a due job to a worker.
#include <algorithm>

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

std::chrono::system_clock::time_point wall(int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

// Converts a wall-clock instant into this process's steady clock, for waiting.
kv::Clock::time_point steady_at(int64_t ms) {
  const auto delta = wall(ms) - std::chrono::system_clock::now();
  return kv::Clock::now() + std::chrono::duration_cast<kv::Clock::duration>(delta);
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

Result<Job> Jobs::accept(std::string_view type, const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_worker(options.worker));
  if (options.timeout.count() < 0) return InvalidArgument("accept timeout must not be negative");
  const auto deadline = kv::Clock::now() + options.timeout;
  const std::string type_name(type);
  const std::string lock = new_lock(type);
  for (;;) {
    // Read the generation before looking, so an add after our look always wakes us.
    const uint64_t generation = impl_->notifier.pending_generation(type_name);
    std::optional<int64_t> next_due;
    std::optional<uint64_t> attempt_version;
    auto job = kv::run(*store_, [&](kv::Transaction& txn) -> Result<Job> {
      if (attempt_version) {
        // An earlier attempt's commit result was unknown: it may have taken a job already.
        KVQ_ASSIGN_OR_RETURN(auto taken, find_accepted(txn, impl_->keys, type, *attempt_version, lock));
        if (taken) return std::move(*taken);
      }
      KVQ_ASSIGN_OR_RETURN(attempt_version, txn.read_version());
      next_due.reset();
      return try_accept(txn, impl_->keys, options_, type, options, lock, &next_due);
    }, options_.retry);
    if (job.ok() || job.status().code() != Code::kNotFound) return job;
    if (kv::Clock::now() >= deadline) {
      return DeadlineExceeded("no job of type '" + type_name + "' became due within the timeout");
    }
    auto wake = deadline;
    if (next_due) wake = std::min(wake, steady_at(*next_due + 1));
    impl_->notifier.wait_pending_change(type_name, generation, wake);
  }
}

}  // namespace kvq::jobs
