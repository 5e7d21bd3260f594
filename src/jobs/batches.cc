#include "jobs/batches.h"

#include <nlohmann/json.hpp>

#include "jobs/adds.h"
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

// The batch row (19, 7, batch): Tuple(format = 1, callback_type, callback_id, callback_data,
// on, state, members, succeeded, dead, cancelled, created_ms, settled_ms), BatchOn and
// BatchState as integers.
constexpr int64_t kBatchFormat = 1;
constexpr size_t kBatchFields = 12;

struct BatchRow {
  BatchSpec spec;
  BatchState state = BatchState::kOpen;
  uint64_t members = 0, succeeded = 0, dead = 0, cancelled = 0;
  int64_t created_ms = 0, settled_ms = 0;
  uint64_t ended() const { return succeeded + dead + cancelled; }
};

std::string encode_batch(const BatchRow& r) {
  Tuple t{kBatchFormat};
  t.append(r.spec.callback_type);
  t.append(r.spec.callback_id);
  t.append(r.spec.callback_data);
  t.append(static_cast<int64_t>(r.spec.on));
  t.append(static_cast<int64_t>(r.state));
  for (uint64_t n : {r.members, r.succeeded, r.dead, r.cancelled})
    t.append(static_cast<int64_t>(n));
  t.append(r.created_ms);
  t.append(r.settled_ms);
  return t.pack();
}

Result<BatchRow> decode_batch(std::string_view bytes) {
  KVQ_ASSIGN_OR_RETURN(Tuple t, Tuple::unpack(bytes));
  bool shaped = t.size() == kBatchFields && t[0].is_int() && t[0].as_int() == kBatchFormat &&
                t[1].is_string() && t[2].is_string() && t[3].is_string() && t[4].is_int() &&
                t[4].as_int() >= 0 && t[4].as_int() <= static_cast<int64_t>(BatchOn::kSuccess) &&
                t[5].is_int() && t[5].as_int() >= 0 &&
                t[5].as_int() <= static_cast<int64_t>(BatchState::kSkipped);
  for (size_t i = 6; shaped && i < kBatchFields; ++i) shaped = t[i].is_int() && t[i].as_int() >= 0;
  if (!shaped) return Internal("batch row of the wrong shape");
  BatchRow r;
  r.spec = {t[1].as_string(), t[2].as_string(), t[3].as_string(),
            static_cast<BatchOn>(t[4].as_int())};
  r.state = static_cast<BatchState>(t[5].as_int());
  r.members = static_cast<uint64_t>(t[6].as_int());
  r.succeeded = static_cast<uint64_t>(t[7].as_int());
  r.dead = static_cast<uint64_t>(t[8].as_int());
  r.cancelled = static_cast<uint64_t>(t[9].as_int());
  r.created_ms = t[10].as_int();
  r.settled_ms = t[11].as_int();
  if (r.ended() > r.members) return Internal("batch row counts more ends than members");
  return r;
}

std::string named(std::string_view batch) { return "batch '" + std::string(batch) + "'"; }

// The batch's row, read without snapshot: every member's add and end and the seal read and
// write it, so the store orders them (the hot key of DESIGN.md §7).
Result<std::optional<BatchRow>> load_batch(kv::Transaction& txn, const Keys& keys,
                                           std::string_view batch) {
  KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(keys.batch(batch)));
  if (!bytes) return std::optional<BatchRow>();
  KVQ_ASSIGN_OR_RETURN(BatchRow row, decode_batch(*bytes));
  return std::optional<BatchRow>(std::move(row));
}

BatchInfo to_batch_info(std::string_view id, const BatchRow& row) {
  return BatchInfo{.id = std::string(id),
                   .spec = row.spec,
                   .state = row.state,
                   .members = row.members,
                   .succeeded = row.succeeded,
                   .dead = row.dead,
                   .cancelled = row.cancelled,
                   .created_ms = row.created_ms,
                   .settled_ms = row.settled_ms};
}

void count_end(BatchRow& row, Outcome outcome) {
  switch (outcome) {
    case Outcome::kDead: ++row.dead; break;
    case Outcome::kCancelled: ++row.cancelled; break;
    default: ++row.succeeded; break;  // kSucceeded (kNone does not end a job)
  }
}

Status validate_batch_id(std::string_view id) {
  if (Status s = validate_id(id); !s.ok()) return InvalidArgument("batch id: " + s.message());
  return Status::OK();
}

// The callback's data: the spec's, with "batch" set to the counts and the first dead members.
Result<std::string> callback_data(kv::Transaction& txn, const Keys& keys, std::string_view batch,
                                  const BatchRow& row) {
  auto [begin, end] = keys.batch_dead_of(batch);
  KVQ_ASSIGN_OR_RETURN(auto dead, txn.get_range(begin, end, {.limit = kMaxDeadJobsInCallback}));
  auto dead_jobs = nlohmann::ordered_json::array();
  for (const auto& entry : dead) {
    KVQ_ASSIGN_OR_RETURN(auto job, keys.parse_batch_dead(entry.key));
    dead_jobs.push_back({{"type", job.first}, {"id", job.second}});
  }
  auto data = nlohmann::ordered_json::parse(row.spec.callback_data, nullptr, false);
  if (!data.is_object()) return Internal("batch callback data is not a JSON object");
  data["batch"] = {{"id", std::string(batch)},   {"members", row.members},
                   {"succeeded", row.succeeded}, {"dead", row.dead},
                   {"cancelled", row.cancelled}, {"dead_jobs", std::move(dead_jobs)}};
  return data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// The batch is sealed and every member has ended: adds its callback (or, under kSuccess with
// a member that did not succeed, settles without it), here, once: the row it leaves settled
// is what every later end and seal of it reads.
Status settle(kv::Transaction& txn, const Keys& keys, std::string_view batch, BatchRow& row) {
  const bool fire = row.spec.on == BatchOn::kComplete || row.succeeded == row.members;
  if (fire) {
    KVQ_ASSIGN_OR_RETURN(std::string data, callback_data(txn, keys, batch, row));
    AddOptions options;
    // Its type existed at put_batch: one removed since is created rather than fail the end of
    // the member that settles the batch.
    options.create_type = TypeSettings{.timeout = Millis(kBatchCallbackTypeTimeoutMs)};
    KVQ_RETURN_IF_ERROR(
        add_normalized(txn, keys, row.spec.callback_type, row.spec.callback_id, data, options)
            .status());
  }
  row.state = fire ? BatchState::kFired : BatchState::kSkipped;
  row.settled_ms = now_ms();
  KVQ_ASSIGN_OR_RETURN(auto totals_bytes, txn.get(keys.batch_totals()));
  int64_t fired = 0, skipped = 0;
  if (totals_bytes) {
    KVQ_ASSIGN_OR_RETURN(Tuple t, Tuple::unpack(*totals_bytes));
    if (t.size() != 2 || !t[0].is_int() || !t[1].is_int())
      return Internal("batch totals of the wrong shape");
    fired = t[0].as_int();
    skipped = t[1].as_int();
  }
  (fire ? fired : skipped) += 1;
  txn.set(keys.batch_totals(), Tuple{fired, skipped}.pack());
  return Status::OK();
}

}  // namespace

std::string_view batch_on_name(BatchOn on) {
  return on == BatchOn::kSuccess ? "success" : "complete";
}

Result<BatchOn> parse_batch_on(std::string_view name) {
  if (name == "complete") return BatchOn::kComplete;
  if (name == "success") return BatchOn::kSuccess;
  return InvalidArgument("unknown batch 'on' '" + std::string(name) + "' (complete or success)");
}

std::string_view batch_state_name(BatchState state) {
  switch (state) {
    case BatchState::kOpen: return "open";
    case BatchState::kSealed: return "sealed";
    case BatchState::kFired: return "fired";
    case BatchState::kSkipped: return "skipped";
  }
  return "open";
}

Status validate_batch_of_add(const AddOptions& options) {
  if (options.batch.empty()) return Status::OK();
  return validate_batch_id(options.batch);
}

Status check_batch_of_add(std::string_view type, std::string_view id,
                          const std::optional<JobRow>& before, const AddOptions& options) {
  if (options.batch.empty() || !before || state_of(*before) == State::kFinished ||
      before->batch == options.batch) {
    return Status::OK();
  }
  return WrongState("job '" + std::string(id) + "' of type '" + std::string(type) + "' is " +
                    std::string(state_name(state_of(*before))) +
                    (before->batch.empty() ? " in no batch" : " in " + named(before->batch)) +
                    "; it can join " + named(options.batch) +
                    " only as a new job or a finished one added anew");
}

Status join_batch(kv::Transaction& txn, const Keys& keys, std::string_view type,
                  std::string_view id, JobRow& after, const AddOptions& options) {
  after.batch.clear();
  if (options.batch.empty()) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(auto row, load_batch(txn, keys, options.batch));
  if (!row) return NotFound(named(options.batch) + " does not exist");
  if (row->state != BatchState::kOpen)
    return WrongState(named(options.batch) + " is sealed; no more jobs may join it");
  ++row->members;
  if (state_of(after) == State::kFinished) {
    count_end(*row, after.outcome);
    if (after.outcome == Outcome::kDead) txn.set(keys.batch_dead(options.batch, type, id), "");
  } else {
    after.batch = options.batch;
  }
  txn.set(keys.batch(options.batch), encode_batch(*row));
  return Status::OK();
}

Status batch_member_ended(kv::Transaction& txn, const Keys& keys, std::string_view batch,
                          std::string_view type, std::string_view id, Outcome outcome) {
  KVQ_ASSIGN_OR_RETURN(auto row, load_batch(txn, keys, batch));
  if (!row) return Internal(named(batch) + " of a member does not exist");
  if (row->ended() >= row->members) return Internal(named(batch) + " counts a member twice");
  count_end(*row, outcome);
  if (outcome == Outcome::kDead) txn.set(keys.batch_dead(batch, type, id), "");
  if (row->state == BatchState::kSealed && row->ended() == row->members)
    KVQ_RETURN_IF_ERROR(settle(txn, keys, batch, *row));
  txn.set(keys.batch(batch), encode_batch(*row));
  return Status::OK();
}

// ---- Jobs ----

Result<BatchInfo> Jobs::put_batch(std::string_view id, const BatchSpec& spec) {
  return in_own_transaction(&Jobs::put_batch, id, spec);
}

Result<BatchInfo> Jobs::put_batch(kv::Transaction& txn, std::string_view id,
                                  const BatchSpec& spec) {
  KVQ_RETURN_IF_ERROR(validate_batch_id(id));
  if (Status s = validate_type(spec.callback_type); !s.ok())
    return InvalidArgument("callback: " + s.message());
  if (Status s = validate_id(spec.callback_id); !s.ok())
    return InvalidArgument("callback: " + s.message());
  auto data = normalize_data(spec.callback_data, options_.max_data_bytes);
  if (!data.ok()) return InvalidArgument("callback data: " + data.status().message());
  BatchSpec normalized = spec;
  normalized.callback_data = std::move(*data);
  const Keys& keys = impl_->keys;
  KVQ_ASSIGN_OR_RETURN(auto type_row, txn.get(keys.timeout(spec.callback_type)));
  if (!type_row)
    return NotFound("callback type '" + spec.callback_type + "' does not exist (no timeout)");
  KVQ_ASSIGN_OR_RETURN(auto row, load_batch(txn, keys, id));
  if (row && row->spec == normalized) return to_batch_info(id, *row);
  if (row && row->state != BatchState::kOpen)
    return WrongState(named(id) + " is sealed; its callback can no longer change");
  if (!row) {
    row.emplace();
    row->created_ms = now_ms();
  }
  row->spec = std::move(normalized);
  txn.set(keys.batch(id), encode_batch(*row));
  return to_batch_info(id, *row);
}

Result<BatchInfo> Jobs::seal_batch(std::string_view id) {
  return in_own_transaction(&Jobs::seal_batch, id);
}

Result<BatchInfo> Jobs::seal_batch(kv::Transaction& txn, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_batch_id(id));
  const Keys& keys = impl_->keys;
  KVQ_ASSIGN_OR_RETURN(auto row, load_batch(txn, keys, id));
  if (!row) return NotFound(named(id) + " does not exist");
  if (row->state != BatchState::kOpen) return to_batch_info(id, *row);
  row->state = BatchState::kSealed;
  if (row->ended() == row->members) KVQ_RETURN_IF_ERROR(settle(txn, keys, id, *row));
  txn.set(keys.batch(id), encode_batch(*row));
  return to_batch_info(id, *row);
}

Result<BatchInfo> Jobs::batch(std::string_view id) { return in_own_transaction(&Jobs::batch, id); }

Result<BatchInfo> Jobs::batch(kv::Transaction& txn, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_batch_id(id));
  KVQ_ASSIGN_OR_RETURN(auto row, load_batch(txn, impl_->keys, id));
  if (!row) return NotFound(named(id) + " does not exist");
  return to_batch_info(id, *row);
}

Result<BatchTotals> Jobs::batch_totals() {
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<BatchTotals> {
        KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(impl_->keys.batch_totals(), {.snapshot = true}));
        if (!bytes) return BatchTotals{};
        KVQ_ASSIGN_OR_RETURN(Tuple t, Tuple::unpack(*bytes));
        if (t.size() != 2 || !t[0].is_int() || !t[1].is_int())
          return Internal("batch totals of the wrong shape");
        return BatchTotals{static_cast<uint64_t>(t[0].as_int()),
                           static_cast<uint64_t>(t[1].as_int())};
      },
      options_.retry);
}

}  // namespace kvq::jobs
