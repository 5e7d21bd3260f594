// kv/lmdb/durability.h — tells a `sync` commit when it is on disk, so that only one of the two
// fsyncs a commit needs holds up the next one.
//
// LMDB's default commit syncs twice, holding the write lock: the data pages, then the meta page
// that makes them the new state. kvq opens `sync` environments with MDB_NOMETASYNC, so a commit
// syncs its data pages and writes its meta page without waiting for it, and lets go of the
// lock; the meta page is on disk once any later fdatasync of the file completes. The group that
// committed makes that fdatasync here while the next group already commits (two fsyncs per
// commit still, but only one of them holds up the next commit), unless a later fdatasync
// already covered it: the next commit's own, or another group's. Nobody is told a commit
// succeeded before it is on disk. Integrity stays LMDB's: a crash before the meta page reaches
// the disk leaves the previous commit, never a torn one.
//
// The commit queue's leader calls commit_done after each LMDB commit (one at a time: LMDB's
// write lock), and, after handing the leadership on, wait for its group, or on_durable when its
// thread must not block (an asynchronous commit): that group then hears from the tracker's own
// syncer thread, started on first use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "kvq/status.h"
#include "util/mutex.h"

namespace kvq::kv::lmdb {

class DurabilityTracker {
 public:
  // fdatasync of the data file; returns 0 or an errno.
  using SyncFn = std::function<int()>;
  explicit DurabilityTracker(SyncFn sync) : state_(std::make_shared<State>(std::move(sync))) {}
  // Settles every on_durable still pending (syncing for them) before it returns.
  ~DurabilityTracker();

  // An LMDB commit wrote `version`: its data is on disk, its meta page not yet, and its
  // fdatasync covered every meta page written before it began.
  void commit_done(uint64_t version);
  // Blocks until commit `version` is on disk. kUnknownResult if the fdatasync made for it failed
  // (the commit is visible, but whether it survives a power loss is not known); once one has
  // failed, every later call fails too (failed()), as the kernel may have dropped the pages.
  Status wait(uint64_t version);
  // wait's outcome for `version`, given to `done` without blocking: at once when it is known
  // already, else on the syncer thread after the fdatasync that covers it.
  void on_durable(uint64_t version, std::function<void(Status)> done);
  // Non-OK after a failed fdatasync: later commits must not be acknowledged.
  Status failed() const;
  // The highest commit known to be on disk (for tests).
  uint64_t durable() const;
  // Ends the syncer thread, once every on_durable is settled.
  void stop();
  // Whether the calling thread is the syncer thread.
  bool on_own_thread() const;
  // Replaces the fdatasync, so a test can make it fail on a real environment.
  void set_sync_for_testing(SyncFn sync);

 private:
  // Everything the syncer thread uses, shared with it: the last store reference may be dropped
  // by a callback on that very thread, which then outlives the tracker for a moment.
  struct State {
    explicit State(SyncFn sync) : sync(std::move(sync)) {}
    // Makes one fdatasync, covering every commit written before it starts, with mu held
    // (released during the sync). Returns 0 or the errno, having recorded a failure.
    int sync_once() KVQ_REQUIRES(mu);

    util::Mutex mu;
    util::CondVar cv;
    SyncFn sync KVQ_GUARDED_BY(mu);
    uint64_t written KVQ_GUARDED_BY(mu) = 0;  // the last commit whose meta page was written
    uint64_t durable KVQ_GUARDED_BY(mu) = 0;  // every commit up to here is on disk
    bool syncing KVQ_GUARDED_BY(mu) = false;
    uint64_t sync_covers KVQ_GUARDED_BY(mu) = 0;
    Status failed KVQ_GUARDED_BY(mu);
    // on_durable's, unsettled
    std::vector<std::pair<uint64_t, std::function<void(Status)>>> pending KVQ_GUARDED_BY(mu);
    bool stopping KVQ_GUARDED_BY(mu) = false;
  };
  static void run_syncer(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  // Started by the first on_durable that has to wait.
  std::thread syncer_ KVQ_GUARDED_BY(state_->mu);
};

}  // namespace kvq::kv::lmdb
