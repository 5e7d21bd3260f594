#include "kv/lmdb/durability.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace kvq::kv::lmdb {

void DurabilityTracker::commit_done(uint64_t version) {
  {
    std::lock_guard lock(mu_);
    // The commit synced its data pages after every meta page written before it began, and only
    // a commit moves written_, one at a time: written_ is still what it was then. After a
    // failed sync, a later one that succeeds proves nothing about the pages lost before it.
    if (failed_.ok()) {
      durable_ = std::max(durable_, written_);
      written_ = std::max(written_, version);
    }
  }
  cv_.notify_all();
}

Status DurabilityTracker::wait(uint64_t version) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (!failed_.ok()) return failed_;
    if (durable_ >= version) return Status::OK();
    // One sync at a time: the next one covers everything written before it starts, so every
    // group that waits meanwhile shares it.
    if (syncing_) {
      cv_.wait(lock);
      continue;
    }
    syncing_ = true;
    sync_covers_ = written_;
    const SyncFn sync = sync_;
    lock.unlock();
    const int rc = sync();
    lock.lock();
    syncing_ = false;
    if (rc == 0) {
      durable_ = std::max(durable_, sync_covers_);
    } else {
      failed_ = Internal(std::string("an fdatasync of the LMDB data file failed (") + std::strerror(rc) +
                         "); no commit since is acknowledged: check the disk, then reopen the store (restart kvq)");
      cv_.notify_all();
      return UnknownResult(std::string("the commit was applied but syncing it to disk failed (") +
                           std::strerror(rc) + "): it may not survive a power loss");
    }
    cv_.notify_all();
  }
}

Status DurabilityTracker::failed() const {
  std::lock_guard lock(mu_);
  return failed_;
}

void DurabilityTracker::set_sync_for_testing(SyncFn sync) {
  std::lock_guard lock(mu_);
  sync_ = std::move(sync);
}

uint64_t DurabilityTracker::durable() const {
  std::lock_guard lock(mu_);
  return durable_;
}

}  // namespace kvq::kv::lmdb
