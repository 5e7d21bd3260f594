// kv/lmdb/wake_signal.h — a wake-up shared by every process that has one data directory open,
// so that a commit in one process reaches the watches of another without a poll.
//
// The signal is a page of shared memory, the file `kvq-wake` in the data directory mapped
// MAP_SHARED by each process, holding two 32-bit words:
//   sequence  bumped by notify() after every commit that changed data; the futex word.
//   waiters   how many threads (of all processes) are in wait() now.
// A watcher reads sequence(), checks the store, then calls wait() with what it read: the futex
// sleeps only if the sequence still equals it, so a commit that lands after the check either
// changes the word before the sleep (wait returns at once) or finds the waiter counted and wakes
// it (notify bumps before it reads `waiters`; wait counts itself before it sleeps). No wake-up
// is lost between the check and the sleep.
//
// notify() makes a system call only when a thread of another process waits: this process's own
// commits reach its watches directly (WatchRegistry::on_commit). A process killed inside wait()
// leaves `waiters` one too high, which costs committers a needless FUTEX_WAKE and nothing else;
// the first process to open the file while no other has it open (an exclusive flock) resets it.
// The file holds no data: deleting it while no process has the directory open is harmless; a
// process that opened a newer file than another is no longer woken by it, and sees its commits
// only at its safety-net interval.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kvq/status.h"
#include "util/mutex.h"

namespace kvq::kv::lmdb {

class WakeSignal {
 public:
  // Maps `dir`/kvq-wake, creating it if missing.
  static Result<std::unique_ptr<WakeSignal>> open(const std::string& dir);
  ~WakeSignal();
  WakeSignal(const WakeSignal&) = delete;
  WakeSignal& operator=(const WakeSignal&) = delete;

  // REQUIRES: the commit is visible to new read transactions. Bumps the sequence; wakes every
  // thread of another process waiting on it.
  void notify() KVQ_EXCLUDES(mu_);
  // The sequence now; hand it to wait() after checking the store.
  uint32_t sequence() const;
  // Sleeps until the sequence differs from `seen` (at once if it does already), a wake-up, or
  // `timeout`. It may also return early (a signal); callers re-check.
  void wait(uint32_t seen, std::chrono::milliseconds timeout) KVQ_EXCLUDES(mu_);
  // Bumps the sequence and wakes every waiter, this process's too (closing the store).
  void interrupt();
  // Threads (of all processes) in wait() now, as the shared page counts them; for tests.
  uint32_t waiters() const;

 private:
  struct Shared;
  WakeSignal(int fd, Shared* shared) : fd_(fd), shared_(shared) {}
  void wake_all();

  int fd_;
  Shared* shared_;
  // Whether this process's own thread is counted in `waiters`, read and written together with
  // that count, so notify() can leave itself out of it without racing the waiter.
  util::Mutex mu_;
  int own_waiters_ KVQ_GUARDED_BY(mu_) = 0;
};

}  // namespace kvq::kv::lmdb
