// kvq/lmdb_store.h — the embedded backend: a kv::Store in one local data directory, on LMDB.
//
// What it promises:
//   * ACID and crash-safe without recovery: a process killed at any instant leaves the last
//     committed state. With Durability::kSync (the default) a commit returns OK only after its
//     data is on disk; kNoSync survives a crash of the process but not of the machine.
//   * Group commit: concurrent commits from the threads of one process are applied in one LMDB
//     write transaction and share one fsync. Each transaction in the group is validated and
//     applied on its own, so one that conflicts or fails does not fail the others.
//   * Serializable, as kv.h describes: every stored value carries the version of the commit that
//     wrote it, and a commit re-checks what the transaction read against the current data.
//   * Readers never block the writer, and several threads and several processes on one host may
//     use one directory at once. Opening the same directory twice in one process shares one
//     environment (LMDB forbids two).
//   * The memory map grows by itself (doubling) when full, instead of failing.
//   * Watches fire at once for commits made by this process; changes made by other processes
//     are noticed by polling a change counter every `watch_poll_interval` while any watch is
//     armed, so they are seen within about that interval.
//   * LMDB errors (disk full, corrupt file) come back as a Status, never as a crash.
//
// Thread-safety: the returned Store is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kvq/kv.h"

namespace kvq {

enum class Durability { kSync, kNoSync };

struct LmdbOptions {
  std::string path;  // The data directory; created (with parents) if missing.
  Durability durability = Durability::kSync;
  // The initial size of the memory map. It doubles whenever a commit finds it full.
  uint64_t initial_map_size = uint64_t{1} << 30;
  // Concurrent read transactions allowed across all processes sharing the directory.
  unsigned max_readers = 1024;
  // At most this many transactions are applied together in one group commit.
  size_t max_group_size = 256;
  std::chrono::milliseconds watch_poll_interval{10};
};

Result<std::shared_ptr<kv::Store>> open_lmdb_store(const LmdbOptions& options);

}  // namespace kvq
