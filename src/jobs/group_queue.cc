#include "jobs/group_queue.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "jobs/job_store.h"

namespace kvq::jobs {
namespace {

using Turn = std::pair<int64_t, int64_t>;  // (priority, in_turn_at µs): a (16) entry's place

constexpr size_t kGroupPage = 1000;

// Where a group whose first pending job is `first` stands in the queue (I8).
Turn turn_of(const OrderedIndex::Entry& first, int64_t last_accept_us) {
  return {first.priority, std::max(ms_to_us(first.time), last_accept_us)};
}

// Writes the group's row as `row` (its queue entry already decided in row.queued) over `was`
// (nullopt: none stored), and moves its (16) entry to match; deletes the row when the group has
// nothing pending or running (I7).
void place_group(kv::Transaction& txn, const Keys& keys, std::string_view type,
                 std::string_view group, const std::optional<GroupRow>& was, const GroupRow& row,
                 bool has_pending, bool run_ended) {
  const OrderedIndex queue = keys.group_queue(type);
  const std::optional<Turn> old_turn = was ? was->queued : std::nullopt;
  if (old_turn != row.queued) {
    if (old_turn) txn.clear(queue.key(old_turn->first, old_turn->second, group));
    if (row.queued) txn.set(queue.key(row.queued->first, row.queued->second, group), "");
  }
  // Waiting accepts watch the pending token: a group back in the queue, or one whose run ended
  // (an accept may have found it full without that mark committing), may be theirs now.
  if (row.queued && (!old_turn || run_ended)) txn.touch(keys.pending_token(type));
  if (row.running == 0 && !has_pending) {
    if (was) txn.clear(keys.group(type, group));
    return;
  }
  if (was != row) txn.set(keys.group(type, group), encode_group(row));
}

// Whether a job added at (priority, scheduled) may come before the group's first pending job,
// the group standing at `turn`: if not, its place in the queue stays.
bool may_lead(const JobRow& job, const Turn& turn) {
  return job.priority < turn.first ||
         (job.priority == turn.first && ms_to_us(job.scheduled) < turn.second);
}

Status save_group(kv::Transaction& txn, const Keys& keys, std::string_view type,
                  const std::string& group, const std::optional<JobRow>& before,
                  const std::optional<JobRow>& after) {
  auto in = [&](const std::optional<JobRow>& r, State state) {
    return r && r->group == group && state_of(*r) == state;
  };
  const bool pending_before = in(before, State::kPending);
  const bool pending_after = in(after, State::kPending);
  const int running_delta =
      static_cast<int>(in(after, State::kRunning)) - static_cast<int>(in(before, State::kRunning));
  const bool same_place = pending_before && pending_after && before->priority == after->priority &&
                          before->scheduled == after->scheduled;
  if (running_delta == 0 && pending_before == pending_after && (!pending_before || same_place))
    return Status::OK();
  KVQ_ASSIGN_OR_RETURN(auto was, load_group(txn, keys, type, group));
  GroupRow row = was.value_or(GroupRow{});
  if (running_delta < 0 && row.running == 0)
    return Internal("group '" + group + "' counts no running job to end");
  row.running += running_delta;
  if (running_delta < 0) row.full = false;  // a run ended: an accept re-marks it if still full
  if (pending_before && running_delta > 0) row.last_accept_us = now_us();
  bool has_pending = true;
  const bool only_added = pending_after && !pending_before && running_delta == 0;
  // A job added behind the group's first one (or to a full group) leaves its place as it is:
  // no read of (15).
  if (!(only_added && (row.full || (row.queued && !may_lead(*after, *row.queued))))) {
    KVQ_ASSIGN_OR_RETURN(auto first, first_pending(txn, keys, type, group));
    has_pending = first.has_value();
    row.queued.reset();
    if (first && !row.full) row.queued = turn_of(*first, row.last_accept_us);
  }
  place_group(txn, keys, type, group, was, row, has_pending, running_delta < 0);
  return Status::OK();
}

}  // namespace

int64_t ms_to_us(int64_t ms) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 1000;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min() / 1000;
  if (ms > kMax) return std::numeric_limits<int64_t>::max();
  if (ms < kMin) return std::numeric_limits<int64_t>::min();
  return ms * 1000;
}

int64_t us_to_ms(int64_t us) { return us >= 0 ? us / 1000 : -((-(us + 1)) / 1000) - 1; }

Status save_groups(kv::Transaction& txn, const Keys& keys, std::string_view type,
                   const std::optional<JobRow>& before, const std::optional<JobRow>& after) {
  if (before && !before->group.empty())
    KVQ_RETURN_IF_ERROR(save_group(txn, keys, type, before->group, before, after));
  if (after && !after->group.empty() && !(before && before->group == after->group))
    KVQ_RETURN_IF_ERROR(save_group(txn, keys, type, after->group, before, after));
  return Status::OK();
}

Result<std::optional<GroupRow>> load_group(kv::Transaction& txn, const Keys& keys,
                                           std::string_view type, std::string_view group) {
  KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(keys.group(type, group)));
  if (!bytes) return std::optional<GroupRow>();
  KVQ_ASSIGN_OR_RETURN(GroupRow row, decode_group(*bytes));
  return std::optional<GroupRow>(row);
}

Result<std::optional<OrderedIndex::Entry>> first_pending(kv::Transaction& txn, const Keys& keys,
                                                         std::string_view type,
                                                         std::string_view group) {
  const OrderedIndex index = keys.group_pending_index(type, group);
  auto [begin, end] = index.all();
  KVQ_ASSIGN_OR_RETURN(auto first, txn.get_range(begin, end, {.limit = 1}));
  if (first.empty()) return std::optional<OrderedIndex::Entry>();
  KVQ_ASSIGN_OR_RETURN(auto entry, index.parse(first[0].key));
  return std::optional<OrderedIndex::Entry>(std::move(entry));
}

Status mark_group_full(kv::Transaction& txn, const Keys& keys, std::string_view type,
                       std::string_view group, const GroupRow& row) {
  GroupRow full = row;
  full.full = true;
  full.queued.reset();
  // Full only while it runs jobs, so the row stays.
  place_group(txn, keys, type, group, row, full, /*has_pending=*/true, /*run_ended=*/false);
  return Status::OK();
}

Status refit_groups(kv::Transaction& txn, const Keys& keys, std::string_view type,
                    std::optional<uint32_t> limit) {
  auto [begin, end] = keys.groups_of(type);
  // Not a snapshot read: an accept or a run's end of any group meanwhile conflicts.
  KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end));
  for (const auto& kv : rows) {
    KVQ_ASSIGN_OR_RETURN(std::string group, keys.parse_group_name(kv.key));
    KVQ_ASSIGN_OR_RETURN(GroupRow was, decode_group(kv.value));
    const bool full = limit && was.running >= *limit;
    if (full == was.full) continue;
    if (full) {
      KVQ_RETURN_IF_ERROR(mark_group_full(txn, keys, type, group, was));
      continue;
    }
    GroupRow row = was;
    row.full = false;
    KVQ_ASSIGN_OR_RETURN(auto first, first_pending(txn, keys, type, group));
    if (first) row.queued = turn_of(*first, row.last_accept_us);
    place_group(txn, keys, type, group, was, row, first.has_value(), /*run_ended=*/true);
  }
  return Status::OK();
}

Status for_each_group(kv::Transaction& txn, const Keys& keys, std::string_view type,
                      const std::function<Result<bool>(const std::string&, const GroupRow&)>& fn) {
  auto [begin, end] = keys.groups_of(type);
  for (;;) {
    KVQ_ASSIGN_OR_RETURN(auto page,
                         txn.get_range(begin, end, {.limit = kGroupPage, .snapshot = true}));
    for (const auto& kv : page) {
      KVQ_ASSIGN_OR_RETURN(std::string group, keys.parse_group_name(kv.key));
      KVQ_ASSIGN_OR_RETURN(GroupRow row, decode_group(kv.value));
      KVQ_ASSIGN_OR_RETURN(bool more, fn(group, row));
      if (!more) return Status::OK();
    }
    if (page.size() < kGroupPage) return Status::OK();
    begin = page.back().key + '\0';
  }
}

}  // namespace kvq::jobs
