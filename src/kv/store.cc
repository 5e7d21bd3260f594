// What every kv::Store does unless its backend knows better.
#include "kvq/kv.h"

#include "util/random.h"

namespace kvq::kv {

Result<std::vector<std::optional<std::string>>> Transaction::get_many(
    const std::vector<std::string>& keys, ReadOptions options) {
  std::vector<std::optional<std::string>> values;
  values.reserve(keys.size());
  for (const auto& key : keys) {
    KVQ_ASSIGN_OR_RETURN(auto value, get(key, options));
    values.push_back(std::move(value));
  }
  return values;
}

void Transaction::prefetch(const std::vector<std::string>&, const std::vector<RangeRead>&,
                           ReadOptions) {}

void Transaction::commit_async(std::function<void(Status)> done) { done(commit()); }

void Transaction::touch(std::string_view key) { set(key, util::random_hex(8)); }

bool Store::nonblocking() const { return false; }

Status Store::check_health() {
  KVQ_ASSIGN_OR_RETURN(auto txn, begin());
  return txn->read_version().status();
}

}  // namespace kvq::kv
