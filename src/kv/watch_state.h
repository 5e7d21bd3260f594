// kv/watch_state.h — the shared state behind a kv::Watch, for backends to complete.
//
// A backend creates the state, keeps a reference in its own registry, and calls complete() when
// the key changes (or with an error when it can no longer tell). The user's Watch handle holds
// the other reference; cancel() (or destroying the handle) completes it with kCancelled and runs
// `unregister` so the backend can drop its reference. complete() takes effect once; later calls
// are ignored, so a backend may race a fire against a cancel safely.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kvq/kv.h"

namespace kvq::kv::detail {

struct WatchState {
  // Returns true if this call completed the watch (false if it was already complete).
  bool complete(const Status& status);
  bool is_complete() const;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool settled = false;  // done, and the callbacks registered before it have returned
  Status status;
  std::vector<std::function<void(const Status&)>> callbacks;
  // Set by the backend before the Watch is handed out; called once on cancel.
  std::function<void()> unregister;
};

}  // namespace kvq::kv::detail
