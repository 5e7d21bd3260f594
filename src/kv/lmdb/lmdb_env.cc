#include "kv/lmdb/lmdb_env.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "kv/lmdb/commit_queue.h"
#include "kv/lmdb/durability.h"
#include "kv/lmdb/synced_state.h"
#include "kv/lmdb/watch_registry.h"

namespace kvq {

const char* durability_name(Durability durability) {
  return durability == Durability::kRelaxed ? "relaxed" : "durable";
}

std::optional<Durability> parse_durability(std::string_view name) {
  if (name == "durable" || name == "sync") return Durability::kDurable;
  if (name == "relaxed" || name == "nosync") return Durability::kRelaxed;
  return std::nullopt;
}

}  // namespace kvq

namespace kvq::kv::lmdb {
namespace {

constexpr char kVersionKey[] = "version";
constexpr size_t kReadPoolMax = 64;
constexpr auto kResizePatience = std::chrono::seconds(5);
constexpr auto kProbeInterval = std::chrono::seconds(1);
// A write that fails with EIO while less than this is free is taken for a full disk: LMDB
// reports a short pwrite, which is what a filling disk gives, as EIO.
constexpr int64_t kNearlyFullBytes = int64_t{4} << 20;
constexpr char kModeFile[] = "kvq.lock";
constexpr char kDataFile[] = "data.mdb";
// kvq.lock: the mode's name in its first kModeHeader bytes; a relaxed store's record of its last
// synced state further on (synced_state.h).
constexpr size_t kModeHeader = 64;

std::string errno_text(int e) { return std::strerror(e); }

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// LMDB's rule is one environment per directory per process, so opens are shared by path.
// Never destroyed: an environment whose last reference went on one of its own threads closes on
// a detached thread (Env::open), which may still be closing while the process exits.
struct Registry {
  util::Mutex mu;
  std::map<std::string, std::weak_ptr<Env>> envs KVQ_GUARDED_BY(mu);
  // Signalled when a closing environment has left the registry, so a reopen never overlaps it.
  util::CondVar changed;
};
Registry& registry() {
  static auto* registry = new Registry;
  return *registry;
}

// Different spellings of one directory ("data", "./data/") must find one environment.
std::string registry_key(const std::string& path) {
  std::error_code ec;
  std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
  return ec ? path : canonical;
}

}  // namespace

Status status_from_lmdb(int rc, std::string_view what) {
  if (rc == MDB_SUCCESS) return Status::OK();  // the hot path: no message to build
  std::string message = std::string(what) + ": " + mdb_strerror(rc);
  switch (rc) {
    case MDB_NOTFOUND: return NotFound(message);
    case MDB_MAP_FULL:
    case MDB_TXN_FULL:
    case MDB_DBS_FULL:
    case ENOSPC:
    case ENOMEM: return ResourceExhausted(message);
    case MDB_READERS_FULL: return Unavailable(message);
    case MDB_BAD_VALSIZE: return InvalidArgument(message);
    default: return Internal(message);
  }
}

std::string encode_version(uint64_t version) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, version >>= 8) out[i] = static_cast<char>(version & 0xFF);
  return out;
}

uint64_t decode_version(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < bytes.size(); ++i) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

std::string encode_stored(uint64_t version, std::string_view value) {
  std::string out = encode_version(version);
  out.append(value);
  return out;
}

Result<std::pair<uint64_t, std::string_view>> decode_stored(const MDB_val& stored) {
  auto bytes = as_view(stored);
  if (bytes.size() < kVersionPrefix) return Internal("corrupt value: shorter than its version");
  return std::pair{decode_version(bytes), bytes.substr(kVersionPrefix)};
}

// ---- MapGate ----

void MapGate::enter() {
  util::MutexLock lock(mu_);
  while (resizing_) cv_.wait(mu_);
  ++active_;
}

void MapGate::leave() {
  util::MutexLock lock(mu_);
  if (--active_ == 0) cv_.notify_all();
}

Status MapGate::exclusive(const std::function<Status()>& fn, std::chrono::milliseconds patience) {
  util::MutexLock lock(mu_);
  while (resizing_) cv_.wait(mu_);
  resizing_ = true;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (active_ != 0) {
    if (!cv_.wait_until(mu_, deadline)) break;
  }
  const bool idle = active_ == 0;
  Status status = idle ? fn()
                       : Unavailable("the LMDB map must grow but transactions stayed open for " +
                                     std::to_string(patience.count()) + " ms");
  resizing_ = false;
  cv_.notify_all();
  return status;
}

// ---- Env ----

Env::Env(LmdbOptions options, std::string path)
    : options_(std::move(options)), path_(std::move(path)) {}

Result<std::shared_ptr<Env>> Env::open(const LmdbOptions& options) {
  if (options.path.empty()) return InvalidArgument("LMDB data directory path is empty");
  std::error_code ec;
  std::filesystem::create_directories(options.path, ec);
  if (ec)
    return Unavailable("cannot create data directory '" + options.path + "': " + ec.message());
  const std::string path = registry_key(options.path);

  // Declared before the lock, so released after it: if every other reference went meanwhile
  // (another thread, or a commit settled on the environment's own threads), this is the last
  // one, and ~Env takes the registry's lock itself.
  std::shared_ptr<Env> existing;
  Registry& envs = registry();
  util::MutexLock lock(envs.mu);
  for (;;) {
    auto it = envs.envs.find(path);
    if (it == envs.envs.end()) break;
    if ((existing = it->second.lock())) {
      if (existing->options_.durability != options.durability) {
        return InvalidArgument("data directory '" + path +
                               "' is already open in this process with another durability");
      }
      return existing;
    }
    envs.changed.wait(envs.mu);  // The previous environment is still closing.
  }
  // The last reference may go in a callback on one of the environment's own threads (the
  // committer or the syncer, settling an asynchronous commit), which cannot join itself: the
  // environment is then closed from a thread of its own.
  std::shared_ptr<Env> env(new Env(options, path), [](Env* e) {
    if ((e->commit_queue_ && e->commit_queue_->on_own_thread()) ||
        (e->durability_ && e->durability_->on_own_thread())) {
      std::thread([e] { delete e; }).detach();
    } else {
      delete e;
    }
  });
  KVQ_RETURN_IF_ERROR(env->init());
  envs.envs[path] = env;
  env->registered_ = true;
  return env;
}

Status Env::copy_directory(const std::string& dir, int fd, bool compact) {
  std::shared_ptr<Env> open;  // released after the lock: ~Env may take it
  Registry& envs = registry();
  util::MutexLock lock(envs.mu);
  const std::string key = registry_key(dir);
  for (;;) {
    auto it = envs.envs.find(key);
    if (it == envs.envs.end()) break;
    if ((open = it->second.lock())) break;
    envs.changed.wait(envs.mu);  // an environment on it is still closing
  }
  if (open) {
    lock.unlock();
    return open->copy_to(fd, compact);
  }
  // Still holding the registry: a second environment on one directory in one process would
  // release the first one's file locks when it closes (LMDB's rule). Read-only, so that the copy
  // writes nothing to the directory and does not mix MDB_WRITEMAP modes with the processes
  // using it (docs/design/storage.md).
  MDB_env* env = nullptr;
  if (int rc = mdb_env_create(&env); rc) return status_from_lmdb(rc, "mdb_env_create");
  mdb_env_set_maxdbs(env, 4);
  Status status = status_from_lmdb(mdb_env_open(env, key.c_str(), MDB_RDONLY | MDB_NOTLS, 0644),
                                   "opening LMDB environment in '" + key + "' read-only");
  if (status.ok()) {
    status = status_from_lmdb(mdb_env_copyfd2(env, fd, compact ? MDB_CP_COMPACT : 0),
                              "copying the LMDB environment");
  }
  mdb_env_close(env);
  return status;
}

Status Env::init() {
  KVQ_RETURN_IF_ERROR(lock_mode());
  if (int rc = mdb_env_create(&env_); rc) return status_from_lmdb(rc, "mdb_env_create");
  mdb_env_set_maxdbs(env_, 4);
  mdb_env_set_maxreaders(env_, options_.max_readers);
  if (int rc = mdb_env_set_mapsize(env_, options_.initial_map_size); rc) {
    return status_from_lmdb(rc, "mdb_env_set_mapsize");
  }
  // NOTLS: a read snapshot belongs to a kv::Transaction, not to a thread.
  unsigned flags = MDB_NOTLS;
  // Never MDB_WRITEMAP: a write through the map onto a hole of a full disk is a SIGBUS
  // (docs/design/storage.md). durable: a commit's meta page is synced by the next commit or by
  // the DurabilityTracker, not by LMDB itself. relaxed: nothing is synced by a commit; the
  // syncer thread syncs and records what it synced (synced_state.h).
  if (options_.durability == Durability::kRelaxed) flags |= MDB_NOSYNC;
  if (options_.durability == Durability::kDurable) flags |= MDB_NOMETASYNC;
  if (int rc = mdb_env_open(env_, path_.c_str(), flags, 0644); rc) {
    return status_from_lmdb(rc, "opening LMDB environment in '" + path_ + "'");
  }
  // Reader slots left behind by processes that died (SIGKILL) would pin old pages forever.
  int dead = 0;
  mdb_reader_check(env_, &dead);

  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(env_, nullptr, 0, &txn); rc)
    return status_from_lmdb(rc, "mdb_txn_begin");
  int rc = mdb_dbi_open(txn, "data", MDB_CREATE, &data_dbi_);
  if (!rc) rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &meta_dbi_);
  if (rc) {
    mdb_txn_abort(txn);
    return status_from_lmdb(rc, "opening LMDB databases");
  }
  if (rc = mdb_txn_commit(txn); rc) return status_from_lmdb(rc, "committing LMDB databases");
  if (rc = mdb_env_sync(env_, 1); rc) return status_from_lmdb(rc, "syncing LMDB databases");
  if (options_.durability == Durability::kDurable) {
    durability_ = std::make_unique<DurabilityTracker>([this] { return sync_to_disk(); });
  } else {
    MDB_stat st;
    mdb_env_stat(env_, &st);  // reads the map: here, where it cannot be resized meanwhile
    page_size_ = static_cast<uint32_t>(st.ms_psize);
    auto identity = cache_identity(path_ + "/" + kDataFile);
    if (!identity.ok()) return identity.status();
    cache_identity_ = std::move(*identity);
    // Records and pins the state as it is now, before any commit of this process.
    KVQ_RETURN_IF_ERROR(sync_relaxed(/*force=*/true));
    syncer_ = std::thread([this] { run_relaxed_syncer(); });
  }

  commit_queue_ = std::make_unique<CommitQueue>(*this);
  watches_ = std::make_shared<WatchRegistry>(*this);
  return Status::OK();
}

Env::~Env() {
  if (commit_queue_) commit_queue_->stop();
  if (durability_) durability_->stop();
  if (syncer_.joinable()) {
    {
      util::MutexLock lock(syncer_mu_);
      syncer_stopping_ = true;
    }
    syncer_cv_.notify_all();
    syncer_.join();  // after a last sync: a relaxed store that is closed is on disk
  }
  if (pin_) mdb_txn_abort(pin_);
  if (watches_) watches_->shutdown();
  for (MDB_txn* txn : read_pool_) mdb_txn_abort(txn);
  if (env_) mdb_env_close(env_);
  if (mode_fd_ >= 0) ::close(mode_fd_);
  if (!registered_) return;
  Registry& envs = registry();
  util::MutexLock lock(envs.mu);
  auto it = envs.envs.find(path_);
  if (it != envs.envs.end() && it->second.expired()) envs.envs.erase(it);
  envs.changed.notify_all();
}

Result<MDB_txn*> Env::begin_txn(unsigned flags) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    gate_.enter();
    MDB_txn* txn = nullptr;
    int rc = 0;
    if (flags & MDB_RDONLY) {
      util::MutexLock lock(pool_mu_);
      if (!read_pool_.empty()) {
        txn = read_pool_.back();
        read_pool_.pop_back();
        lock.unlock();
        rc = mdb_txn_renew(txn);
        if (rc) mdb_txn_abort(txn);
      } else {
        lock.unlock();
        rc = mdb_txn_begin(env_, nullptr, flags, &txn);
      }
    } else {
      rc = mdb_txn_begin(env_, nullptr, flags, &txn);
    }
    if (rc == MDB_SUCCESS) return txn;
    gate_.leave();
    if (rc != MDB_MAP_RESIZED) return status_from_lmdb(rc, "beginning an LMDB transaction");
    KVQ_RETURN_IF_ERROR(adopt_map_size_from_other_process());
  }
  return Unavailable("the LMDB map kept being resized by another process");
}

Status Env::adopt_map_size_from_other_process() {
  return gate_.exclusive(
      [&] {
        util::MutexLock lock(pool_mu_);
        for (MDB_txn* txn : read_pool_) mdb_txn_abort(txn);
        read_pool_.clear();
        return status_from_lmdb(mdb_env_set_mapsize(env_, 0), "adopting the new LMDB map size");
      },
      kResizePatience);
}

Result<Env::ReadTxn> Env::begin_read() {
  KVQ_ASSIGN_OR_RETURN(MDB_txn * txn, begin_txn(MDB_RDONLY));
  return ReadTxn(this, txn);
}

void Env::release_read(MDB_txn* txn) {
  mdb_txn_reset(txn);
  {
    util::MutexLock lock(pool_mu_);
    if (read_pool_.size() < kReadPoolMax) {
      read_pool_.push_back(txn);
      txn = nullptr;
    }
  }
  if (txn) mdb_txn_abort(txn);
  gate_.leave();
}

Env::ReadTxn::~ReadTxn() {
  if (txn_) env_->release_read(txn_);
}

Result<MDB_txn*> Env::begin_write() { return begin_txn(0); }

int Env::sync_to_disk() {
  gate_.enter();
  const int rc = mdb_env_sync(env_, 1);
  gate_.leave();
  return rc;
}

int Env::end_write(MDB_txn* txn, bool commit_it) {
  int rc = MDB_SUCCESS;
  if (commit_it) {
    rc = mdb_txn_commit(txn);
  } else {
    mdb_txn_abort(txn);
  }
  gate_.leave();
  return rc;
}

Status Env::grow_map() {
  return gate_.exclusive(
      [&] {
        MDB_envinfo info;
        mdb_env_info(env_, &info);
        const uint64_t bigger = static_cast<uint64_t>(info.me_mapsize) * 2;
        util::MutexLock lock(pool_mu_);
        for (MDB_txn* txn : read_pool_) mdb_txn_abort(txn);
        read_pool_.clear();
        return status_from_lmdb(mdb_env_set_mapsize(env_, bigger),
                                "growing the LMDB map to " + std::to_string(bigger) + " bytes");
      },
      kResizePatience);
}

Status Env::copy_to(int fd, bool compact) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    gate_.enter();
    const int rc = mdb_env_copyfd2(env_, fd, compact ? MDB_CP_COMPACT : 0);
    gate_.leave();
    if (rc != MDB_MAP_RESIZED) return status_from_lmdb(rc, "copying the LMDB environment");
    KVQ_RETURN_IF_ERROR(adopt_map_size_from_other_process());
    if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
      return Internal(std::string("restarting the copy: ") + std::strerror(errno));
    }
  }
  return Unavailable("the LMDB map kept being resized by another process");
}

Status Env::lock_mode() {
  const std::string file = path_ + "/" + kModeFile;
  mode_fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (mode_fd_ < 0) return Unavailable("cannot open '" + file + "': " + errno_text(errno));
  auto lock = [&](short type, off_t byte, bool wait) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = byte;
    fl.l_len = 1;
    int rc;
    do rc = ::fcntl(mode_fd_, wait ? F_SETLKW : F_SETLK, &fl);
    while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : errno;
  };
  auto fail = [&](Status status) {
    ::close(mode_fd_);  // releases every lock this process holds on the file
    mode_fd_ = -1;
    return status;
  };
  // Byte 1 is a door, so that openers decide one at a time. Byte 0 is held shared by every
  // process that has the directory open: one that can lock it exclusively is alone, and names
  // the mode; any other must match it. The holders' locks go with them, however they end.
  if (int e = lock(F_WRLCK, 1, true))
    return fail(Unavailable("locking '" + file + "': " + errno_text(e)));
  const std::string mine = durability_name(options_.durability);
  Status status;
  if (lock(F_WRLCK, 0, false) == 0) {
    // Alone, and holding the door: no process has LMDB open on the directory, so a relaxed
    // store cut by a power loss is put back at its last synced state before LMDB reads it.
    auto restored = restore_if_needed(mode_fd_, path_ + "/" + kDataFile);
    if (!restored.ok()) return fail(restored.status());
    if (restored->restored) {
      std::fprintf(stderr,
                   "kvq: the relaxed store in '%s' lost its page cache unsynced (a power loss or "
                   "a reboot after a crash): restored to its last synced state (LMDB transaction "
                   "%llu; the disk named %llu)\n",
                   path_.c_str(), static_cast<unsigned long long>(restored->to_txnid),
                   static_cast<unsigned long long>(restored->from_txnid));
    }
    // A durable store keeps no record: a stale one must never undo its commits later.
    if (options_.durability == Durability::kDurable) {
      if (Status cleared = clear_records(mode_fd_); !cleared.ok()) return fail(cleared);
    }
    std::string header = mine + "\n";
    header.resize(kModeHeader, '\0');
    if (::pwrite(mode_fd_, header.data(), header.size(), 0) !=
        static_cast<ssize_t>(header.size())) {
      status = Unavailable("writing '" + file + "': " + errno_text(errno));
    }
  } else {
    char buf[32] = {};
    const ssize_t n = ::pread(mode_fd_, buf, sizeof buf - 1, 0);
    std::string theirs(buf, n > 0 ? static_cast<size_t>(n) : 0);
    theirs = theirs.substr(0, theirs.find_first_of(std::string("\n\0", 2)));
    if (theirs != mine) {
      status = FailedPrecondition(
          "data directory '" + path_ + "' is open in another process with durability '" + theirs +
          "', and this one asks for '" + mine +
          "': every process sharing a data directory must use the same durability");
    }
  }
  if (status.ok()) {
    if (int e = lock(F_RDLCK, 0, false))
      status = Unavailable("locking '" + file + "': " + errno_text(e));
  }
  if (!status.ok()) return fail(status);
  lock(F_UNLCK, 1, false);
  return Status::OK();
}

int64_t Env::free_bytes() const {
  struct statvfs st;
  if (::statvfs(path_.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

Status Env::write_error(int rc, std::string_view what) {
  if (rc == ENOSPC || rc == EDQUOT || rc == EIO) {
    const int64_t free = free_bytes();
    if (rc != EIO || (free >= 0 && free < kNearlyFullBytes)) {
      disk_full_.store(true, std::memory_order_relaxed);
      return ResourceExhausted(
          "disk full: the filesystem holding '" + path_ + "' has " +
          (free >= 0 ? std::to_string(free) : std::string("no")) + " bytes free, so " +
          std::string(what) + " failed (" + mdb_strerror(rc) +
          "); reads are still served, and writes succeed again once space is freed");
    }
  }
  return status_from_lmdb(rc, what);
}

Status Env::write_failure() const {
  if (durability_) return durability_->failed();
  if (!relaxed_has_failed_.load(std::memory_order_acquire))
    return Status::OK();  // every commit asks
  util::MutexLock lock(relaxed_mu_);
  return relaxed_failed_;
}

Status Env::write_health() {
  KVQ_RETURN_IF_ERROR(write_failure());
  if (!disk_full_.load(std::memory_order_relaxed)) return Status::OK();
  util::MutexLock lock(health_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_probe_ < kProbeInterval) {
    return disk_full_.load(std::memory_order_relaxed) ? last_probe_status_ : Status::OK();
  }
  last_probe_ = now;
  // A scratch file, reserved and removed: whether the filesystem has room for a commit again.
  const std::string probe = path_ + "/kvq.space-probe";
  int e = 0;
  const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    e = errno;
  } else {
    e = ::posix_fallocate(fd, 0, static_cast<off_t>(kSpaceProbeBytes));
    ::close(fd);
    ::unlink(probe.c_str());
  }
  if (e == 0) {
    disk_full_.store(false, std::memory_order_relaxed);
    last_probe_status_ = Status::OK();
    return Status::OK();
  }
  const int64_t free = free_bytes();
  last_probe_status_ = ResourceExhausted(
      "disk full: the store cannot write (the filesystem holding '" + path_ + "' has " +
      (free >= 0 ? std::to_string(free) : std::string("no")) + " bytes free, and reserving " +
      std::to_string(kSpaceProbeBytes) + " failed: " + errno_text(e) + "); reads are still served");
  return last_probe_status_;
}

Status Env::wait_while_sync_lags() {
  if (durability_ || !syncer_.joinable()) return Status::OK();
  const int64_t max_lag = std::chrono::nanoseconds(2 * options_.relaxed_sync_interval).count();
  auto keeps_up = [&] {
    return steady_ns() - synced_through_ns_.load(std::memory_order_acquire) <= max_lag;
  };
  if (keeps_up()) return Status::OK();  // every commit asks: no lock unless behind
  util::MutexLock lock(syncer_mu_);
  sync_wanted_ = true;
  syncer_cv_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + kMaxSyncLagWait;
  auto settled = [&]() KVQ_REQUIRES(syncer_mu_) {
    return keeps_up() || syncer_stopping_ || relaxed_has_failed_.load(std::memory_order_acquire);
  };
  while (!settled()) {
    if (!synced_cv_.wait_until(syncer_mu_, deadline)) break;
  }
  if (!settled()) {
    return Unavailable("the background sync of the relaxed store in '" + path_ + "' is more than " +
                       std::to_string(kMaxSyncLagWait.count()) +
                       " s behind (a slow or stalled disk); retry");
  }
  return write_failure();
}

void Env::run_relaxed_syncer() {
  util::MutexLock lock(syncer_mu_);
  for (;;) {
    const auto wake = std::chrono::steady_clock::now() + options_.relaxed_sync_interval;
    while (!syncer_stopping_ && !sync_wanted_) {
      if (!syncer_cv_.wait_until(syncer_mu_, wake)) break;
    }
    const bool stopping = syncer_stopping_;
    sync_wanted_ = false;
    lock.unlock();
    if (write_failure().ok()) {
      Status s = sync_relaxed(/*force=*/false);
      if (!s.ok()) {
        util::MutexLock failed(relaxed_mu_);
        relaxed_has_failed_.store(true, std::memory_order_release);
        relaxed_failed_ = Internal(
            "the background sync of a relaxed store failed, so no later commit is "
            "acknowledged (restart kvq): " +
            s.to_string());
      }
    }
    lock.lock();
    synced_cv_.notify_all();
    if (stopping) return;
  }
}

Status Env::sync_relaxed(bool force) {
  int fd = -1;
  if (int rc = mdb_env_get_fd(env_, &fd); rc) return status_from_lmdb(rc, "mdb_env_get_fd");
  auto write_back = [&](unsigned flags) {
    int rc;
    do rc = ::sync_file_range(fd, 0, 0, flags);
    while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : errno;
  };
  // Most of the writing happens here, before taking the lock, so that commits are held up only
  // for what they wrote meanwhile and the two flushes.
  constexpr unsigned kWriteAndWait =
      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
  if (int e = write_back(kWriteAndWait); e) return Internal("sync_file_range: " + errno_text(e));

  // LMDB's write lock: while it is held no commit of any process writes a page, so the state
  // synced below is the newest one, and the one recorded.
  gate_.enter();
  MDB_txn* writer = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, 0, &writer);
  if (rc == MDB_MAP_RESIZED) {
    gate_.leave();
    KVQ_RETURN_IF_ERROR(adopt_map_size_from_other_process());
    gate_.enter();
    rc = mdb_txn_begin(env_, nullptr, 0, &writer);
  }
  if (rc) {
    gate_.leave();
    return status_from_lmdb(rc, "taking LMDB's write lock to sync");
  }
  const int64_t locked_at = steady_ns();
  auto version = version_in(writer);
  if (!version.ok() || (!force && *version == synced_version_)) {
    mdb_txn_abort(writer);
    gate_.leave();
    if (version.ok())
      synced_through_ns_.store(locked_at, std::memory_order_release);  // nothing new to sync
    return version.status();
  }
  // The state being synced, pinned (a reader slot) until a later sync has recorded a newer one:
  // LMDB reuses no page a reader may need, so the recorded state's pages stay as they are on
  // disk whatever is written meanwhile, and a restore to it finds them. Never read through.
  MDB_txn* pin = nullptr;
  rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &pin);
  Status status = status_from_lmdb(rc, "pinning the synced LMDB state");
  // 1. Every page of the state onto the disk, and the filesystem's journal with them (blocks
  //    new to the file). Its meta pages go too, but need not: the record decides after a power
  //    loss, as the kernel may write a later meta page back at any time.
  if (status.ok() && ::fdatasync(fd) != 0)
    status = Internal("fdatasync of the data file: " + errno_text(errno));
  // 2. Then, durably, the record naming that state.
  if (status.ok()) {
    const uint64_t txnid = mdb_txn_id(writer) - 1;  // a writer's id is the last commit's plus one
    auto meta = read_meta(fd, page_size_, txnid);
    status = meta.ok() ? record(mode_fd_, SyncedState{.txnid = txnid,
                                                      .page_size = page_size_,
                                                      .meta = std::move(*meta),
                                                      .cache = cache_identity_})
                       : meta.status();
  }
  mdb_txn_abort(writer);
  gate_.leave();
  if (!status.ok()) {
    if (pin) mdb_txn_abort(pin);
    return status;
  }
  if (pin_) mdb_txn_abort(pin_);
  pin_ = pin;
  synced_version_ = *version;
  synced_through_ns_.store(locked_at, std::memory_order_release);
  return Status::OK();
}

Result<uint64_t> Env::version_in(MDB_txn* txn) const {
  MDB_val key = as_val(kVersionKey), value;
  int rc = mdb_get(txn, meta_dbi_, &key, &value);
  if (rc == MDB_NOTFOUND) return uint64_t{0};
  if (rc) return status_from_lmdb(rc, "reading the commit counter");
  return decode_version(as_view(value));
}

}  // namespace kvq::kv::lmdb
