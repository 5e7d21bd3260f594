// kvq/lmdb_store.h — the embedded backend: a kv::Store in one local data directory, on LMDB.
//
// What it promises:
//   * ACID and crash-safe without recovery: a process killed at any instant leaves the last
//     committed state. With Durability::kDurable (the default) a commit returns OK only after
//     its data is on disk. With kRelaxed a commit is on disk within about a second (a
//     background sync every second, Redis's `appendfsync everysec`): after a power loss the store
//     opens at a consistent earlier state and has lost at most the commits acknowledged since
//     the last completed sync (docs/design/storage.md says how, and what it relies on). When
//     that sync is more than two intervals old (a slow disk), commits wait for the next one,
//     up to 10 s, then fail with kUnavailable: the loss stays bounded at about two seconds.
//   * A full disk fails the commit with kResourceExhausted saying so; reads go on, and
//     check_health reports the store unable to write until space is free again.
//   * Every process sharing a directory must use one durability: opening it with the other
//     while another process has it open fails with kFailedPrecondition naming both (a lock
//     file, `kvq.lock`, records it); while this process has it open, with kInvalidArgument.
//   * Group commit: concurrent commits from the threads of one process are applied in one LMDB
//     write transaction and share one fsync. Each transaction in the group is validated and
//     applied on its own, so one that conflicts or fails does not fail the others.
//   * Serializable, as kv.h describes: every stored value carries the version of the commit that
//     wrote it, and a commit re-checks what the transaction read against the current data.
//   * Readers never block the writer, and several threads and several processes on one host may
//     use one directory at once. Opening the same directory twice in one process shares one
//     environment (LMDB forbids two).
//   * The memory map grows by itself (doubling) when full, instead of failing.
//   * Watches fire at once for commits made by this process. Other processes' commits wake this
//     one through a futex in shared memory (the file `kvq-wake` in the directory), so their
//     watches fire within about a millisecond too; `watch_poll_interval` is only a safety net,
//     the longest a change can go unseen if its wake-up never comes.
//   * LMDB errors (disk full, corrupt file) come back as a Status, never as a crash.
//
// Thread-safety: the returned Store is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvq/kv.h"

namespace kvq {

// kSync and kNoSync are the modes' former names, kept so that old code still compiles.
enum class Durability { kDurable, kRelaxed, kSync = kDurable, kNoSync = kRelaxed };

// "durable" or "relaxed".
const char* durability_name(Durability durability);
// Parses a mode's name: "durable", "relaxed", or their former names "sync" and "nosync".
std::optional<Durability> parse_durability(std::string_view name);

struct LmdbOptions {
  std::string path;  // The data directory; created (with parents) if missing.
  Durability durability = Durability::kDurable;
  // The initial size of the memory map. It doubles whenever a commit finds it full.
  uint64_t initial_map_size = uint64_t{1} << 30;
  // Concurrent read transactions allowed across all processes sharing the directory.
  unsigned max_readers = 1024;
  // At most this many transactions are applied together in one group commit.
  size_t max_group_size = 256;
  std::chrono::milliseconds watch_poll_interval{1000};
  // kRelaxed: how often the background sync runs (at most this much is lost by a power loss,
  // plus the sync's own duration).
  std::chrono::milliseconds relaxed_sync_interval{1000};
};

Result<std::shared_ptr<kv::Store>> open_lmdb_store(const LmdbOptions& options);

struct LmdbBackupOptions {
  // Leave out free pages: the copy holds only live data, so it can be much smaller than the
  // data file, which never shrinks. Slower than a page-for-page copy.
  bool compact = true;
};

// Writes a consistent copy of the data directory `data_dir` into the directory `destination`,
// while other threads and processes keep reading and writing it. Returns the copy's size in
// bytes.
//
// What it promises:
//   * The copy is one committed state of the store (a read snapshot): every commit that
//     returned before the call is in it, and no commit is in it in part.
//   * The copy is a data directory of its own: open_lmdb_store (or `kvq serve --data`) opens it.
//   * It is on disk (fsynced, with its directory entry) when this returns OK. Until then it is
//     written as `data.mdb.partial`, which a failure removes: a `data.mdb` in `destination` is
//     always a whole copy.
//   * It never creates or changes `data_dir`: NotFound if it holds no store. `destination` is
//     created if missing; InvalidArgument if it holds anything already.
//   * If this process has `data_dir` open, the copy reads through that environment (LMDB allows
//     one per process); otherwise it opens the directory read-only, so it may run next to
//     processes of either durability.
// While it runs, its snapshot keeps the pages it reads from being reused, so a store under heavy
// writes grows by about what is written meanwhile.
Result<uint64_t> backup_lmdb_store(const std::string& data_dir, const std::string& destination,
                                   const LmdbBackupOptions& options = {});

}  // namespace kvq
