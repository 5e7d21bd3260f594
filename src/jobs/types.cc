// The type operations: a type's settings (timeout, finished retention, max lost runs, retry
// policy; flow control's setters are in flow_control.cc) and the list of types.
#include <algorithm>
#include <functional>

#include "jobs/flow_control.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/types.h"
#include "jobs/validation.h"
#include "util/random.h"

namespace kvq::jobs {

namespace {

// remove_all_jobs removes at most this many jobs, and about this many bytes of job data, per
// transaction.
constexpr size_t kRemoveAllBatch = 256;
constexpr size_t kRemoveAllBytes = 32 * 1024 * 1024;
// How far the refusal of clear_type_timeout counts the jobs it names.
constexpr size_t kCountInRefusal = 100'000;

// Rewrites the type's settings when they change, and tells the monitors.
Status write_type(kv::Transaction& txn, const Keys& keys, std::string_view type,
                  const TypeSettings& settings, const std::optional<std::string>& current) {
  const std::string value = encode_type(settings);
  if (current == value) return Status::OK();
  txn.set(keys.timeout(type), value);
  txn.set(keys.types_token(), util::random_hex(8));
  return Status::OK();
}

}  // namespace

Status change_type(kv::Transaction& txn, const Keys& keys, std::string_view type,
                   const std::function<void(TypeSettings&)>& change) {
  KVQ_ASSIGN_OR_RETURN(auto current, txn.get(keys.timeout(type)));
  if (!current) return NotFound("type '" + std::string(type) + "' has no timeout");
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, decode_type(*current));
  change(settings);
  return write_type(txn, keys, type, settings, current);
}

Status Jobs::set_type_timeout(std::string_view type, Millis timeout) {
  return in_own_transaction(&Jobs::set_type_timeout, type, timeout);
}

Status Jobs::set_type_timeout(kv::Transaction& txn, std::string_view type, Millis timeout) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (timeout.count() <= 0) return InvalidArgument("type timeout must be positive");
  KVQ_ASSIGN_OR_RETURN(auto current, txn.get(impl_->keys.timeout(type)));
  TypeSettings settings;
  if (current) {
    KVQ_ASSIGN_OR_RETURN(settings, decode_type(*current));
  }
  settings.timeout = timeout;
  return write_type(txn, impl_->keys, type, settings, current);
}

Status Jobs::set_finished_retention(std::string_view type, std::optional<Millis> retention) {
  return in_own_transaction(&Jobs::set_finished_retention, type, retention);
}

Status Jobs::set_finished_retention(kv::Transaction& txn, std::string_view type,
                                    std::optional<Millis> retention) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (retention && retention->count() <= 0)
    return InvalidArgument("finished retention must be positive");
  return change_type(txn, impl_->keys, type,
                     [&](TypeSettings& settings) { settings.finished_retention = retention; });
}

Status Jobs::set_max_lost_runs(std::string_view type, std::optional<uint32_t> max_lost_runs) {
  return in_own_transaction(&Jobs::set_max_lost_runs, type, max_lost_runs);
}

Status Jobs::set_max_lost_runs(kv::Transaction& txn, std::string_view type,
                               std::optional<uint32_t> max_lost_runs) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (max_lost_runs && (*max_lost_runs < 1 || *max_lost_runs > kMaxLostRunsLimit)) {
    return InvalidArgument("max_lost_runs must be between 1 and " +
                           std::to_string(kMaxLostRunsLimit));
  }
  return change_type(txn, impl_->keys, type,
                     [&](TypeSettings& settings) { settings.max_lost_runs = max_lost_runs; });
}

Status Jobs::set_retry_policy(std::string_view type, const RetryPolicy& policy) {
  return in_own_transaction(&Jobs::set_retry_policy, type, policy);
}

Status Jobs::set_retry_policy(kv::Transaction& txn, std::string_view type,
                              const RetryPolicy& policy) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_retry_policy(policy));
  return change_type(txn, impl_->keys, type,
                     [&](TypeSettings& settings) { settings.retry = policy; });
}

Result<std::string> new_type_row(const TypeSettings& settings) {
  if (settings.timeout.count() <= 0) return InvalidArgument("type timeout must be positive");
  if (settings.finished_retention && settings.finished_retention->count() <= 0)
    return InvalidArgument("finished retention must be positive");
  if (settings.max_lost_runs &&
      (*settings.max_lost_runs < 1 || *settings.max_lost_runs > kMaxLostRunsLimit)) {
    return InvalidArgument("max_lost_runs must be between 1 and " +
                           std::to_string(kMaxLostRunsLimit));
  }
  KVQ_RETURN_IF_ERROR(validate_retry_policy(settings.retry));
  if (settings.max_running &&
      (*settings.max_running < 1 || *settings.max_running > kMaxRunningLimit)) {
    return InvalidArgument("max_running must be between 1 and " + std::to_string(kMaxRunningLimit));
  }
  TypeSettings created;
  created.timeout = settings.timeout;
  created.finished_retention = settings.finished_retention;
  created.max_lost_runs = settings.max_lost_runs;
  created.retry = settings.retry;
  created.max_running = settings.max_running;
  return encode_type(created);
}

void create_type(kv::Transaction& txn, const Keys& keys, std::string_view type,
                 const std::string& row) {
  txn.set(keys.timeout(type), row);
  txn.set(keys.types_token(), util::random_hex(8));
}

Result<bool> Jobs::ensure_type(std::string_view type, const TypeSettings& settings) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_ASSIGN_OR_RETURN(const std::string value, new_type_row(settings));
  // A try that wrote the row may have committed with its result unknown (kv.h): its retry
  // finds the row as it wrote it, and that creation was this call's.
  bool writing = false;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<bool> {
        KVQ_ASSIGN_OR_RETURN(auto current, txn.get(impl_->keys.timeout(type)));
        if (current) return writing && *current == value;
        writing = true;
        create_type(txn, impl_->keys, type, value);
        return true;
      },
      options_.retry);
}

Result<TypeSettings> Jobs::get_type(std::string_view type) {
  return in_own_transaction(&Jobs::get_type, type);
}

Result<TypeSettings> Jobs::get_type(kv::Transaction& txn, std::string_view type) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_ASSIGN_OR_RETURN(auto value, txn.get(impl_->keys.timeout(type)));
  if (!value) return NotFound("type '" + std::string(type) + "' has no timeout");
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, decode_type(*value));
  // A pause past its end is over, though nothing rewrote the row.
  if (settings.paused && !paused_at(settings, now_ms())) {
    settings.paused = false;
    settings.paused_until_ms.reset();
  }
  return settings;
}

Result<Millis> Jobs::get_type_timeout(std::string_view type) {
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, get_type(type));
  return settings.timeout;
}

Status Jobs::clear_type_timeout(std::string_view type) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  // A try that got as far as clearing it may have committed with its result unknown (kv.h):
  // then the retry finds the type gone, and that is this call's doing.
  bool clearing = false;
  Status cleared = kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Status {
        KVQ_ASSIGN_OR_RETURN(auto current, txn.get(impl_->keys.timeout(type)));
        if (!current && clearing) return Status::OK();
        if (!current) return NotFound("type '" + std::string(type) + "' has no timeout");
        // Not a snapshot read: an add committing meanwhile conflicts, and the retry sees its job.
        auto [begin, end] = impl_->keys.jobs_of(type);
        KVQ_ASSIGN_OR_RETURN(auto jobs, txn.get_range(begin, end, {.limit = 1}));
        if (!jobs.empty()) return TypeHasJobs("");
        clearing = true;
        txn.clear(impl_->keys.timeout(type));
        txn.clear(impl_->keys.own_timeouts(type));
        txn.set(impl_->keys.types_token(), util::random_hex(8));
        return Status::OK();
      },
      options_.retry);
  if (cleared.code() != Code::kTypeHasJobs) return cleared;
  std::string how_many = "jobs";
  if (auto counts = count(type, kCountInRefusal); counts.ok()) {
    how_many = "jobs (" + std::to_string(counts->pending) + " pending, " +
               std::to_string(counts->running) + " running, " + std::to_string(counts->finished) +
               " finished)";
  }
  return TypeHasJobs("type '" + std::string(type) + "' still has " + how_many +
                     "; deleting it would strand them, so remove them first with remove_all_jobs");
}

Result<uint64_t> Jobs::remove_all_jobs(std::string_view type) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  // Rows are read with their data, so a batch is bounded in bytes too (etcd's client takes
  // responses up to 64 MiB).
  const size_t batch =
      std::clamp<size_t>(kRemoveAllBytes / options_.max_data_bytes, 1, kRemoveAllBatch);
  const auto& keys = impl_->keys;
  uint64_t removed = 0;
  for (;;) {
    KVQ_ASSIGN_OR_RETURN(
        size_t n, kv::run(
                      *store_,
                      [&](kv::Transaction& txn) -> Result<size_t> {
                        auto [begin, end] = keys.jobs_of(type);
                        // Not a snapshot read: a job changed meanwhile conflicts, and the retry
                        // removes what it is now.
                        KVQ_ASSIGN_OR_RETURN(auto rows,
                                             txn.get_range(begin, end, {.limit = batch}));
                        for (const auto& kv : rows) {
                          KVQ_ASSIGN_OR_RETURN(auto id, keys.parse_job_id(kv.key));
                          KVQ_ASSIGN_OR_RETURN(JobRow before, decode_row(kv.value));
                          KVQ_RETURN_IF_ERROR(save_job(txn, keys, type, id, before, std::nullopt));
                        }
                        return rows.size();
                      },
                      options_.retry));
    removed += n;
    // Fewer than a batch: the type had no more jobs at that transaction's read version.
    if (n < batch) return removed;
  }
}

Result<std::vector<std::string>> Jobs::types() {
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<std::vector<std::string>> {
        auto [begin, end] = impl_->keys.timeouts();
        KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end));
        std::vector<std::string> out;
        for (const auto& kv : rows) {
          KVQ_ASSIGN_OR_RETURN(auto type, impl_->keys.parse_timeout_type(kv.key));
          out.push_back(std::move(type));
        }
        return out;
      },
      options_.retry);
}

Status require_type(kv::Transaction& txn, const Keys& keys, std::string_view type) {
  KVQ_ASSIGN_OR_RETURN(auto value, txn.get(keys.timeout(type), {.snapshot = true}));
  if (!value)
    return NotFound("type '" + std::string(type) + "' does not exist (it has no timeout)");
  return Status::OK();
}

Status require_type(kv::Store& store, const Keys& keys, std::string_view type,
                    const kv::RetryOptions& retry) {
  return kv::run(
      store, [&](kv::Transaction& txn) { return require_type(txn, keys, type); }, retry);
}

}  // namespace kvq::jobs
