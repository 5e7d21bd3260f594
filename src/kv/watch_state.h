// kv/watch_state.h — the shared state behind a kv::Watch, for backends to complete.
//
// A backend creates the state, keeps a reference in its own registry, and calls complete() when
// the key changes (or with an error when it can no longer tell). The user's Watch handle holds
// the other reference; cancel() (or destroying the handle) completes it with kCancelled and runs
// `unregister` so the backend can drop its reference. complete() takes effect once; later calls
// are ignored, so a backend may race a fire against a cancel safely.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kvq/kv.h"
#include "util/mutex.h"

namespace kvq::kv::detail {

struct WatchState {
  // Returns true if this call completed the watch (false if it was already complete).
  bool complete(const Status& status) KVQ_EXCLUDES(mu);
  bool is_complete() const KVQ_EXCLUDES(mu);

  mutable util::Mutex mu;
  util::CondVar cv;
  bool done KVQ_GUARDED_BY(mu) = false;
  // done, and the callbacks registered before it have returned
  bool settled KVQ_GUARDED_BY(mu) = false;
  Status status KVQ_GUARDED_BY(mu);
  std::vector<std::function<void(const Status&)>> callbacks KVQ_GUARDED_BY(mu);
  // Set by the backend before the Watch is handed out; called once on cancel.
  std::function<void()> unregister;
};

}  // namespace kvq::kv::detail
