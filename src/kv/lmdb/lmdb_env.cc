#include "kv/lmdb/lmdb_env.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "kv/lmdb/commit_queue.h"
#include "kv/lmdb/durability.h"
#include "kv/lmdb/watch_registry.h"

namespace kvq::kv::lmdb {
namespace {

constexpr char kVersionKey[] = "version";
constexpr size_t kReadPoolMax = 64;
constexpr auto kResizePatience = std::chrono::seconds(5);

// LMDB's rule is one environment per directory per process, so opens are shared by path.
// Never destroyed: an environment whose last reference went on one of its own threads closes on
// a detached thread (Env::open), which may still be closing while the process exits.
std::mutex& registry_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::string, std::weak_ptr<Env>>& registry() {
  static auto* envs = new std::map<std::string, std::weak_ptr<Env>>;
  return *envs;
}
// Signalled when a closing environment has left the registry, so a reopen never overlaps it.
std::condition_variable& registry_changed() {
  static auto* cv = new std::condition_variable;
  return *cv;
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
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !resizing_; });
  ++active_;
}

void MapGate::leave() {
  std::lock_guard lock(mu_);
  if (--active_ == 0) cv_.notify_all();
}

Status MapGate::exclusive(const std::function<Status()>& fn, std::chrono::milliseconds patience) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !resizing_; });
  resizing_ = true;
  const bool idle = cv_.wait_for(lock, patience, [&] { return active_ == 0; });
  Status status = idle ? fn()
                       : Unavailable("the LMDB map must grow but transactions stayed open for " +
                                     std::to_string(patience.count()) + " ms");
  resizing_ = false;
  cv_.notify_all();
  return status;
}

// ---- Env ----

Env::Env(LmdbOptions options, std::string path) : options_(std::move(options)), path_(std::move(path)) {}

Result<std::shared_ptr<Env>> Env::open(const LmdbOptions& options) {
  if (options.path.empty()) return InvalidArgument("LMDB data directory path is empty");
  std::error_code ec;
  std::filesystem::create_directories(options.path, ec);
  if (ec) return Unavailable("cannot create data directory '" + options.path + "': " + ec.message());
  const std::string path = registry_key(options.path);

  // Declared before the lock, so released after it: if every other reference went meanwhile
  // (another thread, or a commit settled on the environment's own threads), this is the last
  // one, and ~Env takes the registry's lock itself.
  std::shared_ptr<Env> existing;
  std::unique_lock lock(registry_mutex());
  for (;;) {
    auto it = registry().find(path);
    if (it == registry().end()) break;
    if ((existing = it->second.lock())) {
      if (existing->options_.durability != options.durability) {
        return InvalidArgument("data directory '" + path +
                               "' is already open in this process with another durability");
      }
      return existing;
    }
    registry_changed().wait(lock);  // The previous environment is still closing.
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
  registry()[path] = env;
  env->registered_ = true;
  return env;
}

Status Env::copy_directory(const std::string& dir, int fd, bool compact) {
  std::shared_ptr<Env> open;  // released after the lock: ~Env may take it
  std::unique_lock lock(registry_mutex());
  const std::string key = registry_key(dir);
  for (;;) {
    auto it = registry().find(key);
    if (it == registry().end()) break;
    if ((open = it->second.lock())) break;
    registry_changed().wait(lock);  // an environment on it is still closing
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
  if (int rc = mdb_env_create(&env_); rc) return status_from_lmdb(rc, "mdb_env_create");
  mdb_env_set_maxdbs(env_, 4);
  mdb_env_set_maxreaders(env_, options_.max_readers);
  if (int rc = mdb_env_set_mapsize(env_, options_.initial_map_size); rc) {
    return status_from_lmdb(rc, "mdb_env_set_mapsize");
  }
  // NOTLS: a read snapshot belongs to a kv::Transaction, not to a thread.
  unsigned flags = MDB_NOTLS;
  // Without fsync, writing pages straight into the map beats malloc + pwrite; see
  // docs/design/storage.md for why sync keeps the default mode. With sync, a commit's meta page
  // is synced by the next commit or by the DurabilityTracker, not by LMDB itself.
  if (options_.durability == Durability::kNoSync) flags |= MDB_NOSYNC | MDB_WRITEMAP;
  if (options_.durability == Durability::kSync) flags |= MDB_NOMETASYNC;
  if (int rc = mdb_env_open(env_, path_.c_str(), flags, 0644); rc) {
    return status_from_lmdb(rc, "opening LMDB environment in '" + path_ + "'");
  }
  // Reader slots left behind by processes that died (SIGKILL) would pin old pages forever.
  int dead = 0;
  mdb_reader_check(env_, &dead);

  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(env_, nullptr, 0, &txn); rc) return status_from_lmdb(rc, "mdb_txn_begin");
  int rc = mdb_dbi_open(txn, "data", MDB_CREATE, &data_dbi_);
  if (!rc) rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &meta_dbi_);
  if (rc) {
    mdb_txn_abort(txn);
    return status_from_lmdb(rc, "opening LMDB databases");
  }
  if (rc = mdb_txn_commit(txn); rc) return status_from_lmdb(rc, "committing LMDB databases");
  if (options_.durability == Durability::kSync) {
    if (rc = mdb_env_sync(env_, 1); rc) return status_from_lmdb(rc, "syncing LMDB databases");
    durability_ = std::make_unique<DurabilityTracker>([this] { return sync_to_disk(); });
  }

  commit_queue_ = std::make_unique<CommitQueue>(*this);
  watches_ = std::make_shared<WatchRegistry>(*this);
  return Status::OK();
}

Env::~Env() {
  if (commit_queue_) commit_queue_->stop();
  if (durability_) durability_->stop();
  if (watches_) watches_->shutdown();
  for (MDB_txn* txn : read_pool_) mdb_txn_abort(txn);
  if (env_) mdb_env_close(env_);
  if (!registered_) return;
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(path_);
  if (it != registry().end() && it->second.expired()) registry().erase(it);
  registry_changed().notify_all();
}

Result<MDB_txn*> Env::begin_txn(unsigned flags) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    gate_.enter();
    MDB_txn* txn = nullptr;
    int rc = 0;
    if (flags & MDB_RDONLY) {
      std::unique_lock lock(pool_mu_);
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
        std::lock_guard lock(pool_mu_);
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
    std::lock_guard lock(pool_mu_);
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
        std::lock_guard lock(pool_mu_);
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

Result<uint64_t> Env::version_in(MDB_txn* txn) const {
  MDB_val key = as_val(kVersionKey), value;
  int rc = mdb_get(txn, meta_dbi_, &key, &value);
  if (rc == MDB_NOTFOUND) return uint64_t{0};
  if (rc) return status_from_lmdb(rc, "reading the commit counter");
  return decode_version(as_view(value));
}

}  // namespace kvq::kv::lmdb
