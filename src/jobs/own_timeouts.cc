#include "jobs/own_timeouts.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "util/random.h"

namespace kvq::jobs {

std::string encode_own_timeout_span(const OwnTimeoutSpan& span) {
  return Tuple{static_cast<int64_t>(span.shortest.count()),
               static_cast<int64_t>(span.longest.count())}
      .pack();
}

Result<OwnTimeoutSpan> decode_own_timeout_span(std::string_view bytes) {
  auto t = Tuple::unpack(bytes);
  if (!t.ok() || t->size() != 2 || !(*t)[0].is_int() || !(*t)[1].is_int() ||
      (*t)[0].as_int() <= 0 || (*t)[1].as_int() < (*t)[0].as_int()) {
    return Internal("corrupt own-timeout span");
  }
  return OwnTimeoutSpan{Millis((*t)[0].as_int()), Millis((*t)[1].as_int())};
}

Status note_own_timeout(kv::Transaction& txn, const Keys& keys, std::string_view type,
                        Millis timeout) {
  const std::string key = keys.own_timeouts(type);
  KVQ_ASSIGN_OR_RETURN(auto bytes, txn.get(key));
  OwnTimeoutSpan span{timeout, timeout};
  if (bytes) {
    KVQ_ASSIGN_OR_RETURN(OwnTimeoutSpan current, decode_own_timeout_span(*bytes));
    if (current.shortest <= timeout && timeout <= current.longest) return Status::OK();
    span = {std::min(current.shortest, timeout), std::max(current.longest, timeout)};
  }
  txn.set(key, encode_own_timeout_span(span));
  txn.set(keys.types_token(), util::random_hex(8));
  return Status::OK();
}

Result<std::vector<int64_t>> running_own_timeouts(kv::Transaction& txn, const Keys& keys,
                                                  std::string_view type, size_t max) {
  std::vector<int64_t> found;
  auto [from, end] = keys.own_activity_of(type);
  while (found.size() < max) {
    KVQ_ASSIGN_OR_RETURN(auto first, txn.get_range(from, end, {.limit = 1, .snapshot = true}));
    if (first.empty()) break;
    KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_own_activity(first.front().key));
    found.push_back(entry.timeout_ms);
    if (entry.timeout_ms == std::numeric_limits<int64_t>::max()) break;
    from = keys.own_activity_from(type, entry.timeout_ms + 1);
  }
  return found;
}

Result<uint64_t> count_running(kv::Transaction& txn, const Keys& keys, std::string_view type,
                               uint64_t limit, bool snapshot) {
  uint64_t count = 0;
  for (auto [begin, end] : {keys.activity_before(type, std::numeric_limits<int64_t>::max()),
                            keys.own_activity_of(type)}) {
    while (count < limit) {
      KVQ_ASSIGN_OR_RETURN(auto page, txn.get_range(begin, end,
                                                    {.limit = static_cast<size_t>(limit - count),
                                                     .snapshot = snapshot}));
      count += page.size();
      if (page.size() < limit - (count - page.size()) || count >= limit) break;
      begin = page.back().key + '\0';
    }
  }
  return count;
}

Result<std::vector<std::string>> runs_started_at(kv::Transaction& txn, const Keys& keys,
                                                 std::string_view type, uint64_t seq) {
  std::vector<std::string> ids;
  auto [begin, end] = keys.activity_at(type, seq);
  KVQ_ASSIGN_OR_RETURN(auto entries, txn.get_range(begin, end));
  for (const auto& kv : entries) {
    KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_activity(kv.key));
    ids.push_back(std::move(entry.id));
  }
  // Every distinct own timeout costs a read or two; this runs only after an unknown result.
  KVQ_ASSIGN_OR_RETURN(auto timeouts, running_own_timeouts(txn, keys, type, SIZE_MAX));
  for (int64_t timeout : timeouts) {
    auto [from, to] = keys.own_activity_at(type, timeout, seq);
    KVQ_ASSIGN_OR_RETURN(auto own, txn.get_range(from, to));
    for (const auto& kv : own) {
      KVQ_ASSIGN_OR_RETURN(auto entry, keys.parse_own_activity(kv.key));
      ids.push_back(std::move(entry.id));
    }
  }
  return ids;
}

std::string activity_key(const Keys& keys, std::string_view type, std::string_view id,
                         const JobRow& row) {
  if (!row.timeout) return keys.activity(type, row.seq, id);
  return keys.own_activity(type, row.timeout->count(), row.seq, id);
}

}  // namespace kvq::jobs
