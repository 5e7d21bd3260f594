#include "kv/lmdb/synced_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace kvq::kv::lmdb {
namespace {

// Newer than Debian 12's headers: the mount's id that a boot never hands out twice (Linux 6.8).
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

constexpr uint32_t kMetaMagic = 0xBEEFC0DE;  // MDB_MAGIC
constexpr size_t kPageHeader = 16;           // PAGEHDRSZ: where MDB_meta starts in its page
// Offsets inside MDB_meta.
constexpr size_t kMagicAt = 0;
constexpr size_t kLastPageAt = 120;
constexpr size_t kTxnidAt = 128;

// A record slot: fixed fields at fixed offsets (native byte order: the file never leaves its
// machine's disk), then an FNV-1a checksum of everything before it.
constexpr off_t kSlotOffset[2] = {512, 1024};
constexpr char kRecordMagic[8] = {'k', 'v', 'q', 's', 'y', 'n', 'c', '1'};
constexpr size_t kSeqAt = 8, kTxnAt = 16, kPageSizeAt = 24, kInodeAt = 32, kBirthAt = 40,
                 kMountAt = 48, kBootAt = 56, kBootBytes = 40, kMetaAt = kBootAt + kBootBytes,
                 kChecksumAt = kMetaAt + kMetaBytes, kSlotBytes = kChecksumAt + 8;

std::string errno_text(int e) { return std::strerror(e); }

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

uint64_t fnv1a(const char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(p[i])) * 1099511628211ull;
  return h;
}

bool read_exact(int fd, char* buf, size_t n, off_t at) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, at + static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

bool write_exact(int fd, const char* buf, size_t n, off_t at) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd, buf + done, n - done, at + static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

struct Slot {
  uint64_t seq = 0;
  SyncedState state;
};

std::optional<Slot> decode_slot(const char* b) {
  if (std::memcmp(b, kRecordMagic, sizeof kRecordMagic) != 0) return std::nullopt;
  if (load<uint64_t>(b + kChecksumAt) != fnv1a(b, kChecksumAt)) return std::nullopt;  // torn
  Slot slot;
  slot.seq = load<uint64_t>(b + kSeqAt);
  slot.state.txnid = load<uint64_t>(b + kTxnAt);
  slot.state.page_size = load<uint32_t>(b + kPageSizeAt);
  slot.state.cache.inode = load<uint64_t>(b + kInodeAt);
  slot.state.cache.birth_ns = load<int64_t>(b + kBirthAt);
  slot.state.cache.mount_id = load<uint64_t>(b + kMountAt);
  slot.state.cache.boot_id.assign(b + kBootAt, strnlen(b + kBootAt, kBootBytes));
  slot.state.meta.assign(b + kMetaAt, kMetaBytes);
  return slot;
}

Result<std::optional<Slot>> newest_slot(int lock_fd) {
  std::optional<Slot> newest;
  for (off_t at : kSlotOffset) {
    char b[kSlotBytes];
    if (!read_exact(lock_fd, b, sizeof b, at)) continue;  // never written: the file is shorter
    auto slot = decode_slot(b);
    if (slot && (!newest || slot->seq > newest->seq)) newest = std::move(slot);
  }
  return newest;
}

bool valid_meta(const std::string& meta) {
  return meta.size() == kMetaBytes && load<uint32_t>(meta.data() + kMagicAt) == kMetaMagic;
}

}  // namespace

Result<CacheIdentity> cache_identity(const std::string& data_file) {
  CacheIdentity id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, id.boot_id);
  id.boot_id.resize(std::min(id.boot_id.size(), kBootBytes));
  struct statx st {};
  if (::statx(AT_FDCWD, data_file.c_str(), 0,
              STATX_INO | STATX_BTIME | STATX_MNT_ID | STATX_MNT_ID_UNIQUE, &st) != 0) {
    if (errno == ENOENT) return id;  // no data file yet: nothing to describe
    return Internal("statx of '" + data_file + "': " + errno_text(errno));
  }
  id.inode = st.stx_ino;
  if (st.stx_mask & STATX_BTIME)
    id.birth_ns = int64_t{st.stx_btime.tv_sec} * 1000000000 + st.stx_btime.tv_nsec;
  // Without a unique id (before Linux 6.8) a later mount may reuse the number; it still tells
  // mounts apart that are up at once, and the boot id tells boots apart.
  if (st.stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE)) id.mount_id = st.stx_mnt_id;
  return id;
}

Result<std::string> read_meta(int data_fd, uint32_t page_size, uint64_t txnid) {
  std::string meta(kMetaBytes, '\0');
  const off_t at = static_cast<off_t>((txnid & 1) * page_size + kPageHeader);
  if (!read_exact(data_fd, meta.data(), meta.size(), at))
    return Internal("reading LMDB's meta page: " + errno_text(errno));
  if (!valid_meta(meta) || load<uint64_t>(meta.data() + kTxnidAt) != txnid)
    return Internal("LMDB's meta page " + std::to_string(txnid & 1) +
                    " does not describe transaction " + std::to_string(txnid));
  return meta;
}

Status record(int lock_fd, const SyncedState& state) {
  auto newest = newest_slot(lock_fd);
  if (!newest.ok()) return newest.status();
  const uint64_t seq = *newest ? (*newest)->seq + 1 : 1;
  char b[kSlotBytes] = {};
  std::memcpy(b, kRecordMagic, sizeof kRecordMagic);
  store(b + kSeqAt, seq);
  store(b + kTxnAt, state.txnid);
  store(b + kPageSizeAt, state.page_size);
  store(b + kInodeAt, state.cache.inode);
  store(b + kBirthAt, state.cache.birth_ns);
  store(b + kMountAt, state.cache.mount_id);
  std::memcpy(b + kBootAt, state.cache.boot_id.data(),
              std::min(state.cache.boot_id.size(), kBootBytes));
  std::memcpy(b + kMetaAt, state.meta.data(), std::min(state.meta.size(), kMetaBytes));
  store(b + kChecksumAt, fnv1a(b, kChecksumAt));
  if (!write_exact(lock_fd, b, sizeof b, kSlotOffset[seq & 1]) || ::fdatasync(lock_fd) != 0)
    return Internal("recording the synced state in kvq.lock: " + errno_text(errno));
  return Status::OK();
}

Result<std::optional<SyncedState>> read_record(int lock_fd) {
  auto newest = newest_slot(lock_fd);
  if (!newest.ok()) return newest.status();
  if (!*newest) return std::optional<SyncedState>();
  return std::optional<SyncedState>((*newest)->state);
}

Status clear_records(int lock_fd) {
  auto newest = newest_slot(lock_fd);
  if (!newest.ok()) return newest.status();
  if (!*newest) return Status::OK();
  const char zeros[kSlotBytes] = {};
  for (off_t at : kSlotOffset) {
    if (!write_exact(lock_fd, zeros, sizeof zeros, at))
      return Internal("clearing kvq.lock's records: " + errno_text(errno));
  }
  if (::fdatasync(lock_fd) != 0) return Internal("fdatasync of kvq.lock: " + errno_text(errno));
  return Status::OK();
}

Result<Restore> restore_if_needed(int lock_fd, const std::string& data_file) {
  auto found = read_record(lock_fd);
  if (!found.ok()) return found.status();
  if (!*found) return Restore{};
  const SyncedState& rec = **found;
  auto now = cache_identity(data_file);
  if (!now.ok()) return now.status();
  // Another file than the one recorded (restored from a backup, say), or none at all.
  if (now->inode == 0 || now->inode != rec.cache.inode || now->birth_ns != rec.cache.birth_ns)
    return Restore{};
  // The page cache the record was made under is still there: it holds every page LMDB wrote.
  if (!now->boot_id.empty() && now->boot_id == rec.cache.boot_id &&
      now->mount_id == rec.cache.mount_id)
    return Restore{};
  if (rec.page_size == 0 || !valid_meta(rec.meta))
    return Internal("kvq.lock's record of the synced state is malformed");

  const int fd = ::open(data_file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Internal("opening '" + data_file + "': " + errno_text(errno));
  auto done = [&](Result<Restore> r) {
    ::close(fd);
    return r;
  };
  std::string disk[2];
  uint64_t newest = 0;
  for (int i = 0; i < 2; ++i) {
    disk[i].assign(kMetaBytes, '\0');
    if (!read_exact(fd, disk[i].data(), kMetaBytes, i * rec.page_size + kPageHeader))
      disk[i].clear();
    if (valid_meta(disk[i])) newest = std::max(newest, load<uint64_t>(disk[i].data() + kTxnidAt));
  }
  Restore result{.restored = false, .from_txnid = newest, .to_txnid = rec.txnid};
  if (newest == rec.txnid && disk[rec.txnid & 1] == rec.meta) return done(result);

  struct stat st {};
  const uint64_t last_page = load<uint64_t>(rec.meta.data() + kLastPageAt);
  if (::fstat(fd, &st) != 0 ||
      static_cast<uint64_t>(st.st_size) < (last_page + 1) * uint64_t{rec.page_size}) {
    return done(FailedPrecondition(
        "the data file '" + data_file + "' is shorter than its last synced state (transaction " +
        std::to_string(rec.txnid) + ") needs: it cannot be restored after the power loss"));
  }
  for (int i = 0; i < 2; ++i) {
    if (!write_exact(fd, rec.meta.data(), kMetaBytes, i * rec.page_size + kPageHeader))
      return done(Internal("restoring LMDB's meta page: " + errno_text(errno)));
  }
  if (::fdatasync(fd) != 0)
    return done(Internal("fdatasync of '" + data_file + "': " + errno_text(errno)));
  result.restored = true;
  return done(result);
}

}  // namespace kvq::kv::lmdb
