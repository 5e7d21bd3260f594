// kv/lmdb/lmdb_env.h — one open LMDB environment, shared by every Store on its directory in
// this process (LMDB forbids opening one environment twice in a process).
//
// Layout inside the environment (two named databases):
//   "data": user key -> [8-byte big-endian version of the commit that wrote it][user value]
//   "meta": "version" -> 8-byte big-endian number of the last commit (absent = 0)
// Every commit increments "version" by one, inside the same LMDB write transaction, so the
// counter a read transaction sees is its read version, and comparing a key's stored version
// with it tells whether the key changed since.
//
// Resizing the memory map requires that no transaction of this process is open, so every
// transaction holds a slot of the MapGate and a resize waits for all slots to be released.
//
// Durability (docs/design/storage.md): `durable` opens LMDB with MDB_NOMETASYNC and lets the
// DurabilityTracker sync each commit's meta page; `relaxed` opens it with MDB_NOSYNC (never
// MDB_WRITEMAP, so a full disk is an error from pwrite, not a SIGBUS) and a syncer thread makes
// the store durable about once a second: holding LMDB's write lock, it syncs the data file, then
// records that state's meta page durably in kvq.lock, and pins the state (a read transaction)
// until it has recorded a newer one, so later commits never overwrite the pages it is made of.
// After a power loss the first opener restores the recorded state (synced_state.h), since the
// kernel may have written a later meta page back ahead of its tree.
//
// A lock file, `kvq.lock`, records the durability of the processes that have the directory
// open (fcntl read locks, held while open): a process asking for the other one is refused.
#pragma once

#include <lmdb.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kv/lmdb/synced_state.h"
#include "kvq/kv.h"
#include "kvq/lmdb_store.h"
#include "util/mutex.h"

namespace kvq::kv::lmdb {

class CommitQueue;
class DurabilityTracker;
class WatchRegistry;

Status status_from_lmdb(int rc, std::string_view what);

inline MDB_val as_val(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }
inline std::string_view as_view(const MDB_val& v) {
  return {static_cast<const char*>(v.mv_data), v.mv_size};
}

// Stored values are prefixed with the version of the commit that wrote them.
inline constexpr size_t kVersionPrefix = 8;
std::string encode_stored(uint64_t version, std::string_view value);
// InvalidArgument-free by construction: a value shorter than the prefix is corruption.
Result<std::pair<uint64_t, std::string_view>> decode_stored(const MDB_val& stored);
std::string encode_version(uint64_t version);
uint64_t decode_version(std::string_view bytes);

// Counts open transactions so that the map is resized only when there are none.
class MapGate {
 public:
  void enter() KVQ_EXCLUDES(mu_);
  void leave() KVQ_EXCLUDES(mu_);
  // Waits until no slot is held (new enter() calls wait meanwhile), then runs `fn`.
  // Unavailable if open transactions did not finish within `patience`.
  Status exclusive(const std::function<Status()>& fn, std::chrono::milliseconds patience)
      KVQ_EXCLUDES(mu_);

 private:
  util::Mutex mu_;
  util::CondVar cv_;
  int active_ KVQ_GUARDED_BY(mu_) = 0;
  bool resizing_ KVQ_GUARDED_BY(mu_) = false;
};

class Env : public std::enable_shared_from_this<Env> {
 public:
  static Result<std::shared_ptr<Env>> open(const LmdbOptions& options);
  // Writes a consistent copy of the environment in directory `dir` to `fd` (mdb_env_copyfd2):
  // through the Env this process has open on it, if any, else through a read-only environment
  // of its own, opened and closed while no Env can open that directory.
  static Status copy_directory(const std::string& dir, int fd, bool compact);
  ~Env();
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  // A read snapshot. Returns its LMDB transaction to a pool when destroyed.
  class ReadTxn {
   public:
    ReadTxn(Env* env, MDB_txn* txn) : env_(env), txn_(txn) {}
    ReadTxn(ReadTxn&& o) noexcept : env_(o.env_), txn_(o.txn_) { o.txn_ = nullptr; }
    ReadTxn& operator=(ReadTxn&&) = delete;
    ~ReadTxn();
    MDB_txn* get() const { return txn_; }

   private:
    Env* env_;
    MDB_txn* txn_;
  };

  Result<ReadTxn> begin_read();
  // REQUIRES: called only by the commit queue's leader. Holds a gate slot until end_write.
  Result<MDB_txn*> begin_write();
  // Commits (returning mdb_txn_commit's code) or aborts (returning MDB_SUCCESS) the write.
  int end_write(MDB_txn* txn, bool commit_it);
  // Doubles the map size. REQUIRES: the caller holds no gate slot.
  Status grow_map();

  // The commit counter as seen by `txn`.
  Result<uint64_t> version_in(MDB_txn* txn) const;

  MDB_dbi data() const { return data_dbi_; }
  MDB_dbi meta() const { return meta_dbi_; }
  const LmdbOptions& options() const { return options_; }
  const std::string& path() const { return path_; }
  CommitQueue& commit_queue() { return *commit_queue_; }
  // When `durable` commits are on disk; null with relaxed (synced in the background instead).
  DurabilityTracker* durability() { return durability_.get(); }
  // Why commits must not be acknowledged any more (a failed fsync, in either mode), else OK.
  Status write_failure() const KVQ_EXCLUDES(relaxed_mu_);
  // The status of a write that LMDB failed with `rc`: kResourceExhausted saying the disk is
  // full when it is (LMDB reports a short write as EIO), recorded for write_health.
  Status write_error(int rc, std::string_view what);
  // Called after a commit reached LMDB: the disk had room.
  void write_succeeded() {
    if (disk_full_.load(std::memory_order_relaxed))
      disk_full_.store(false, std::memory_order_relaxed);
  }
  // Whether this store can take writes now: write_failure(), or kResourceExhausted while the
  // disk is full (after a write failed for lack of space, probed at most once a second by
  // reserving kSpaceProbeBytes in a scratch file, so it recovers by itself once space is freed).
  Status write_health() KVQ_EXCLUDES(health_mu_);
  static constexpr uint64_t kSpaceProbeBytes = uint64_t{4} << 20;
  // relaxed: returns at once while the last completed background sync made durable every commit
  // older than two sync intervals; otherwise holds the caller (a commit about to be applied)
  // until a sync catches up, as Redis's appendfsync everysec delays writes when its fsync falls
  // behind. So a slow or stalled disk slows writes instead of widening what a power loss can
  // take. Unavailable (retryable) after kMaxSyncLagWait without a sync; OK at once with durable.
  Status wait_while_sync_lags() KVQ_EXCLUDES(syncer_mu_);
  static constexpr std::chrono::seconds kMaxSyncLagWait{10};
  WatchRegistry& watches() { return *watches_; }

 private:
  Env(LmdbOptions options, std::string path);
  Status init();
  Result<MDB_txn*> begin_txn(unsigned flags);
  Status adopt_map_size_from_other_process();
  // Holds a gate slot, so that the map is not resized under the copy's read snapshot.
  Status copy_to(int fd, bool compact);
  void release_read(MDB_txn* txn);
  // fdatasync of the data file, holding a gate slot (LMDB reads the meta page from the map).
  int sync_to_disk();
  // Takes kvq.lock's read lock, refusing a directory open elsewhere with another durability.
  Status lock_mode();
  // relaxed: the syncer thread, and one ordered sync (see the top of this file).
  void run_relaxed_syncer() KVQ_EXCLUDES(syncer_mu_);
  // Skips a sync when nothing was committed since the last one, unless `force`.
  Status sync_relaxed(bool force);
  // Free bytes on the data directory's filesystem for this process, or -1.
  int64_t free_bytes() const;

  LmdbOptions options_;
  std::string path_;
  MDB_env* env_ = nullptr;
  MDB_dbi data_dbi_ = 0;
  MDB_dbi meta_dbi_ = 0;
  MapGate gate_;
  util::Mutex pool_mu_;
  std::vector<MDB_txn*> read_pool_ KVQ_GUARDED_BY(pool_mu_);
  std::unique_ptr<DurabilityTracker> durability_;
  std::unique_ptr<CommitQueue> commit_queue_;
  std::shared_ptr<WatchRegistry> watches_;
  bool registered_ = false;
  int mode_fd_ = -1;  // kvq.lock, holding its read lock

  std::atomic<bool> disk_full_{false};
  util::Mutex health_mu_;
  std::chrono::steady_clock::time_point last_probe_ KVQ_GUARDED_BY(health_mu_){};
  Status last_probe_status_ KVQ_GUARDED_BY(health_mu_);

  // relaxed only
  std::thread syncer_;
  util::Mutex syncer_mu_;
  util::CondVar syncer_cv_;
  bool syncer_stopping_ KVQ_GUARDED_BY(syncer_mu_) = false;
  mutable util::Mutex relaxed_mu_;
  Status relaxed_failed_ KVQ_GUARDED_BY(relaxed_mu_);
  std::atomic<bool> relaxed_has_failed_{false};
  MDB_txn* pin_ = nullptr;       // the last synced state (syncer thread only)
  uint64_t synced_version_ = 0;  // syncer thread only
  // Steady-clock time (ns) at which the last completed sync took LMDB's write lock: every
  // commit before it is durable. Waited on under syncer_mu_ / synced_cv_.
  std::atomic<int64_t> synced_through_ns_{0};
  util::CondVar synced_cv_;
  // A commit waits for a sync, so do not sleep.
  bool sync_wanted_ KVQ_GUARDED_BY(syncer_mu_) = false;
  uint32_t page_size_ = 4096;
  CacheIdentity cache_identity_;  // the page cache this process's records are made under
};

}  // namespace kvq::kv::lmdb
