// kv/lmdb/synced_state.h — what makes a relaxed store survive a power loss whole.
//
// A relaxed store's commits are not synced (MDB_NOSYNC), so their pages sit dirty in the page
// cache, and the kernel may write any of them back whenever it likes: a `sync` by another
// program, a backup, dirty-memory pressure. LMDB's meta page (which names the tree's root) is
// one of them, so after a power loss the disk can hold a meta page whose tree never reached it:
// a corrupt store, not one that lost a second (LMDB's own documentation of MDB_NOSYNC).
//
// So the syncer, once its sync has made a state durable, records that state's meta page here,
// durably, in kvq.lock, and keeps the state pinned (a read snapshot) until it has recorded a
// newer one: LMDB reuses no page a reader may need, so the recorded state's pages stay intact
// on disk whatever the kernel writes meanwhile. After a power loss, the first process to open
// the directory writes the recorded meta page back over both of LMDB's, and the store opens at
// that state: whole, less what was acknowledged after it (about a second).
//
// A crash of the process alone (kill -9) loses no page: the page cache holds everything LMDB
// wrote, and the latest state is whole. The record therefore names the page cache it was made
// under (the boot, and the mount of the data file's filesystem), and a restore happens only
// when that page cache is gone: after a reboot, or on another mount of the filesystem.
//
// This file knows LMDB's on-disk meta page (format version 1, unchanged through LMDB 0.9): the
// two pages at the start of data.mdb, each a 16-byte page header then MDB_meta, whose txnid says
// which is newer (LMDB opens the newer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kvq/status.h"

namespace kvq::kv::lmdb {

// Bytes of MDB_meta (from the page's offset 16): magic, version, address, map size, the free
// and main databases, last page, txnid.
inline constexpr size_t kMetaBytes = 136;

// Which page cache a record was made under, and which data file it describes.
struct CacheIdentity {
  std::string boot_id;  // /proc/sys/kernel/random/boot_id
  uint64_t mount_id =
      0;  // the mount of the data file's filesystem (unique per boot if the kernel says so)
  uint64_t inode = 0;  // the data file's, with its birth time: a replaced file is not this one
  int64_t birth_ns = 0;
};

struct SyncedState {
  uint64_t txnid = 0;  // LMDB's transaction id of the state
  uint32_t page_size = 0;
  std::string meta;  // kMetaBytes: the state's MDB_meta as LMDB wrote it
  CacheIdentity cache;
};

// The identity of `data_file` (data.mdb) under the current boot and mount.
Result<CacheIdentity> cache_identity(const std::string& data_file);

// Reads the meta of the newest committed state from `data_fd` (through the page cache): the
// caller holds LMDB's write lock, so that `txnid` is the last committed transaction.
Result<std::string> read_meta(int data_fd, uint32_t page_size, uint64_t txnid);

// kvq.lock's two record slots (offsets 512 and 1024, one disk sector each, written in turn so a
// torn write leaves the other whole). record() writes the next one and fdatasyncs it.
Status record(int lock_fd, const SyncedState& state);
// The newest whole record, if any.
Result<std::optional<SyncedState>> read_record(int lock_fd);
// Erases both slots durably (a durable store keeps no record).
Status clear_records(int lock_fd);

// What restore_if_needed found. `from_txnid` is the newest state the disk's meta pages named.
struct Restore {
  bool restored = false;
  uint64_t from_txnid = 0;
  uint64_t to_txnid = 0;
};
// Run by the only process opening the directory, before LMDB opens it: when the newest record
// was made under a page cache that is gone and the disk's meta pages do not name exactly the
// recorded state, writes the recorded meta over both meta pages and fdatasyncs. A record of
// another data file (replaced since) is ignored. FailedPrecondition when the data file is too
// short to hold the recorded state (nothing is written then).
Result<Restore> restore_if_needed(int lock_fd, const std::string& data_file);

}  // namespace kvq::kv::lmdb
