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
// write lock), and wait for its group after handing the leadership on.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "kvq/status.h"

namespace kvq::kv::lmdb {

class DurabilityTracker {
 public:
  // fdatasync of the data file; returns 0 or an errno.
  using SyncFn = std::function<int()>;
  explicit DurabilityTracker(SyncFn sync) : sync_(std::move(sync)) {}

  // An LMDB commit wrote `version`: its data is on disk, its meta page not yet, and its
  // fdatasync covered every meta page written before it began.
  void commit_done(uint64_t version);
  // Blocks until commit `version` is on disk. kUnknownResult if the fdatasync made for it failed
  // (the commit is visible, but whether it survives a power loss is not known); once one has
  // failed, every later call fails too (failed()), as the kernel may have dropped the pages.
  Status wait(uint64_t version);
  // Non-OK after a failed fdatasync: later commits must not be acknowledged.
  Status failed() const;
  // The highest commit known to be on disk (for tests).
  uint64_t durable() const;
  // Replaces the fdatasync, so a test can make it fail on a real environment.
  void set_sync_for_testing(SyncFn sync);

 private:
  SyncFn sync_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t written_ = 0;  // the last commit whose meta page was written
  uint64_t durable_ = 0;  // every commit up to here is on disk
  bool syncing_ = false;
  uint64_t sync_covers_ = 0;
  Status failed_;
};

}  // namespace kvq::kv::lmdb
