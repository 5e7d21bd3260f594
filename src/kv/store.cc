// What every kv::Store does unless its backend knows better.
#include "kvq/kv.h"

namespace kvq::kv {

void Transaction::commit_async(std::function<void(Status)> done) { done(commit()); }

bool Store::nonblocking() const { return false; }

Status Store::check_health() {
  KVQ_ASSIGN_OR_RETURN(auto txn, begin());
  return txn->read_version().status();
}

}  // namespace kvq::kv
