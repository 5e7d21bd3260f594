// Groups: the setter of a type's max_running_per_group and the list of its groups. The groups
// themselves are kept by save_job (group_queue.h) and taken turns from by accepts
// (pending_picks.cc).
#include "jobs/accept/accept.h"
#include "jobs/flow_control.h"
#include "jobs/group_queue.h"
#include "jobs/jobs_impl.h"
#include "jobs/types.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

constexpr size_t kMaxGroupsListed = 1000;

}  // namespace

Status Jobs::set_max_running_per_group(std::string_view type, std::optional<uint32_t> max_running) {
  return in_own_transaction(&Jobs::set_max_running_per_group, type, max_running);
}

Status Jobs::set_max_running_per_group(kv::Transaction& txn, std::string_view type,
                                       std::optional<uint32_t> max_running) {
  if (max_running && (*max_running < 1 || *max_running > kMaxRunningLimit)) {
    return InvalidArgument("max_running_per_group must be between 1 and " +
                           std::to_string(kMaxRunningLimit));
  }
  bool changed = false;
  KVQ_RETURN_IF_ERROR(change_flow(txn, impl_->keys, type, [&](TypeSettings& settings) {
    changed = settings.max_running_per_group != max_running;
    settings.max_running_per_group = max_running;
  }));
  // Accepts mark a group full as they find it; a new limit re-judges them all at once, so a
  // group freed by a raised (or removed) limit is back in turn now, not at its next run's end.
  if (!changed) return Status::OK();
  return refit_groups(txn, impl_->keys, type, max_running);
}

Result<std::vector<GroupInfo>> Jobs::groups(std::string_view type, size_t limit,
                                            std::string_view after) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  if (limit < 1 || limit > kMaxGroupsListed) {
    return InvalidArgument("groups limit must be in 1.." + std::to_string(kMaxGroupsListed));
  }
  if (Status bad = validate_group(after); !bad.ok())
    return InvalidArgument("after: " + bad.message());
  const Keys& keys = impl_->keys;
  return kv::run(
      *store_,
      [&](kv::Transaction& txn) -> Result<std::vector<GroupInfo>> {
        KVQ_RETURN_IF_ERROR(require_type(txn, keys, type));
        auto [begin, end] = keys.groups_of(type);
        if (!after.empty()) begin = keys.group(type, after) + '\0';
        KVQ_ASSIGN_OR_RETURN(auto rows,
                             txn.get_range(begin, end, {.limit = limit, .snapshot = true}));
        std::vector<GroupInfo> out;
        for (const auto& kv : rows) {
          GroupInfo info;
          KVQ_ASSIGN_OR_RETURN(info.group, keys.parse_group_name(kv.key));
          KVQ_ASSIGN_OR_RETURN(GroupRow row, decode_group(kv.value));
          info.running = row.running;
          info.full = row.full;
          if (row.queued) info.in_turn_at_ms = us_to_ms(row.queued->second);
          KVQ_ASSIGN_OR_RETURN(info.pending,
                               count_keys(txn, keys.group_pending_index(type, info.group).all(),
                                          kGroupPendingCountLimit));
          out.push_back(std::move(info));
        }
        return out;
      },
      options_.retry);
}

}  // namespace kvq::jobs
