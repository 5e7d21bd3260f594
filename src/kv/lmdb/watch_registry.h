// kv/lmdb/watch_registry.h — the armed watches of one LMDB environment in this process.
//
// A watch remembers the value its transaction read. It fires when a commit leaves the key with
// a different value. Commits made by this process report their changes directly (on_commit);
// commits made by other processes are found by a watcher thread that, while any watch is armed,
// sleeps on the directory's WakeSignal (which every process's commits notify), then reads the
// commit counter and re-reads the watched keys when the counter moved past what this process
// has already reported. It also looks every watch_poll_interval without a wake-up, so a commit
// whose wake-up never came (a process that does not signal) is seen within that interval. If
// the signal's file cannot be opened, it polls every 10 ms instead (as before the signal).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kv/lmdb/commit_queue.h"
#include "kv/lmdb/wake_signal.h"
#include "kv/watch_state.h"
#include "util/mutex.h"

namespace kvq::kv::lmdb {

class WatchRegistry : public std::enable_shared_from_this<WatchRegistry> {
 public:
  explicit WatchRegistry(Env& env);
  ~WatchRegistry();

  // Arms a watch on `key` expecting `expected` (the value the transaction read).
  Result<Watch> add(std::string key, std::optional<std::string> expected) KVQ_EXCLUDES(mu_);

  bool armed() const { return count_.load(std::memory_order_relaxed) > 0; }

  // Called after this process committed `changes` as `new_version` on top of `base_version`.
  // `complete` is false when the commit did not record its changes (no watch was armed as it
  // began); any watch armed since is then re-checked against the store.
  void on_commit(const std::vector<KeyChange>& changes, bool complete, uint64_t base_version,
                 uint64_t new_version) KVQ_EXCLUDES(mu_);

  // Stops the watcher thread and ends every armed watch with kUnavailable (the store is closing).
  void shutdown() KVQ_EXCLUDES(mu_);

 private:
  struct Entry {
    uint64_t id;
    std::optional<std::string> expected;
    std::shared_ptr<detail::WatchState> state;
  };

  void remove(const std::string& key, uint64_t id) KVQ_EXCLUDES(mu_);
  // Fires (and removes) the watches on `key` whose expectation differs from `value`.
  void fire_if_changed(const std::string& key, const std::optional<std::string>& value)
      KVQ_EXCLUDES(mu_);
  void poll_loop() KVQ_EXCLUDES(mu_);
  // One round of poll_loop with the signal: look, then sleep until another process commits.
  void look_then_sleep() KVQ_EXCLUDES(mu_);
  // False if the store could not be read (nothing was checked).
  bool check_all_keys() KVQ_EXCLUDES(mu_);
  // Re-reads every watched key and fires the watches whose value moved.
  void recheck_watched_keys() KVQ_EXCLUDES(mu_);

  Env& env_;
  mutable util::Mutex mu_;
  std::multimap<std::string, Entry> entries_ KVQ_GUARDED_BY(mu_);
  uint64_t next_id_ KVQ_GUARDED_BY(mu_) = 1;
  std::atomic<size_t> count_{0};
  // Every commit up to here has been checked against watches.
  uint64_t reported_version_ KVQ_GUARDED_BY(mu_) = 0;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  std::atomic<bool> closing_{false};  // stopping_, readable without mu_ (set before interrupt)
  std::unique_ptr<WakeSignal> wake_;  // null if its file could not be opened: poll instead
  util::CondVar poll_cv_;
  // Started under mu_ by the first add() before shutdown; shutdown() joins it without mu_ (which
  // the poller needs to end), once stopping_ keeps add() from starting it. Not GUARDED_BY(mu_):
  // the analysis cannot tell that stopping_ ends its writes.
  std::thread poller_;
};

}  // namespace kvq::kv::lmdb
