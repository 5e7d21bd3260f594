#include "jobs/job_store.h"

#include <chrono>

#include "util/random.h"

namespace kvq::jobs {

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Result<std::optional<JobRow>> load_job(kv::Transaction& txn, const Keys& keys,
                                       std::string_view type, std::string_view id) {
  KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(keys.job(type, id)));
  if (!bytes) return std::optional<JobRow>();
  KVQ_ASSIGN_OR_RETURN(JobRow row, decode_row(*bytes));
  return std::optional<JobRow>(std::move(row));
}

Status save_job(kv::Transaction& txn, const Keys& keys, std::string_view type, std::string_view id,
                const std::optional<JobRow>& before, std::optional<JobRow> after) {
  KVQ_ASSIGN_OR_RETURN(uint64_t version, txn.read_version());
  const bool was_pending = before && state_of(*before) == State::kPending;
  const bool was_running = before && state_of(*before) == State::kRunning;
  const bool was_finished = before && state_of(*before) == State::kFinished;
  if (was_finished) txn.clear(keys.finished(type, before->updated, id));
  if (was_pending) txn.clear(keys.pending(type, before->priority, before->scheduled, id));
  if (was_running) {
    txn.clear(keys.activity(type, before->seq, id));
    if (!before->worker.empty())
      txn.clear(keys.held_by(before->worker_type, before->worker, type, id));
  }
  if (!after) {
    txn.clear(keys.job(type, id));
  } else {
    after->seq = version;
    after->updated = now_ms();
    txn.set(keys.job(type, id), encode_row(*after));
    switch (state_of(*after)) {
      case State::kPending:
        txn.set(keys.pending(type, after->priority, after->scheduled, id), "");
        txn.set(keys.pending_token(type), util::random_hex(8));
        break;
      case State::kRunning:
        txn.set(keys.activity(type, after->seq, id), "");
        if (!after->worker.empty())
          txn.set(keys.held_by(after->worker_type, after->worker, type, id), "");
        break;
      case State::kFinished: txn.set(keys.finished(type, after->updated, id), ""); break;
    }
  }
  txn.set(keys.activity_token(type), util::random_hex(8));
  return Status::OK();
}

JobRow after_lost_run(const JobRow& running, std::optional<uint32_t> max_lost_runs) {
  JobRow after = running;
  after.lock.clear();
  after.worker.clear();
  after.worker_type.clear();
  after.lost_runs = running.lost_runs + 1;
  if (max_lost_runs && after.lost_runs >= *max_lost_runs) {
    after.finished = true;
    after.gave_up = true;
    after.resubmit = false;
    // No worker finished it: a finish with the lost run's lock must halt, not pass as a retry.
    after.finished_lock.clear();
    return after;
  }
  if (after.resubmit) {
    after.resubmit = false;
    after.scheduled = after.next_scheduled;
    after.priority = after.next_priority;
  }
  return after;
}

Result<std::optional<uint32_t>> max_lost_runs_of(kv::Transaction& txn, const Keys& keys,
                                                 std::string_view type) {
  KVQ_ASSIGN_OR_RETURN(auto value, txn.get(keys.timeout(type)));
  if (!value) return std::optional<uint32_t>();
  KVQ_ASSIGN_OR_RETURN(TypeSettings settings, decode_type(*value));
  return settings.max_lost_runs;
}

JobInfo to_info(std::string_view type, std::string_view id, const JobRow& row) {
  JobInfo info;
  info.type = type;
  info.id = id;
  info.state = state_of(row);
  info.data = row.data;
  info.scheduled_time_ms = row.scheduled;
  info.priority = row.priority;
  info.resubmitted = row.resubmit;
  info.worker = row.worker;
  info.worker_type = row.worker_type;
  info.attempts = row.attempts;
  info.lost_runs = row.lost_runs;
  info.gave_up = row.gave_up;
  info.created_at_ms = row.created;
  info.updated_at_ms = row.updated;
  return info;
}

JobEvent to_event(std::string_view type, std::string_view id, const JobRow& row) {
  JobEvent e;
  e.type = type;
  e.id = id;
  e.state = state_of(row);
  e.data = row.data;
  e.seq = row.seq;
  e.gave_up = row.gave_up;
  return e;
}

}  // namespace kvq::jobs
