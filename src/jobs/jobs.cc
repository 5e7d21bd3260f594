// Type timeouts and the producers' operations.
#include <algorithm>
#include <functional>
#include <limits>

#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"
#include "util/random.h"

namespace kvq::jobs {

std::string_view state_name(State state) {
  switch (state) {
    case State::kPending: return "pending";
    case State::kRunning: return "running";
    case State::kFinished: return "finished";
  }
  return "pending";
}

Result<State> parse_state(std::string_view name) {
  if (name == "pending") return State::kPending;
  if (name == "running") return State::kRunning;
  if (name == "finished") return State::kFinished;
  return InvalidArgument("unknown job state '" + std::string(name) + "' (pending, running or finished)");
}

Jobs::Jobs(std::shared_ptr<kv::Store> store, JobsOptions options)
    : store_(std::move(store)), options_(std::move(options)) {
  impl_ = std::make_unique<Impl>(*store_, options_);
}

Jobs::~Jobs() = default;

Result<std::unique_ptr<Jobs>> Jobs::open(std::shared_ptr<kv::Store> store, JobsOptions options) {
  if (!store) return InvalidArgument("no store");
  if (options.max_data_bytes == 0 || options.max_data_bytes > kv::kMaxValueSize / 2) {
    return InvalidArgument("max_data_bytes must be in 1.." + std::to_string(kv::kMaxValueSize / 2));
  }
  if (options.accept_spread == 0) return InvalidArgument("accept_spread must be at least 1");
  if (options.monitor_max_batch == 0) return InvalidArgument("monitor_max_batch must be at least 1");
  return std::unique_ptr<Jobs>(new Jobs(std::move(store), std::move(options)));
}

Jobs::Stats Jobs::stats() const {
  Stats s;
  if (impl_->monitor) {
    s.reenqueued_by_monitor = impl_->monitor->reenqueued();
    s.gave_up_by_monitor = impl_->monitor->gave_up();
    s.monitor_checks = impl_->monitor->checks();
    s.removed_by_retention = impl_->monitor->expired();
  }
  return s;
}

// ---- Types ----

namespace {

// Rewrites the type's settings when they change, and tells the monitors.
Status write_type(kv::Transaction& txn, const Keys& keys, std::string_view type, const TypeSettings& settings,
                  const std::optional<std::string>& current) {
  const std::string value = encode_type(settings);
  if (current == value) return Status::OK();
  txn.set(keys.timeout(type), value);
  txn.set(keys.types_token(), util::random_hex(8));
  return Status::OK();
}

// Changes one setting of a type that exists (kNotFound otherwise), keeping the others.
Status change_type(kv::Transaction& txn, const Keys& keys, std::string_view type,
                   const std::function<void(TypeSettings&)>& change) {
  KVQ_ASSIGN_OR_RETURN(auto current, txn.get(keys.timeout(type)));
  if (!current) return NotFound("type '" + std::string(type) + "' has no timeout");
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, decode_type(*current));
  change(settings);
  return write_type(txn, keys, type, settings, current);
}

}  // namespace

Status Jobs::set_type_timeout(std::string_view type, Millis timeout) {
  return kv::run(*store_, [&](kv::Transaction& txn) { return set_type_timeout(txn, type, timeout); }, options_.retry);
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
  return kv::run(*store_, [&](kv::Transaction& txn) { return set_finished_retention(txn, type, retention); },
                 options_.retry);
}

Status Jobs::set_finished_retention(kv::Transaction& txn, std::string_view type, std::optional<Millis> retention) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (retention && retention->count() <= 0) return InvalidArgument("finished retention must be positive");
  return change_type(txn, impl_->keys, type, [&](TypeSettings& settings) { settings.finished_retention = retention; });
}

Status Jobs::set_max_lost_runs(std::string_view type, std::optional<uint32_t> max_lost_runs) {
  return kv::run(*store_, [&](kv::Transaction& txn) { return set_max_lost_runs(txn, type, max_lost_runs); },
                 options_.retry);
}

Status Jobs::set_max_lost_runs(kv::Transaction& txn, std::string_view type, std::optional<uint32_t> max_lost_runs) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (max_lost_runs && (*max_lost_runs < 1 || *max_lost_runs > kMaxLostRunsLimit)) {
    return InvalidArgument("max_lost_runs must be between 1 and " + std::to_string(kMaxLostRunsLimit));
  }
  return change_type(txn, impl_->keys, type, [&](TypeSettings& settings) { settings.max_lost_runs = max_lost_runs; });
}

Result<TypeSettings> Jobs::get_type(std::string_view type) {
  return kv::run(*store_, [&](kv::Transaction& txn) { return get_type(txn, type); }, options_.retry);
}

Result<TypeSettings> Jobs::get_type(kv::Transaction& txn, std::string_view type) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_ASSIGN_OR_RETURN(auto value, txn.get(impl_->keys.timeout(type)));
  if (!value) return NotFound("type '" + std::string(type) + "' has no timeout");
  return decode_type(*value);
}

Result<Millis> Jobs::get_type_timeout(std::string_view type) {
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, get_type(type));
  return settings.timeout;
}

Status Jobs::clear_type_timeout(std::string_view type) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  return kv::run(*store_, [&](kv::Transaction& txn) -> Status {
    KVQ_ASSIGN_OR_RETURN(auto current, txn.get(impl_->keys.timeout(type)));
    if (!current) return NotFound("type '" + std::string(type) + "' has no timeout");
    txn.clear(impl_->keys.timeout(type));
    txn.set(impl_->keys.types_token(), util::random_hex(8));
    return Status::OK();
  }, options_.retry);
}

Result<std::vector<std::string>> Jobs::types() {
  return kv::run(*store_, [&](kv::Transaction& txn) -> Result<std::vector<std::string>> {
    auto [begin, end] = impl_->keys.timeouts();
    KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end));
    std::vector<std::string> out;
    for (const auto& kv : rows) {
      KVQ_ASSIGN_OR_RETURN(auto type, impl_->keys.parse_timeout_type(kv.key));
      out.push_back(std::move(type));
    }
    return out;
  }, options_.retry);
}

// ---- Producers ----

namespace {

// What `add` turns `before` into, or nullopt when it would change nothing.
std::optional<JobRow> added(const std::optional<JobRow>& before, const std::string& data, const AddOptions& o,
                            int64_t now) {
  if (!before) {
    JobRow row;
    row.data = data;
    row.scheduled = o.scheduled_time_ms.value_or(now);
    row.priority = o.priority;
    row.created = now;
    return row;
  }
  JobRow after = *before;
  switch (state_of(*before)) {
    case State::kPending:
      // Without an explicit time a pending job keeps its place in the queue.
      after.scheduled = o.scheduled_time_ms.value_or(before->scheduled);
      after.priority = o.priority;
      after.data = data;
      if (after.scheduled == before->scheduled && after.priority == before->priority && after.data == before->data) {
        return std::nullopt;
      }
      after.lost_runs = 0;
      return after;
    case State::kRunning:
      after.resubmit = true;
      after.next_scheduled = o.scheduled_time_ms.value_or(before->resubmit ? before->next_scheduled : now);
      after.next_priority = o.priority;
      if (before->resubmit && after.next_scheduled == before->next_scheduled &&
          after.next_priority == before->next_priority) {
        return std::nullopt;
      }
      return after;
    case State::kFinished:
      after.finished = false;
      after.gave_up = false;
      after.lost_runs = 0;
      after.data = data;
      after.scheduled = o.scheduled_time_ms.value_or(now);
      after.priority = o.priority;
      return after;
  }
  return std::nullopt;
}

}  // namespace

namespace {

// add, once its input is validated and its data normalized.
Status add_normalized(kv::Transaction& txn, const Keys& keys, std::string_view type, std::string_view id,
                      const std::string& data, const AddOptions& options) {
  // One read for both (on etcd, one round trip).
  KVQ_ASSIGN_OR_RETURN(auto stored, txn.get_many({keys.timeout(type), keys.job(type, id)}));
  if (!stored[0]) {
    return FailedPrecondition("type '" + std::string(type) + "' has no timeout; set the type's timeout before adding jobs");
  }
  std::optional<JobRow> before;
  if (stored[1]) {
    KVQ_ASSIGN_OR_RETURN(before, decode_row(*stored[1]));
  }
  auto after = added(before, data, options, now_ms());
  if (!after) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(after->add_seq, txn.read_version());
  return save_job(txn, keys, type, id, before, std::move(after));
}

Result<std::string> validate_add(std::string_view type, std::string_view id, std::string_view data,
                                 size_t max_data_bytes) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  return normalize_data(data, max_data_bytes);
}

}  // namespace

namespace {

// One attempt of add. An earlier attempt may have committed (unknown result) and the job moved
// on since — even finished. Re-applying would run it again, so it recognises its own earlier
// add by the read version that attempt recorded in `attempt_version`.
Status add_attempt(kv::Transaction& txn, const Keys& keys, std::string_view type, std::string_view id,
                   const std::string& normalized, const AddOptions& options,
                   std::optional<uint64_t>& attempt_version) {
  if (attempt_version) {
    KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, keys, type, id));
    if (row && row->add_seq == *attempt_version) return Status::OK();
  }
  Status added = add_normalized(txn, keys, type, id, normalized, options);
  // Read after add's own reads fixed it: on etcd asking first would cost a round trip.
  KVQ_ASSIGN_OR_RETURN(attempt_version, txn.read_version());
  return added;
}

}  // namespace

Status Jobs::add(std::string_view type, std::string_view id, std::string_view data, AddOptions options) {
  KVQ_ASSIGN_OR_RETURN(std::string normalized, validate_add(type, id, data, options_.max_data_bytes));
  std::optional<uint64_t> attempt_version;
  return kv::run(*store_, [&](kv::Transaction& txn) -> Status {
    return add_attempt(txn, impl_->keys, type, id, normalized, options, attempt_version);
  }, options_.retry);
}

void Jobs::add_async(std::string_view type, std::string_view id, std::string_view data, AddOptions options,
                     std::function<void(Status)> done) {
  auto normalized = validate_add(type, id, data, options_.max_data_bytes);
  if (!normalized.ok()) return done(normalized.status());
  struct Add {
    std::string type, id, data;
    AddOptions options;
    std::optional<uint64_t> attempt_version;
  };
  auto add = std::make_shared<Add>(Add{std::string(type), std::string(id), std::move(*normalized), options, {}});
  kv::run_async(*store_, [add, &keys = impl_->keys](kv::Transaction& txn) -> Status {
    return add_attempt(txn, keys, add->type, add->id, add->data, add->options, add->attempt_version);
  }, std::move(done), options_.retry);
}

Status Jobs::add(kv::Transaction& txn, std::string_view type, std::string_view id, std::string_view data,
                 AddOptions options) {
  KVQ_ASSIGN_OR_RETURN(std::string normalized, validate_add(type, id, data, options_.max_data_bytes));
  return add_normalized(txn, impl_->keys, type, id, normalized, options);
}

Status Jobs::remove(std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  bool attempted = false;
  return kv::run(*store_, [&](kv::Transaction& txn) -> Status {
    KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, impl_->keys, type, id));
    if (!before) {
      // Gone on a retry: our earlier attempt committed (an unknown result), or someone else
      // removed it meanwhile. Either way the caller's wish holds.
      if (attempted) return Status::OK();
      return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) + "' does not exist");
    }
    attempted = true;
    return save_job(txn, impl_->keys, type, id, before, std::nullopt);
  }, options_.retry);
}

Status Jobs::remove(kv::Transaction& txn, std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  KVQ_ASSIGN_OR_RETURN(auto before, load_job(txn, impl_->keys, type, id));
  if (!before) return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) + "' does not exist");
  return save_job(txn, impl_->keys, type, id, before, std::nullopt);
}

Result<JobInfo> Jobs::get(std::string_view type, std::string_view id) {
  return kv::run(*store_, [&](kv::Transaction& txn) { return get(txn, type, id); }, options_.retry);
}

Result<JobInfo> Jobs::get(kv::Transaction& txn, std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  KVQ_ASSIGN_OR_RETURN(auto row, load_job(txn, impl_->keys, type, id));
  if (!row) return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) + "' does not exist");
  return to_info(type, id, *row);
}

Result<JobPage> Jobs::list(std::string_view type, const ListOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (options.limit == 0 || options.limit > 10'000) return InvalidArgument("list limit must be in 1..10000");
  const auto& keys = impl_->keys;
  // Filtering happens after reading, so bound the rows one page may scan.
  const size_t scan_budget = std::max<size_t>(options.limit * 10, 1000);
  return kv::run(*store_, [&](kv::Transaction& txn) -> Result<JobPage> {
    auto [begin, end] = keys.jobs_of(type);
    if (!options.cursor.empty()) begin = keys.job(type, options.cursor) + '\0';
    KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end, {.limit = scan_budget, .snapshot = true}));
    JobPage page;
    std::string last_id;
    for (const auto& kv : rows) {
      KVQ_ASSIGN_OR_RETURN(last_id, keys.parse_job_id(kv.key));
      KVQ_ASSIGN_OR_RETURN(JobRow row, decode_row(kv.value));
      if (options.state && state_of(row) != *options.state) continue;
      if (options.worker && row.worker != *options.worker) continue;
      if (options.worker_type && row.worker_type != *options.worker_type) continue;
      page.jobs.push_back(to_info(type, last_id, row));
      if (page.jobs.size() == options.limit) break;
    }
    const bool more = page.jobs.size() == options.limit || rows.size() == scan_budget;
    if (more && !last_id.empty()) page.next_cursor = last_id;
    return page;
  }, options_.retry);
}

Result<Jobs::StateCounts> Jobs::count(std::string_view type, size_t limit) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  const auto& keys = impl_->keys;
  // Index entries are empty values, so counting reads keys only; pages bound each read.
  auto count_range = [&](kv::Transaction& txn, std::pair<std::string, std::string> range) -> Result<uint64_t> {
    constexpr size_t kPage = 1000;
    uint64_t n = 0;
    while (n < limit) {
      const size_t want = std::min<uint64_t>(kPage, limit - n);
      KVQ_ASSIGN_OR_RETURN(auto page, txn.get_range(range.first, range.second, {.limit = want, .snapshot = true}));
      n += page.size();
      if (page.size() < want) break;
      range.first = page.back().key + '\0';
    }
    return n;
  };
  return kv::run(*store_, [&](kv::Transaction& txn) -> Result<StateCounts> {
    StateCounts counts;
    KVQ_ASSIGN_OR_RETURN(counts.pending, count_range(txn, keys.pending_of(type)));
    KVQ_ASSIGN_OR_RETURN(counts.running, count_range(txn, keys.activity_before(type, UINT64_MAX >> 1)));
    KVQ_ASSIGN_OR_RETURN(counts.finished,
                         count_range(txn, keys.finished_before(type, std::numeric_limits<int64_t>::max())));
    return counts;
  }, options_.retry);
}

Result<uint64_t> Jobs::pending_count(std::string_view type, const PendingCountOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  const int64_t max_time = options.max_scheduled_time_ms.value_or(now_ms());
  const auto& keys = impl_->keys;
  constexpr size_t kPage = 1000;
  return kv::run(*store_, [&](kv::Transaction& txn) -> Result<uint64_t> {
    uint64_t count = 0;
    const auto end = keys.pending_of(type).second;
    std::string from = keys.pending_of(type).first;
    // One priority level at a time: due entries of a level are contiguous.
    while (count < options.limit) {
      KVQ_ASSIGN_OR_RETURN(auto first, txn.get_range(from, end, {.limit = 1, .snapshot = true}));
      if (first.empty()) break;
      KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_pending(first[0].key));
      auto [lo, hi] = keys.pending_due(type, entry.priority, max_time);
      while (count < options.limit) {
        const size_t want = std::min<uint64_t>(kPage, options.limit - count);
        KVQ_ASSIGN_OR_RETURN(auto due, txn.get_range(lo, hi, {.limit = want, .snapshot = true}));
        count += due.size();
        if (due.size() < want) break;
        lo = due.back().key + '\0';
      }
      if (entry.priority == INT64_MAX) break;
      from = keys.pending_from_priority(type, entry.priority + 1);
    }
    return count;
  }, options_.retry);
}

}  // namespace kvq::jobs
