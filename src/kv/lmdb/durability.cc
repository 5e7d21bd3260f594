#include "kv/lmdb/durability.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace kvq::kv::lmdb {
namespace {

Status unknown_after_failed_sync(int rc) {
  return UnknownResult(std::string("the commit was applied but syncing it to disk failed (") +
                       std::strerror(rc) + "): it may not survive a power loss");
}

}  // namespace

void DurabilityTracker::commit_done(uint64_t version) {
  State& s = *state_;
  {
    util::MutexLock lock(s.mu);
    // The commit synced its data pages after every meta page written before it began, and only
    // a commit moves `written`, one at a time: it is still what it was then. After a failed
    // sync, a later one that succeeds proves nothing about the pages lost before it.
    if (s.failed.ok()) {
      s.durable = std::max(s.durable, s.written);
      s.written = std::max(s.written, version);
    }
  }
  s.cv.notify_all();
}

int DurabilityTracker::State::sync_once() {
  syncing = true;
  sync_covers = written;
  const SyncFn fn = sync;
  mu.unlock();
  const int rc = fn();
  mu.lock();
  syncing = false;
  if (rc == 0) {
    durable = std::max(durable, sync_covers);
  } else if (failed.ok()) {
    failed = Internal(
        std::string("an fdatasync of the LMDB data file failed (") + std::strerror(rc) +
        "); no commit since is acknowledged: check the disk, then reopen the store (restart kvq)");
  }
  cv.notify_all();
  return rc;
}

Status DurabilityTracker::wait(uint64_t version) {
  State& s = *state_;
  util::MutexLock lock(s.mu);
  for (;;) {
    if (!s.failed.ok()) return s.failed;
    if (s.durable >= version) return Status::OK();
    // One sync at a time: the next one covers everything written before it starts, so every
    // group that waits meanwhile shares it.
    if (s.syncing) {
      s.cv.wait(s.mu);
      continue;
    }
    if (int rc = s.sync_once(); rc != 0) return unknown_after_failed_sync(rc);
  }
}

void DurabilityTracker::on_durable(uint64_t version, std::function<void(Status)> done) {
  Status known;
  {
    util::MutexLock lock(state_->mu);
    if (state_->failed.ok() && state_->durable < version) {
      state_->pending.emplace_back(version, std::move(done));
      if (!syncer_.joinable()) syncer_ = std::thread([state = state_] { run_syncer(state); });
      state_->cv.notify_all();
      return;
    }
    known = state_->failed;
  }
  done(known);
}

void DurabilityTracker::run_syncer(const std::shared_ptr<State>& state) {
  State& s = *state;
  util::MutexLock lock(s.mu);
  for (;;) {
    // Settle what is known: on disk, or lost to a failed sync.
    std::vector<std::function<void(Status)>> settled;
    const Status outcome = s.failed;
    const uint64_t durable = s.durable;
    std::erase_if(s.pending, [&](auto& p) {
      if (outcome.ok() && p.first > durable) return false;
      settled.push_back(std::move(p.second));
      return true;
    });
    if (!settled.empty()) {
      lock.unlock();
      for (auto& done : settled) done(outcome);
      settled.clear();  // may drop the store's last reference, and so end the tracker
      lock.lock();
      continue;
    }
    if (s.pending.empty()) {
      if (s.stopping) return;
      s.cv.wait(s.mu);
      continue;
    }
    if (s.syncing) {  // a blocked committer's sync may cover them
      s.cv.wait(s.mu);
      continue;
    }
    if (int rc = s.sync_once(); rc != 0) {
      // Those this sync was for were applied and may or may not survive; later ones are
      // settled with the failure on the next turn.
      std::vector<std::function<void(Status)>> lost;
      const uint64_t covered = s.sync_covers;
      std::erase_if(s.pending, [&](auto& p) {
        if (p.first > covered) return false;
        lost.push_back(std::move(p.second));
        return true;
      });
      lock.unlock();
      for (auto& done : lost) done(unknown_after_failed_sync(rc));
      lost.clear();
      lock.lock();
    }
  }
}

DurabilityTracker::~DurabilityTracker() { stop(); }

void DurabilityTracker::stop() {
  std::thread syncer;
  {
    util::MutexLock lock(state_->mu);
    state_->stopping = true;
    syncer = std::move(syncer_);
  }
  state_->cv.notify_all();
  if (!syncer.joinable()) return;
  // Ended from a callback on the syncer thread itself: nothing is pending (each pending commit
  // holds the store), and the thread ends on its own, holding the state it still reads.
  if (syncer.get_id() == std::this_thread::get_id()) {
    syncer.detach();
  } else {
    syncer.join();
  }
}

bool DurabilityTracker::on_own_thread() const {
  util::MutexLock lock(state_->mu);
  return syncer_.get_id() == std::this_thread::get_id();
}

Status DurabilityTracker::failed() const {
  util::MutexLock lock(state_->mu);
  return state_->failed;
}

void DurabilityTracker::set_sync_for_testing(SyncFn sync) {
  util::MutexLock lock(state_->mu);
  state_->sync = std::move(sync);
}

uint64_t DurabilityTracker::durable() const {
  util::MutexLock lock(state_->mu);
  return state_->durable;
}

}  // namespace kvq::kv::lmdb
